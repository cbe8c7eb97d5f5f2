"""Makes the Hugging Face golden data for the Qwen3-MoE engine and trace tests (run on the GPU
machine, which has transformers; computed on its CPU in fp32 so the numbers do not depend on GPU
kernels).

The model: a tiny random Qwen3MoeForCausalLM (8 experts, top-2, norm_topk_prob, 4 layers of which
layer 1 is dense through mlp_only_layers, 4 query and 4 KV heads so tp=4 splits them, a
moe_intermediate_size divisible by 4). It writes OUTDIR/qwen3-moe-tiny/:
  config.json, generation_config.json
  model.safetensors     per-expert tensors as the Hub's Qwen3-30B-A3B names them
                        (model.layers.{i}.mlp.experts.{e}.{gate,up,down}_proj.weight,
                        model.layers.{i}.mlp.gate.weight); the reference model is transformers'
                        from_pretrained of this file (transformers 5 fuses experts on load)
  golden.safetensors    input_ids [7] I64, prefill_logits [7, V] F32, decode_logits [8, V] F32,
                        greedy_ids [9] I64 (as tests/golden/make_golden.py), and the expert
                        ablation: ablation_layer [1] I64, ablation_expert [1] I64 (the expert the
                        most prompt tokens pick first in that layer), ablation_prefill_logits
                        [7, V] F32 and ablation_greedy_ids [9] I64 with that expert's router logit
                        set to -inf at every token and step.
Format version 1. Usage: python3 make_golden.py OUTDIR
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, Qwen3MoeConfig

PROMPT = [3, 17, 42, 99, 123, 200, 7]
DECODE_STEPS = 8
ABLATION_LAYER = 2
NAME = "qwen3-moe-tiny"
E, TOPK, H, I_MOE = 8, 2, 64, 32


def make_config():
    kw = dict(vocab_size=250, hidden_size=H, intermediate_size=128, moe_intermediate_size=I_MOE,
              num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
              num_experts=E, num_experts_per_tok=TOPK, norm_topk_prob=True, decoder_sparse_step=1,
              mlp_only_layers=[1], max_position_embeddings=256, rms_norm_eps=1e-6,
              tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    try:
        return Qwen3MoeConfig(**kw, rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    except TypeError:  # older transformers
        return Qwen3MoeConfig(**kw, rope_theta=1e6)


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5 * 1.5)


def hub_state(model, seed):
    """The checkpoint as the Hub's Qwen3-30B-A3B names it: transformers' non-expert tensors, and
    per-expert gate_proj/up_proj [I, H] and down_proj [H, I] drawn here (transformers 5 holds
    experts fused in memory; loading this file through from_pretrained is its own conversion)."""
    g = torch.Generator().manual_seed(seed)
    out = {k: v.detach().contiguous() for k, v in model.state_dict().items()
           if ".mlp.experts." not in k}
    for i, layer in enumerate(model.model.layers):
        if not hasattr(layer.mlp, "experts"):
            continue
        for e in range(E):
            pre = f"model.layers.{i}.mlp.experts.{e}."
            for proj, shape in (("gate_proj", (I_MOE, H)), ("up_proj", (I_MOE, H)),
                                ("down_proj", (H, I_MOE))):
                out[pre + proj + ".weight"] = torch.randn(shape, generator=g) / shape[-1] ** 0.5 * 1.5
    return out


def check_experts(model, state):
    """Diagnostics: how the loaded model holds layer 0's experts against the per-expert file."""
    for n, p in model.model.layers[0].mlp.experts.named_parameters():
        print("loaded", n, tuple(p.shape))
    params = dict(model.model.layers[0].mlp.experts.named_parameters())
    gu = params.get("gate_up_proj")
    if gu is not None:
        g0 = state["model.layers.0.mlp.experts.0.gate_proj.weight"]
        u0 = state["model.layers.0.mlp.experts.0.up_proj.weight"]
        for label, t in (("[gate;up] rows", torch.cat([g0, u0], 0)),
                         ("[up;gate] rows", torch.cat([u0, g0], 0)),
                         ("[gate;up] cols", torch.cat([g0, u0], 0).t()),
                         ("interleaved rows", torch.stack([g0, u0], 1).reshape(2 * I_MOE, H))):
            if tuple(t.shape) == tuple(gu[0].shape):
                print("gate_up_proj[0] ==", label, bool(torch.equal(gu[0], t)))
    dp = params.get("down_proj")
    if dp is not None:
        d0 = state["model.layers.0.mlp.experts.0.down_proj.weight"]
        print("down_proj[0] == down", tuple(dp[0].shape) == tuple(d0.shape) and bool(torch.equal(dp[0], d0)),
              "== down^T", tuple(dp[0].shape) == tuple(d0.t().shape) and bool(torch.equal(dp[0], d0.t())))


class Ablation:
    """Sets expert `expert`'s router logit to -inf in one layer (or records that layer's logits):
    every F.linear call with that layer's router weight is patched, which covers nn.Linear routers
    and transformers 5's router modules alike."""

    def __init__(self, gate_weight, expert=None):
        self.w, self.expert, self.calls, self.logits = gate_weight, expert, 0, []

    def __enter__(self):
        self.orig = F.linear

        def linear(x, weight, bias=None):
            y = self.orig(x, weight, bias)
            if weight is self.w:
                self.calls += 1
                self.logits.append(y.detach().clone())
                if self.expert is not None:
                    y = y.clone()
                    y[..., self.expert] = float("-inf")
            return y

        F.linear = linear
        torch.nn.functional.linear = linear
        return self

    def __exit__(self, *a):
        F.linear = self.orig
        torch.nn.functional.linear = self.orig


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


def gate_weight(model, layer):
    gate = model.model.layers[layer].mlp.gate
    w = gate.weight
    assert tuple(w.shape) == (E, H), tuple(w.shape)
    return w


def main(out):
    torch.set_num_threads(8)
    print("transformers", transformers.__version__, "torch", torch.__version__)
    config = make_config()
    config._attn_implementation = "eager"
    for attr in ("_experts_implementation",):
        if hasattr(config, attr):
            setattr(config, attr, "eager")
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32,
                                             attn_implementation="eager")
    print(type(model.model.layers[0].mlp).__name__, type(model.model.layers[1].mlp).__name__,
          [n for n, _ in model.model.layers[0].mlp.named_parameters()][:6])
    randomize(model, 2000)
    model.eval()
    d = os.path.join(out, NAME)
    os.makedirs(d, exist_ok=True)
    config.save_pretrained(d)
    if model.generation_config is not None:
        model.generation_config.save_pretrained(d)
    state = hub_state(model, 3000)
    save_file(state, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    print("saved", len(state), "tensors, e.g.", sorted(k for k in state if "layers.0.mlp" in k)[:4])

    # The reference is transformers' own reading of the per-expert file.
    model, info = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, output_loading_info=True,
                                                       attn_implementation="eager")
    model.eval()
    print("loading info", {k: v for k, v in info.items() if v})
    assert not info.get("missing_keys") and not info.get("unexpected_keys"), info
    check_experts(model, state)
    for k, v in model.state_dict().items():
        if ".mlp.experts." not in k:
            assert torch.equal(v, state[k]), k

    ids = torch.tensor([PROMPT])
    prefill, steps, greedy = run_model(model, ids)
    with torch.no_grad():
        gen = model.generate(ids, do_sample=False, max_new_tokens=DECODE_STEPS + 1,
                             min_new_tokens=DECODE_STEPS + 1)
    assert gen[0, len(PROMPT):].tolist() == greedy, (gen, greedy)

    # Ablation: the expert the most prompt tokens pick first in ABLATION_LAYER.
    w = gate_weight(model, ABLATION_LAYER)
    with Ablation(w) as rec:
        run_model(model, ids)
    assert rec.calls > 0, "the router's F.linear was never called; patch the router differently"
    first = rec.logits[0].reshape(-1, E).argmax(-1)
    expert = int(torch.bincount(first, minlength=E).argmax())
    with Ablation(w, expert) as ab:
        a_prefill, _, a_greedy = run_model(model, ids)
    assert ab.calls == rec.calls
    change = (a_prefill - prefill).abs().max().item()
    print("ablation layer", ABLATION_LAYER, "expert", expert, "top-1 counts",
          torch.bincount(first, minlength=E).tolist(), "max logit change", change,
          "greedy", greedy, "ablated", a_greedy)
    assert change > 1e-3, "the ablation changed nothing"

    save_file({"input_ids": ids[0].contiguous(), "prefill_logits": prefill.contiguous(),
               "decode_logits": torch.stack(steps).contiguous(),
               "greedy_ids": torch.tensor(greedy, dtype=torch.int64),
               "ablation_layer": torch.tensor([ABLATION_LAYER], dtype=torch.int64),
               "ablation_expert": torch.tensor([expert], dtype=torch.int64),
               "ablation_prefill_logits": a_prefill.contiguous(),
               "ablation_greedy_ids": torch.tensor(a_greedy, dtype=torch.int64)},
              os.path.join(d, "golden.safetensors"),
              metadata={"format": "1", "made_by": "tests/golden/qwen3_moe/make_golden.py",
                        "transformers": transformers.__version__, "torch": torch.__version__})
    print(NAME, "greedy", greedy, "files", sorted(os.listdir(d)))
    print(json.dumps(json.load(open(os.path.join(d, "config.json")))))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/golden/models")
