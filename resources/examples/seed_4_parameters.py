# Title: Seed: parameters are shards
# Model: Qwen/Qwen3-8B (--model-dir Qwen/Qwen3-8B=PATH maps it to a checkpoint of its shape; the demo model is too small)
# From the seed page, verbatim: parameters read inside a trace are this rank's piece.
from nnsight.modeling.vllm import VLLM

model = VLLM("Qwen/Qwen3-8B", dispatch=True, tensor_parallel_size=2)

with model.trace("The capital of France is", temperature=0.0):
    w = model.model.layers[10].self_attn.o_proj.weight.shape
    lm = model.lm_head.weight.shape
    shapes = (tuple(w), tuple(lm)).save()

print(shapes)
