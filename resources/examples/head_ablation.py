# Title: Head ablation
# Model: demo (the built-in demo model; any Qwen3 checkpoint with --model-dir demo=PATH)
# Zeroes one attention head (its slice of o_proj.input, found by the layout-free accessor
# o_proj.head) at every step, next to an unablated invoke of the same prompt.
from nnsight.modeling.vllm import VLLM

model = VLLM("demo", tensor_parallel_size=2, dispatch=True)
layer, head = 1, 3
prompt = "The capital of France is"
o_proj = model.model.layers[layer].self_attn.o_proj

with model.trace(temperature=0.0, max_tokens=8) as tracer:
    with tracer.invoke(prompt):
        plain_logits = model.logits.save()
        plain = tracer.result.save()
    with tracer.invoke(prompt):
        for step in tracer.iter[:]:
            z = o_proj.input
            if step == 0:
                head_before = o_proj.head(z, head).clone().save()
            o_proj.head(z, head)[:] = 0
            if step == 0:
                head_after = o_proj.head(z, head).clone().save()
                ablated_logits = model.logits.save()
        ablated = tracer.result.save()

print(f"layer {layer} head {head}: its slice of o_proj.input {tuple(head_before.shape)}, norm {head_before.norm().item():.3g} -> {head_after.norm().item():.3g}")
print("plain:  ", repr(plain.outputs[0].text))
print("ablated:", repr(ablated.outputs[0].text))
p0 = plain_logits.softmax(-1)
p1 = ablated_logits.softmax(-1)
top = p0.argmax(-1).item()
print(f"P({model.tokenizer.decode(top)!r}) at the first step: {p0[0, top].item():.4f} -> {p1[0, top].item():.4f}")
print(f"first-step logits moved by up to {(ablated_logits - plain_logits).abs().max().item():.3g}")
assert head_after.abs().max().item() == 0 and head_before.norm().item() > 0
