from nnsight.modeling.vllm import VLLM

# With VLLM_DCP_Q_REPLICATE=1 (ShardScope's only decode-context layout): q_proj is group-sharded.
model = VLLM("deepseek-ai/DeepSeek-V2-Lite", dispatch=True, tensor_parallel_size=4, decode_context_parallel_size=2)
attn = model.model.layers[1].self_attn

with model.trace("The capital of France is", temperature=0.0, max_tokens=8) as tracer:
    q = attn.q_proj.output[0].clone().save()      # group replicas dropped: [pos, 16 * 192]
    kv = attn.kv_b_proj.output[0].clone().save()  # column: [pos, 16 * (128 + 128)]
    z = attn.o_proj.input.clone().save()          # row input: [pos, 16 * 128]
    moe = model.model.layers[1].mlp.output.clone().save()  # reduced: [pos, 2048]
    out = tracer.result.save()

print(q.shape, kv.shape, z.shape, moe.shape)
