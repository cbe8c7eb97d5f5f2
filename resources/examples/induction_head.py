# Title: Induction head
# Model: demo (the built-in demo model, whose induction head is layer 3 head 7; for another model set layer, head and head_dim)
# A sequence of random tokens said twice. The model cannot predict the first copy, but it predicts
# the second by copying: its induction head attends from each token of the second copy to the
# token that followed the same token in the first copy (the attention view shows it as a stripe).
from nnsight.modeling.vllm import VLLM

model = VLLM("demo", tensor_parallel_size=2, dispatch=True)
layer, head, head_dim, n = 3, 7, 32, 48
kv_head = head // 2  # 8 query heads share 4 KV heads

# The same pseudo-random tokens every run (a linear congruential generator).
x, seq = 12345, []
for _ in range(n):
    x = (x * 1103515245 + 12345) % 2147483648
    seq.append(x // 65536 % 8000)
ids = seq + seq

with model.trace(ids, temperature=0.0):
    qk = model.model.layers[layer].self_attn.rotary_emb.output
    q = qk[0][:, head * head_dim:(head + 1) * head_dim].save()
    k = qk[1][:, kv_head * head_dim:(kv_head + 1) * head_dim].save()
    h = sum(model.model.layers[3].output)
    probs = model.logits_processor(model.lm_head, model.model.norm(h)).softmax(-1).save()

first = 0.0
second = 0.0
for i in range(n - 1):
    first -= probs[i, ids[i + 1]].log().item() / (n - 1)
    second -= probs[n + i, ids[n + i + 1]].log().item() / (n - 1)
print(f"loss on the first copy {first:.2f}, on the second {second:.2f} nats")

scores = torch.matmul(q, k.transpose(0, 1)) / head_dim ** 0.5
weight = 0.0
for i in range(n, 2 * n):
    weight += scores[i, :i + 1].softmax(-1)[i - n + 1].item() / n
print(f"layer {layer} head {head}: {weight:.2f} of its attention on the token after the previous occurrence")
