# Title: Seed: writes land on every rank
# Model: Qwen/Qwen3-8B (--model-dir Qwen/Qwen3-8B=PATH maps it to a checkpoint of its shape; the demo model is too small)
# From the seed page, verbatim: one head zeroed at every step of a generation; the edit is re-sharded.
from nnsight.modeling.vllm import VLLM

model = VLLM("Qwen/Qwen3-8B", dispatch=True, tensor_parallel_size=2)
head, d = 7, 128

with model.trace("The capital of France is", temperature=0.0, max_tokens=8) as tracer:
    for _ in tracer.iter[:8]:
        model.model.layers[10].self_attn.o_proj.input[:, head * d:(head + 1) * d] = 0
    out = tracer.result.save()

print(repr(out.outputs[0].text))
