# Title: Logit lens
# Model: demo (the built-in demo model; for another model set n_layers to its num_hidden_layers)
# Every layer's residual stream (hidden + residual) through the final norm and the LM head:
# what the model would predict if that layer were its last. Under TP use
# model.logits_processor, which gathers the vocabulary. The last layer agrees with the model.
from nnsight.modeling.vllm import VLLM

model = VLLM("demo", tensor_parallel_size=2, dispatch=True)
n_layers = 4

with model.trace("The capital of France is", temperature=0.0):
    lens = list().save()
    for i in range(n_layers):
        h = sum(model.model.layers[i].output)
        logits = model.logits_processor(model.lm_head, model.model.norm(h))
        lens.append(logits[-1].argmax(-1).item())
    final = model.logits.save()

for i in range(n_layers):
    print(f"layer {i}: {model.tokenizer.decode(lens[i])!r}")
prediction = final.argmax(-1).item()
print(f"model: {model.tokenizer.decode(prediction)!r}")
assert lens[n_layers - 1] == prediction, "the last layer's lens must be the model's own prediction"
