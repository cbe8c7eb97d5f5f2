# Title: Seed: mixture of experts
# Model: Qwen/Qwen3-30B-A3B (--model-dir Qwen/Qwen3-30B-A3B=PATH maps it to a Qwen3-MoE checkpoint)
# From the seed page, verbatim: router logits (replicated) and the experts' all-reduced output.
from nnsight.modeling.vllm import VLLM

model = VLLM("Qwen/Qwen3-30B-A3B", dispatch=True, tensor_parallel_size=2)
moe = model.model.layers[1].mlp

with model.trace("The capital of France is", temperature=0.0):
    router = moe.gate.output[0].clone().save()    # replicated: the same [pos, experts] on every rank
    experts = moe.experts.output.clone().save()   # partial sum per rank: all-reduced, [pos, hidden]
    logits = model.logits.save()

print(router.shape, experts.shape)
