# Issue 14, defect 1: a process whose first trace writes a port of layer 1 (bf16, CUDA graphs on,
# two GPUs over NCCL) must finish. LAYER and EXTRA are replaced by scripts/gpu/first-trace.
from nnsight.modeling.vllm import VLLM
model = VLLM("Qwen/Qwen2.5-1.5B", tensor_parallel_size=2, dispatch=True EXTRA)
with model.trace("The mother tongue of Danielle Darrieux is", temperature=0.0):
    model.model.layers[LAYER].mlp.output.zero_()
    logits = model.logits.save()
print(logits.shape)
