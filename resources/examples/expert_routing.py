# Title: Expert routing (Qwen3-MoE)
# Model: Qwen/Qwen3-30B-A3B, or any Qwen3-MoE checkpoint (--model-dir Qwen/Qwen3-30B-A3B=PATH); the demo model is dense
# Which experts the router of one MoE layer picks for each token and with what weight,
# then the busiest expert ablated (its router logit set to -inf at every step).
from nnsight.modeling.vllm import VLLM

model = VLLM("Qwen/Qwen3-30B-A3B", tensor_parallel_size=2, dispatch=True)
layer = 1
top_k = 4  # num_experts_per_tok of the model's config.json (8 for Qwen3-30B-A3B)
prompt = "The capital of France is"
moe = model.model.layers[layer].mlp

with model.trace(prompt, temperature=0.0, max_tokens=6) as tracer:
    with tracer.invoke(prompt):
        router = moe.gate.output[0].clone().save()
        plain = tracer.result.save()

probs = router.float().softmax(-1)
weights, experts = probs.topk(top_k, -1)
ids = model.tokenizer.encode(prompt)
n_experts = router.shape[1]
load = torch.zeros(n_experts)
for t in range(len(ids)):
    chosen = experts[t].tolist()
    for e in chosen:
        load[e] += 1
    print(f"token {t} {model.tokenizer.decode(ids[t])!r}: experts {chosen}, weights {weights[t]}")
busiest = load.argmax().item()
print(f"layer {layer}: expert {busiest} is chosen by {int(load[busiest].item())} of {len(ids)} tokens")

with model.trace(prompt, temperature=0.0, max_tokens=6) as tracer:
    for step in tracer.iter[:]:
        router_logits = moe.gate.output[0]
        router_logits[:, busiest] = float("-inf")
        if step == 0:
            routed = router_logits.clone().save()
    ablated = tracer.result.save()

print("plain:  ", repr(plain.outputs[0].text))
print(f"without expert {busiest}:", repr(ablated.outputs[0].text))
still = 0
for t in range(routed.shape[0]):
    still += busiest in routed.topk(top_k, -1)[1][t].tolist()
print(f"tokens still routed to expert {busiest}: {still}")
assert still == 0
