# Title: Seed: rank order in fused tensors
# Model: Qwen/Qwen3-8B (--model-dir Qwen/Qwen3-8B=PATH maps it to a checkpoint of its shape; the demo model is too small)
# From the seed page, verbatim: query heads sliced out of the gathered qkv_proj output by rank.
from nnsight.modeling.vllm import VLLM

model = VLLM("Qwen/Qwen3-8B", dispatch=True, tensor_parallel_size=2)
attn = model.model.layers[10].self_attn
tp, n_heads, n_kv, d = 2, 32, 8, 128
per_rank = (n_heads + 2 * n_kv) // tp * d          # 3072 columns per rank: 16 q, 4 k, 4 v heads


def q_of_head(qkv, h):
    rank, local = divmod(h, n_heads // tp)
    start = rank * per_rank + local * d
    return qkv[:, start:start + d]


with model.trace("The capital of France is", temperature=0.0):
    qkv = attn.qkv_proj.output[0]
    q7 = q_of_head(qkv, 7).clone().save()
    q20 = q_of_head(qkv, 20).clone().save()          # lives on rank 1

print(q7.shape, q20.shape)
