from nnsight.modeling.vllm import VLLM

model = VLLM("Qwen/Qwen3-8B", dispatch=True, tensor_parallel_size=2)
break
with model.trace("The capital of France is", temperature=0.0):
    w = model.model.layers[1].self_attn.o_proj.weight.shape
    lm = model.lm_head.weight.shape
    shapes = (tuple(w), tuple(lm)).save()

print(shapes)
