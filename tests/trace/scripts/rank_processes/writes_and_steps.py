# Rank processes against rank threads (tst_engine_server): writes re-sharded on every rank over
# several steps, two invokes batched, sampling with a seed (the ids are made identical on every
# rank), and a value computed on the driver from an earlier trace's save.
from nnsight.modeling.vllm import VLLM

model = VLLM("demo", tensor_parallel_size=4, distributed_executor_backend="mp")
attn = model.model.layers[0].self_attn

with model.trace("The capital of France is", max_tokens=4, ignore_eos=True) as tracer:
    base = tracer.result.save()

scale = float(len(base.outputs[0].token_ids)) / 8.0

with model.trace(max_tokens=5, temperature=0.8, top_k=20, seed=7, ignore_eos=True) as tracer:
    with tracer.invoke("The capital of France is"):
        a = list().save()
        for _ in tracer.iter[:5]:
            attn.o_proj.input[:, 0:16] = 0
            model.model.layers[1].mlp.output[:] = model.model.layers[1].mlp.output * scale
            a.append(model.model.layers[1].output[0].sum())
    with tracer.invoke("Hello"):
        b = model.logits.save()
        out = tracer.result.save()

print(out.outputs[0].token_ids)
print(torch.stack(a).tolist(), b.shape, float(b.sum()))
