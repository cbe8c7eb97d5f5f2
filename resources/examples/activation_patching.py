# Title: Activation patching
# Model: demo (the built-in demo model; for another model set n_layers to its num_hidden_layers)
# Runs a corrupted prompt with one layer's residual stream at the last token taken from the
# clean prompt, layer by layer, and reports how much of the clean answer's log-probability
# each patch restores. Patching the last layer restores it exactly.
from nnsight.modeling.vllm import VLLM

model = VLLM("demo", tensor_parallel_size=2, dispatch=True)
n_layers = 4
clean = "The capital of France is"
corrupt = "The capital of Italy is"

with model.trace(clean, temperature=0.0):
    hidden = list().save()
    residual = list().save()
    for i in range(n_layers):
        out = model.model.layers[i].output
        hidden.append(out[0][-1].clone())
        residual.append(out[1][-1].clone())
    clean_logits = model.logits.save()

with model.trace(corrupt, temperature=0.0):
    corrupt_logits = model.logits.save()

answer = clean_logits.argmax(-1).item()


def log_prob(logits):
    return logits.log_softmax(-1)[0, answer].item()


full = log_prob(clean_logits)
base = log_prob(corrupt_logits)
print(f"clean answer {model.tokenizer.decode(answer)!r}: log p {full:.3f} after the clean prompt, {base:.3f} after the corrupt one")
recovered = list()
for layer in range(n_layers):
    with model.trace(corrupt, temperature=0.0):
        out = model.model.layers[layer].output
        out[0][-1] = hidden[layer]
        out[1][-1] = residual[layer]
        patched = model.logits.save()
    share = (log_prob(patched) - base) / (full - base)
    recovered.append(share)
    print(f"patch layer {layer}: recovers {share:.3f} of the clean answer's log-probability")

assert abs(recovered[-1] - 1.0) < 1e-3, "patching the last layer must restore the clean logits"
