"""Hugging Face transformers peer of bench/interp_units.cpp: the same units on the same shape
(random bf16 weights from the config, one GPU, sdpa attention, transformers' default), written
with forward hooks, on the same 9-token prompts (ids reduced modulo the vocabulary). Per unit 3
warm-ups, then the median of 7 runs between torch.cuda.synchronize() calls.

  forward           model(ids), logits of the last position only (as ours)
  logit_lens        a hook per layer: lm_head(norm(output)) over every position, the top token of
                    the last position kept; stacked after the forward
  steer             a hook on layers[L/2] adds 0.5 * ones(hidden) to its output in place
  generate          model.generate, 8 greedy tokens
  steer_every_step  the steering hook during the 8-token generation
  patch             clean and corrupted prompts as a batch of 2; a hook on layers[3L/4] copies the
                    clean row's output into the corrupted row
  zero_mlp          a hook on layers[1].mlp zeroes its output in place

Prints one JSON object: {"units": {name: {"seconds": s}}, ...}.

    python3 bench/peers/hf_interp_units.py bench/configs/qwen2.5-1.5b.json > hf.json
"""
import argparse
import json
import statistics
import sys
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

CLEAN = [785, 468, 3092, 301, 21938, 374, 7407, 304, 279]  # as kClean in interp_units.cpp
CORRUPT = [785, 4254, 9267, 2142, 372, 374, 7407, 304, 279]
STEPS = 8


def load(config_path, attention, device):
    with open(config_path) as f:
        cfg = AutoConfig.for_model(**{k: v for k, v in json.load(f).items() if k != "architectures"})
    torch.manual_seed(0)
    with torch.device(device):
        try:  # transformers 5 names it dtype; 4.x torch_dtype
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16,
                                                     attn_implementation=attention)
        except TypeError:
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16,
                                                     attn_implementation=attention)
    return model.eval(), cfg


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, warmup, runs):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        sync(device)
        t = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def hidden_of(output):
    """A decoder layer returns a tensor (transformers >= 4.54) or a tuple whose first item it is."""
    return output[0] if isinstance(output, tuple) else output


def forward_last(model, ids):
    try:
        return model(ids, logits_to_keep=1)
    except TypeError:  # transformers 4.45-4.49 named it num_logits_to_keep
        return model(ids, num_logits_to_keep=1)


def units(model, cfg, device):
    layers = model.model.layers
    n = cfg.num_hidden_layers
    vocab = cfg.vocab_size
    clean = torch.tensor([[i % vocab for i in CLEAN]], device=device)
    batch = torch.tensor([[i % vocab for i in CLEAN], [i % vocab for i in CORRUPT]], device=device)
    direction = torch.ones(cfg.hidden_size, device=device) * 0.5

    def generate(ids):
        model.generate(ids, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                       pad_token_id=0)

    def with_hooks(hooks, fn):
        handles = [module.register_forward_hook(hook) for module, hook in hooks]
        try:
            return fn()
        finally:
            for h in handles:
                h.remove()

    def steer_hook(module, inputs, output):
        hidden_of(output).add_(direction)

    def lens():
        tops = []

        def hook(module, inputs, output):
            logits = model.lm_head(model.model.norm(hidden_of(output)))
            tops.append(logits[0, -1].argmax())

        with_hooks([(layer, hook) for layer in layers], lambda: forward_last(model, clean))
        return torch.stack(tops).cpu()

    def patch():
        def hook(module, inputs, output):
            h = hidden_of(output)
            h[1].copy_(h[0])

        out = with_hooks([(layers[3 * n // 4], hook)], lambda: forward_last(model, batch))
        return out.logits[1, -1].cpu()

    def zero_hook(module, inputs, output):
        hidden_of(output).zero_()

    return {
        "forward": lambda: forward_last(model, clean).logits.cpu(),
        "read_logits": lambda: forward_last(model, clean).logits.cpu(),  # hooks none: the same
        "logit_lens": lens,
        "steer": lambda: with_hooks([(layers[n // 2], steer_hook)],
                                    lambda: forward_last(model, clean).logits.cpu()),
        "generate": lambda: generate(clean),
        "steer_every_step": lambda: with_hooks([(layers[n // 2], steer_hook)],
                                               lambda: generate(clean)),
        "patch": patch,
        "zero_mlp": lambda: with_hooks([(layers[1].mlp, zero_hook)],
                                       lambda: forward_last(model, clean).logits.cpu()),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--attention", default="sdpa")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("hf_interp_units: no CUDA device visible; pass --device cpu for a smoke run")
    model, cfg = load(args.config, args.attention, args.device)
    out = {"transformers": transformers.__version__, "torch": torch.__version__,
           "attention": args.attention, "device": args.device, "layers": cfg.num_hidden_layers,
           "runs": args.runs, "warmup": args.warmup, "units": {}}
    with torch.inference_mode():
        for name, fn in units(model, cfg, args.device).items():
            s = timed(fn, args.device, args.warmup, args.runs)
            out["units"][name] = {"seconds": s}
            print(f"hf {name}: {s * 1e3:.3f} ms", file=sys.stderr)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
