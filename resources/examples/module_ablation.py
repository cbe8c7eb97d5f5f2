# Title: Module ablation
# Model: demo (the built-in demo model; for another model set n_layers to its num_hidden_layers)
# Zeroes the output of each attention block and each MLP in turn and measures how far the
# next-token distribution moves (KL divergence from the unablated run).
from nnsight.modeling.vllm import VLLM

model = VLLM("demo", tensor_parallel_size=2, dispatch=True)
n_layers = 4
prompt = "The capital of France is"

with model.trace(prompt, temperature=0.0):
    plain_logits = model.logits.save()
plain_lp = plain_logits.log_softmax(-1)
top = plain_logits.argmax(-1).item()
print(f"prediction {model.tokenizer.decode(top)!r}, log p {plain_lp[0, top].item():.3f}")

effects = list()
for layer in range(n_layers):
    for part in ["self_attn", "mlp"]:
        block = model.model.layers[layer]
        module = block.self_attn if part == "self_attn" else block.mlp
        with model.trace(prompt, temperature=0.0):
            module.output[:] = 0
            logits = model.logits.save()
        lp = logits.log_softmax(-1)
        # KL(plain || ablated) of the next-token distribution: how much the module mattered.
        kl = (plain_lp.exp() * (plain_lp - lp)).sum().item()
        effects.append(kl)
        print(f"zero layers[{layer}].{part:9s}: KL {kl:.4f}, log p of the prediction {lp[0, top].item():.3f}")

assert min(effects) > 0, "every block should move the prediction"
