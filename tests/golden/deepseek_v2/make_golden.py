"""Makes the Hugging Face golden data for the DeepSeek-V2 engine tests (run on the GPU machine,
which has transformers; computed on its CPU in fp32 so the numbers do not depend on GPU kernels).

Two tiny random DeepseekV2ForCausalLM models, each with one dense layer (first_k_dense_replace=1)
and then MoE layers with shared experts, YaRN rope on the rope part of each head:
  deepseek-v2-lite-tiny  V2-Lite style: no q LoRA (self_attn.q_proj), greedy top-k,
                         mscale == mscale_all_dim (the rope tables are unscaled).
  deepseek-v2-tiny       V2 style: q LoRA (q_a_proj -> q_a_layernorm -> q_b_proj), group-limited
                         routing (topk_method group_limited_greedy, n_group, topk_group),
                         routed_scaling_factor != 1, v_head_dim != qk_nope_head_dim,
                         mscale != mscale_all_dim (the rope tables carry their ratio).
Heads (4 and 8) and experts (8) split at tp=4; moe_intermediate_size and the dense
intermediate_size divide by 4. Each writes OUTDIR/<name>/:
  config.json, generation_config.json
  model.safetensors     per-expert tensors as the Hub's DeepSeek-V2 names them
                        (model.layers.{i}.mlp.experts.{e}.{gate,up,down}_proj.weight)
  golden.safetensors    input_ids [7] I64, prefill_logits [7, V] F32, decode_logits [8, V] F32,
                        greedy_ids [9] I64 (as tests/golden/make_golden.py); for diagnosis
                        rope_inv_freq [rope/2] F32 and rope_attention_scaling, attn_scaling [1] F32
                        (layer 0's rotary tables and softmax scale as the reference used them).
The softmax scale: DeepSeek's reference code and vLLM multiply qk_head_dim**-0.5 by
yarn_get_mscale(factor, mscale_all_dim)**2. transformers added that to deepseek_v2 in PR 47435; a
transformers without it gets it set here on every layer (metadata 'scaling_patched').
Format version 1. Usage: python3 make_golden.py OUTDIR [NAME...] (all models by default)
"""
import inspect
import json
import math
import os
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, DeepseekV2Config

PROMPT = [3, 17, 42, 99, 123, 200, 7]
DECODE_STEPS = 8
H, E = 64, 8

COMMON = dict(vocab_size=250, hidden_size=H, intermediate_size=128, moe_intermediate_size=32,
              num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=E,
              max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False,
              norm_topk_prob=False, bos_token_id=None, eos_token_id=None, pad_token_id=None)


def yarn(mscale, mscale_all_dim):
    # max_position_embeddings = factor * original, so versions that derive the factor from the
    # two lengths get the same one.
    return {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
            "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0,
            "mscale": mscale, "mscale_all_dim": mscale_all_dim}


MODELS = {
    "deepseek-v2-lite-tiny": dict(
        num_attention_heads=4, num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=32,
        qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, n_shared_experts=2,
        num_experts_per_tok=2, topk_method="greedy", routed_scaling_factor=1.0,
        rope=yarn(0.707, 0.707), seed=4000),
    "deepseek-v2-tiny": dict(
        num_attention_heads=8, num_key_value_heads=8, q_lora_rank=48, kv_lora_rank=24,
        qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12, n_shared_experts=1,
        num_experts_per_tok=3, topk_method="group_limited_greedy", n_group=4, topk_group=2,
        routed_scaling_factor=2.5, rope=yarn(1.0, 0.5), seed=5000),
}


def make_config(spec):
    kw = {k: v for k, v in spec.items() if k not in ("rope", "seed")}
    rope = spec["rope"]
    try:
        return DeepseekV2Config(**COMMON, **kw, rope_parameters=rope)
    except TypeError:  # older transformers
        scaling = {k: v for k, v in rope.items() if k != "rope_theta"}
        return DeepseekV2Config(**COMMON, **kw, rope_theta=rope["rope_theta"], rope_scaling=scaling)


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5 * 1.5)


def is_moe(layer):
    return hasattr(layer.mlp, "experts")


def hub_state(model, config, seed):
    """The checkpoint as the Hub's DeepSeek-V2 names it: transformers' non-expert tensors, and
    per-expert gate_proj/up_proj [I, H] and down_proj [H, I] drawn here."""
    g = torch.Generator().manual_seed(seed)
    I = config.moe_intermediate_size
    out = {k: v.detach().contiguous() for k, v in model.state_dict().items()
           if ".mlp.experts." not in k}
    for i, layer in enumerate(model.model.layers):
        if not is_moe(layer):
            continue
        for e in range(E):
            pre = f"model.layers.{i}.mlp.experts.{e}."
            for proj, shape in (("gate_proj", (I, H)), ("up_proj", (I, H)), ("down_proj", (H, I))):
                out[pre + proj + ".weight"] = torch.randn(shape, generator=g) / shape[-1] ** 0.5 * 1.5
    return out


def set_experts(model, state):
    """Puts the per-expert tensors into the model as transformers holds them: fused
    gate_up_proj [E, 2I, H] (gate rows, then up rows: the forward chunks the product in two,
    gate first) and down_proj [E, H, I]; or per-expert modules in older versions."""
    with torch.no_grad():
        for i, layer in enumerate(model.model.layers):
            if not is_moe(layer):
                continue
            experts = layer.mlp.experts
            pre = f"model.layers.{i}.mlp.experts."
            if hasattr(experts, "gate_up_proj"):
                for e in range(E):
                    experts.gate_up_proj[e].copy_(torch.cat(
                        [state[pre + f"{e}.gate_proj.weight"], state[pre + f"{e}.up_proj.weight"]], 0))
                    experts.down_proj[e].copy_(state[pre + f"{e}.down_proj.weight"])
            else:
                for e in range(E):
                    for proj in ("gate_proj", "up_proj", "down_proj"):
                        getattr(experts[e], proj).weight.copy_(state[pre + f"{e}.{proj}.weight"])


def yarn_get_mscale(scale, mscale):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def fix_scaling(model, config):
    """DeepSeek's softmax scale (see the module docstring); returns whether it had to be set."""
    rope = config.rope_parameters if getattr(config, "rope_parameters", None) else config.rope_scaling
    head = config.qk_nope_head_dim + config.qk_rope_head_dim
    want = head ** -0.5 * yarn_get_mscale(rope["factor"], rope.get("mscale_all_dim", 0)) ** 2
    patched = False
    for layer in model.model.layers:
        attn = layer.self_attn
        if abs(attn.scaling - want) > 1e-12 * want:
            print("layer scaling", attn.scaling, "-> DeepSeek's", want)
            attn.scaling = want
            patched = True
    return patched


def run_model(model, ids):
    with torch.no_grad():
        o = model(ids, use_cache=True)
        prefill = o.logits[0].float()
        past = o.past_key_values
        tok = prefill[-1].argmax().view(1, 1)
        steps, greedy = [], [int(tok)]
        for _ in range(DECODE_STEPS):
            o = model(tok, past_key_values=past, use_cache=True)
            past = o.past_key_values
            steps.append(o.logits[0, -1].float())
            tok = steps[-1].argmax().view(1, 1)
            greedy.append(int(tok))
    return prefill, steps, greedy


def show_reference_code(out):
    """The reference's own code for the parts whose conventions matter, saved beside the data."""
    from transformers.models.deepseek_v2 import modeling_deepseek_v2 as m
    from transformers import modeling_rope_utils as r
    parts = []
    names = ("DeepseekV2TopkRouter", "DeepseekV2Moe", "DeepseekV2Experts", "DeepseekV2Attention",
             "apply_rotary_emb", "yarn_apply_mscale", "DeepseekV2RotaryEmbedding")
    objs = [getattr(m, n) for n in names if hasattr(m, n)] + [r._compute_yarn_parameters]
    for obj in objs:
        try:
            parts.append(inspect.getsource(obj))
        except (OSError, TypeError) as e:
            parts.append(f"# no source for {obj}: {e}")
    with open(os.path.join(out, "reference_code.py.txt"), "w") as f:
        f.write("\n\n".join(parts))


def make_one(name, spec, out):
    config = make_config(spec)
    config._attn_implementation = "eager"
    if hasattr(config, "_experts_implementation"):
        config._experts_implementation = "eager"
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager")
    randomize(model, spec["seed"])
    state = hub_state(model, config, spec["seed"] + 1)
    set_experts(model, state)
    model.eval()
    print(name, [type(l.mlp).__name__ for l in model.model.layers],
          "q_proj" if hasattr(model.model.layers[0].self_attn, "q_proj") else "q_a_proj/q_b_proj")
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    config.save_pretrained(d)
    if model.generation_config is not None:
        model.generation_config.save_pretrained(d)
    save_file(state, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})

    # transformers' own reading of the per-expert file must be the same model; where it cannot
    # read it, the model above (experts set by hand) is the reference.
    loaded_ok = False
    try:
        loaded, info = AutoModelForCausalLM.from_pretrained(
            d, dtype=torch.float32, output_loading_info=True, attn_implementation="eager")
        print("loading info", {k: v for k, v in info.items() if v})
        loaded_ok = not info.get("missing_keys") and not info.get("unexpected_keys")
        if loaded_ok:
            for k, v in model.state_dict().items():
                if not torch.equal(v, loaded.state_dict()[k]):
                    print("from_pretrained differs at", k)
                    loaded_ok = False
                    break
    except Exception as e:  # noqa: BLE001 -- diagnostics only
        print("from_pretrained failed:", repr(e))
    print("from_pretrained reads the per-expert file as the model:", loaded_ok)

    patched = fix_scaling(model, config)
    attn0 = model.model.layers[0].self_attn
    rot = model.model.rotary_emb
    print("attn scaling", attn0.scaling, "rope attention_scaling", rot.attention_scaling,
          "inv_freq", rot.inv_freq.tolist())

    ids = torch.tensor([PROMPT])
    prefill, steps, greedy = run_model(model, ids)
    with torch.no_grad():
        gen = model.generate(ids, do_sample=False, max_new_tokens=DECODE_STEPS + 1,
                             min_new_tokens=DECODE_STEPS + 1)
    assert gen[0, len(PROMPT):].tolist() == greedy, (gen, greedy)
    save_file({"input_ids": ids[0].contiguous(), "prefill_logits": prefill.contiguous(),
               "decode_logits": torch.stack(steps).contiguous(),
               "greedy_ids": torch.tensor(greedy, dtype=torch.int64),
               "rope_inv_freq": rot.inv_freq.float().contiguous(),
               "rope_attention_scaling": torch.tensor([float(rot.attention_scaling)]),
               "attn_scaling": torch.tensor([float(attn0.scaling)])},
              os.path.join(d, "golden.safetensors"),
              metadata={"format": "1", "made_by": "tests/golden/deepseek_v2/make_golden.py",
                        "transformers": transformers.__version__, "torch": torch.__version__,
                        "scaling_patched": str(patched), "from_pretrained_equal": str(loaded_ok)})
    print(name, "greedy", greedy, "files", sorted(os.listdir(d)))
    print(json.dumps(json.load(open(os.path.join(d, "config.json")))))


def main(out, names):
    torch.set_num_threads(8)
    print("transformers", transformers.__version__, "torch", torch.__version__)
    os.makedirs(out, exist_ok=True)
    show_reference_code(out)
    for name in names or MODELS:
        make_one(name, MODELS[name], out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/golden/models", sys.argv[2:])
