# Rank processes against rank threads (tst_engine_server): reads of every port kind, whole on
# every rank. A pasted vLLM script keeps its executor keyword: the engine server runs it.
from nnsight.modeling.vllm import VLLM

model = VLLM("demo", tensor_parallel_size=2, distributed_executor_backend="ray")
l = model.model.layers[1]

with model.trace("The capital of France is"):
    qkv = l.self_attn.qkv_proj.output[0]
    q3 = l.self_attn.qkv_proj.q_head(qkv, 3).clone().save()
    k1 = l.self_attn.qkv_proj.k_head(qkv, 1).clone().save()
    z = l.self_attn.o_proj.input.clone().save()
    col = l.mlp.act_fn.output.clone().save()
    h = sum(l.output).save()
    logits = model.logits.save()

for name, v in [("q3", q3), ("k1", k1), ("z", z), ("col", col), ("h", h), ("logits", logits)]:
    print(name, v.shape, float(v.sum()), float(v.abs().max()))
print(model.tokenizer.decode(logits.argmax(-1)))
