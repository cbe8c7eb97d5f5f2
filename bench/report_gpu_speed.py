"""Prints gpu_speed's figures next to Hugging Face's (bench/peers/hf_speed.py: sdpa, transformers'
default attention, and eager), as time, ratio to the physical floor and ratio to each peer (below 1
means ShardScope is faster). Floors (bench/floors.py): a decode step streams every weight but the
embedding table plus the KV-cache rows it attends; a prefill is max(FLOPs it computes / matmul
rate, bytes it reads / bandwidth), the LM head for the last row only. With a third file
(gpu_speed --eager, the same engine without CUDA graphs) each case also shows its eager time.

    python3 bench/report_gpu_speed.py ours.json hf.json [ours-eager.json] [--config CONFIG.json]

--config gives the model's shape for runs recorded before gpu_speed kept its config.json.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floors  # noqa: E402


def peers_of(hf):
    """{attention: figures}; files from before issue 15 hold eager attention only, at the top."""
    return hf["attention"] if "attention" in hf else {"eager": hf}


def lookup(d, *keys):
    for k in keys:
        if d is None or k not in d:
            return None
        d = d[k]
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("hf")
    ap.add_argument("eager", nargs="?")
    ap.add_argument("--config")
    args = ap.parse_args()
    ours = json.load(open(args.ours))
    peers = peers_of(json.load(open(args.hf)))
    eager = json.load(open(args.eager)) if args.eager else None
    config = json.load(open(args.config)) if args.config else ours.get("config")
    shape = floors.Shape.from_run(ours, config)
    bw, rate = ours["bandwidth_bytes_per_s"], ours["matmul_flops_per_s"]
    attended = floors.decode_attended(ours)
    print(f"floors: copy bandwidth {bw / 1e9:.0f} GB/s, bf16 matmul {rate / 1e12:.0f} TFLOP/s; "
          f"weights {shape.weight_bytes / 1e9:.2f} GB, a step streams "
          f"{shape.streamed_weight_bytes() / 1e9:.2f} GB + {shape.kv_bytes_per_token() / 1e3:.0f} KB "
          f"of KV cache per attended token (decode: {attended:g} tokens on average)")
    names = list(peers)
    header = f"{'case':34} {'ShardScope':>12} {'floor':>10} {'bound':>7} {'x floor':>8}"
    for a in names:
        header += f" {'HF ' + a:>12} {'x HF ' + a:>11}"
    print(header + (f" {'no graphs':>12}" if eager else ""))

    def row(name, t, floor, bound, peer_key, own=None):
        line = f"{name:34} {t * 1e3:10.2f}ms {floor * 1e3:8.2f}ms {bound:>7} {t / floor:8.2f}"
        for a in names:
            peer = lookup(peers[a], *peer_key) if peer_key else None
            line += f" {peer * 1e3:10.2f}ms {t / peer:11.3f}" if peer else f" {'-':>12} {'-':>11}"
        print(line + (f" {own * 1e3:10.2f}ms" if own else ""))

    for n, t in sorted(ours["prefill_s"].items(), key=lambda kv: int(kv[0])):
        floor, bound = floors.prefill_floor(shape, int(n), bw, rate)
        row(f"prefill {n} tokens", t, floor, bound, ("prefill_s", n), lookup(eager, "prefill_s", n))
        first = ours.get("prefill_first_s", {}).get(n)
        if first:
            what = "records its graphs" if int(n) <= 256 else "no graphs above 256 tokens"
            print(f"{'':34} first prompt of this length ({what}): {first * 1e3:.2f} ms")
    for b, d in ours["decode"].items():
        floor = floors.decode_floor(shape, int(b), bw, attended=attended)
        row(f"decode step, batch {b}", d["per_step_s"], floor, "bytes", ("decode", b, "per_step_s"),
            lookup(eager, "decode", b, "per_step_s"))
        theirs = ", ".join(f"HF {a} {peers[a]['decode'][b]['tokens_per_s']:.0f}" for a in names
                           if b in peers[a].get("decode", {}))
        print(f"{'':34} {d['tokens_per_s']:10.0f} tok/s vs {theirs} tok/s")
    plain = ours["trace"]["plain"]["per_step_s"]
    floor = floors.decode_floor(shape, 1, bw, attended=attended)
    for name, d in ours["trace"].items():
        peer_key = ("decode_hook_read", "per_step_s") if name == "read" else None
        row(f"trace {name}, per step", d["per_step_s"], floor, "bytes", peer_key,
            lookup(eager, "trace", name, "per_step_s"))
        if name != "plain":
            print(f"{'':34} {100 * (d['per_step_s'] / plain - 1):+.1f} % over the plain trace")
    gb = ours["checkpoint_bytes"] / 1e9
    for k in ("load_first_s", "load_warm_s"):
        print(f"{k:34} {ours[k]:10.2f} s  {gb / ours[k]:.2f} GB/s")


if __name__ == "__main__":
    main()
