# Title: Seed: the same block, sharded
# Model: Qwen/Qwen3-8B (--model-dir Qwen/Qwen3-8B=PATH maps it to a checkpoint of its shape; the demo model is too small)
# From the seed page, verbatim: every value a trace reads is the whole tensor (qkv, o_proj input, residual, logits).
from nnsight.modeling.vllm import VLLM

model = VLLM("Qwen/Qwen3-8B", dispatch=True, tensor_parallel_size=2)
attn = model.model.layers[10].self_attn

with model.trace("The capital of France is", temperature=0.0):
    qkv = attn.qkv_proj.output[0].clone().save()        # column-parallel: gathered, [pos, 6144]
    z = attn.o_proj.input.clone().save()                # row-parallel input: gathered, [pos, 4096]
    resid = sum(model.model.layers[10].output).save()   # already whole: [pos, 4096]
    logits = model.logits.save()

print(qkv.shape, z.shape, resid.shape, model.tokenizer.decode(logits.argmax(-1)))
