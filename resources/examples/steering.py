# Title: Steering
# Model: demo (the built-in demo model; any Qwen3 checkpoint with --model-dir demo=PATH)
# A steering vector: the difference of the residual stream after two prompts, added to
# layers[1] at every generated step. The first invoke generates as usual, the second steered.
from nnsight.modeling.vllm import VLLM

model = VLLM("demo", tensor_parallel_size=2, dispatch=True)
layer = 1
strength = 4.0
prompt = "I think the movie was"

with model.trace(temperature=0.0) as tracer:
    with tracer.invoke("I loved it"):
        pos = sum(model.model.layers[layer].output)[-1].clone().save()
    with tracer.invoke("I hated it"):
        neg = sum(model.model.layers[layer].output)[-1].clone().save()

direction = pos - neg
steer = direction / direction.norm() * pos.norm() * strength

with model.trace(temperature=0.0, max_tokens=8) as tracer:
    with tracer.invoke(prompt):
        plain_logits = model.logits.save()
        plain = tracer.result.save()
    with tracer.invoke(prompt):
        for step in tracer.iter[:]:
            h = model.model.layers[layer].output[0]
            h += steer
            if step == 0:
                steered_logits = model.logits.save()
        steered = tracer.result.save()

print("plain:  ", repr(plain.outputs[0].text))
print("steered:", repr(steered.outputs[0].text))
change = (steered_logits - plain_logits).abs().max().item()
print(f"first-step logits moved by up to {change:.3g}")
changed = 0
for a, b in zip(plain.outputs[0].token_ids, steered.outputs[0].token_ids):
    changed += a != b
print(f"{changed} of {len(plain.outputs[0].token_ids)} generated tokens changed")
assert change > 0, "the steering vector must move the logits"
