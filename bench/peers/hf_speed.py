"""Hugging Face transformers on the same configuration as bench/gpu_speed.cpp (dense Qwen/Llama,
Qwen3-MoE, DeepSeek-V2): random bf16 weights on one GPU, the same prompt lengths, steps and batch sizes, greedy decoding, with and without a
forward pre-hook on layers[10].self_attn.o_proj that keeps its input every step. Runs twice in one
process: with transformers' default attention (sdpa) and with eager attention. A prefill computes
the logits of the last position only (`logits_to_keep=1`), as ours does and as `generate` does.
Prints one JSON object (the peer of gpu_speed's): {"attention": {"sdpa": {...}, "eager": {...}}}.

    python3 bench/peers/hf_speed.py bench/configs/qwen3-8b.json --steps 64 > hf.json
"""
import argparse
import gc
import json
import statistics
import sys
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM


def timed(fn, reps):
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def prompt(n, vocab, salt, batch=1):
    g = torch.Generator().manual_seed(1000 + salt)
    return torch.randint(500, vocab - 500, (batch, n), generator=g).cuda()


def hf_config_fields(fields):
    """config.json's fields as transformers 5 takes them: a Hub-era `rope_scaling` (DeepSeek-V2's
    YaRN, {"type": "yarn", ...}) becomes `rope_parameters` with the rope type and theta."""
    fields = {k: v for k, v in fields.items() if k != "architectures"}
    scaling = fields.get("rope_scaling")
    if int(transformers.__version__.split(".")[0]) >= 5 and isinstance(scaling, dict):
        params = {k: v for k, v in scaling.items() if k != "type"}
        params["rope_type"] = scaling.get("rope_type", scaling.get("type"))
        params["rope_theta"] = fields.pop("rope_theta", 10000.0)
        del fields["rope_scaling"]
        fields["rope_parameters"] = params
    return fields


def load(config_path, attention):
    with open(config_path) as f:
        cfg = AutoConfig.for_model(**hf_config_fields(json.load(f)))
    cfg._attn_implementation = attention
    torch.manual_seed(0)
    with torch.device("cuda"):
        try:  # transformers 5 names it dtype; 4.x torch_dtype
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16,
                                                     attn_implementation=attention)
        except TypeError:
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16,
                                                     attn_implementation=attention)
    return model.eval(), cfg.vocab_size


def last_logits(model, ids):
    """One prefill that projects only the last position onto the vocabulary."""
    try:
        return model(ids, use_cache=True, logits_to_keep=1)
    except TypeError:  # transformers 4.45-4.49 named it num_logits_to_keep
        return model(ids, use_cache=True, num_logits_to_keep=1)


def measure(model, vocab, steps, attention, prefills=(5, 128, 2048), batches=(1, 16, 64),
            hook=True):
    out = {}

    def generate(ids, new_tokens):
        model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                       do_sample=False, pad_token_id=0)

    generate(prompt(128, vocab, 99), 4)  # warm-up
    ids = prompt(5, vocab, 5)
    assert last_logits(model, ids).logits.shape[1] == 1, "the prefill computed every row's logits"
    out["prefill_s"] = {}
    for n in prefills:
        ids = prompt(n, vocab, n)
        out["prefill_s"][str(n)] = timed(lambda: last_logits(model, ids), 5)
        print(f"hf {attention} prefill {n}: {out['prefill_s'][str(n)] * 1e3:.2f} ms",
              file=sys.stderr)
    out["decode"] = {}
    for batch in batches:
        ids = prompt(5, vocab, 0, batch)
        pre = timed(lambda: generate(ids, 1), 3)
        total = timed(lambda: generate(ids, steps + 1), 3)
        per_step = (total - pre) / steps
        out["decode"][str(batch)] = {"per_step_s": per_step, "tokens_per_s": batch / per_step}
        print(f"hf {attention} decode batch {batch}: {per_step * 1e3:.2f} ms/step", file=sys.stderr)
    if not hook:
        return out
    kept = []
    hook = model.model.layers[10].self_attn.o_proj.register_forward_pre_hook(
        lambda module, inputs: kept.append(inputs[0].clone()))
    ids = prompt(5, vocab, 0)
    pre = timed(lambda: generate(ids, 1), 3)
    total = timed(lambda: generate(ids, steps + 1), 3)
    hook.remove()
    out["decode_hook_read"] = {"per_step_s": (total - pre) / steps, "kept": len(kept)}
    print(f"hf {attention} decode with hook: {out['decode_hook_read']['per_step_s'] * 1e3:.2f} "
          "ms/step", file=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--prefills", default="5,128,2048", help="prompt lengths, comma-separated")
    ap.add_argument("--batches", default="1,16,64", help="decode batch sizes, comma-separated")
    ap.add_argument("--attention", default="sdpa,eager", help="implementations, comma-separated")
    ap.add_argument("--no-hook", action="store_true", help="skip the o_proj read case")
    args = ap.parse_args()
    ints = lambda text: tuple(int(x) for x in text.split(","))
    out = {"transformers": transformers.__version__, "torch": torch.__version__, "attention": {}}
    for attention in args.attention.split(","):  # sdpa is transformers' default
        model, vocab = load(args.config, attention)
        with torch.inference_mode():
            out["attention"][attention] = measure(model, vocab, args.steps, attention,
                                                  ints(args.prefills), ints(args.batches),
                                                  not args.no_hook)
        del model
        gc.collect()
        torch.cuda.empty_cache()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
