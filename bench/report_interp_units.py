"""Prints bench/interp_units' figures (one JSON per tp) next to the Hugging Face peer's
(bench/peers/hf_interp_units.py, one GPU) as one table: per unit the median time, its ratio to our
own baseline (the plain forward; for steer_every_step the plain 8-token generation) with issue
15's target, and its ratio to the same unit in Hugging Face (below 1: ShardScope is faster). The
peer runs on one GPU, so at tp=2 its column compares two of our GPUs with one of its.

    python3 bench/report_interp_units.py hf.json ours-tp1.json [ours-tp2.json ...]
"""
import argparse
import json

# Issue 15's targets: each unit at most 1.3x our plain forward, the logit lens at most 2x, the
# every-step steering at most 1.15x our plain generation.
TARGETS = {"logit_lens": 2.0, "steer_every_step": 1.15}
DEFAULT_TARGET = 1.3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf")
    ap.add_argument("ours", nargs="+")
    args = ap.parse_args()
    hf = json.load(open(args.hf))["units"]
    runs = [json.load(open(p)) for p in args.ours]
    first = runs[0]
    print(f"interp units: {first['layers']} layers, hidden {first['hidden']}, "
          f"{first['prompt_tokens']}-token prompt, {first['steps']} generated tokens where stated, "
          f"{first['dtype']}, median of {first['runs']} after {first['warmup']} warm-ups")
    header = f"{'unit':<17}"
    for r in runs:
        header += f" | {'tp=%d %s' % (r['tp'], r['backend']):>22}"
    header += f" | {'HF (1 GPU)':>10} | target"
    print(header)
    print("-" * len(header))
    for name, row in first["units"].items():
        line = f"{name:<17}"
        for r in runs:
            u = r["units"].get(name)
            if not u:
                line += f" | {'-':>22}"
                continue
            ms = u["seconds"] * 1e3
            base = u.get("baseline")
            own = f"{u['seconds'] / r['units'][base]['seconds']:.2f}x" if base else "base"
            peer = f"{u['seconds'] / hf[name]['seconds']:.2f}xHF" if name in hf else "-"
            line += f" | {ms:7.2f} ms {own:>5} {peer:>7}"
        peer_ms = f"{hf[name]['seconds'] * 1e3:.2f} ms" if name in hf else "-"
        target = "" if not row.get("baseline") else f"<= {TARGETS.get(name, DEFAULT_TARGET)}x"
        line += f" | {peer_ms:>10} | {target}"
        print(line)
    print("own ratio: to our forward (steer_every_step: to our generate); xHF: ours / Hugging Face")


if __name__ == "__main__":
    main()
