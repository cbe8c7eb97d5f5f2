"""Prints gpu_speed's figures next to Hugging Face eager's, as time, ratio to the physical floor
and ratio to the peer (a ratio to the peer below 1 means ShardScope is faster). With a third file
(gpu_speed --eager, the same engine without CUDA graphs) each case also shows its eager time.

    python3 bench/report_gpu_speed.py ours.json hf.json [ours-eager.json]
"""
import json
import sys


def main():
    ours = json.load(open(sys.argv[1]))
    hf = json.load(open(sys.argv[2]))
    eager = json.load(open(sys.argv[3])) if len(sys.argv) > 3 else None
    bw, flops = ours["bandwidth_bytes_per_s"], ours["matmul_flops_per_s"]
    params, layers, hidden = ours["matmul_params"], ours["layers"], ours["hidden"]
    print(f"floors: copy bandwidth {bw / 1e9:.0f} GB/s, bf16 matmul {flops / 1e12:.0f} TFLOP/s; "
          f"weights {ours['weight_bytes'] / 1e9:.2f} GB")
    print(f"{'case':34} {'ShardScope':>12} {'floor':>10} {'x floor':>8} {'HF eager':>12} {'x HF':>7}"
          + (f" {'no graphs':>12}" if eager else ""))

    def row(name, t, floor, peer, own=None):
        ratio_peer = f"{t / peer:7.3f}" if peer else "      -"
        peer_text = f"{peer * 1e3:10.2f}ms" if peer else "           -"
        own_text = f" {own * 1e3:10.2f}ms" if own else ""
        print(f"{name:34} {t * 1e3:10.2f}ms {floor * 1e3:8.2f}ms {t / floor:8.2f} {peer_text} {ratio_peer}"
              + own_text)

    def mine(*keys):
        d = eager
        for k in keys:
            if d is None or k not in d:
                return None
            d = d[k]
        return d

    for n, t in sorted(ours["prefill_s"].items(), key=lambda kv: int(kv[0])):
        n = int(n)
        # Weight FLOPs of every token plus causal attention (QK^T and PV over half the square).
        floor = (2 * params * n + 2 * 2 * layers * hidden * n * n / 2) / flops
        row(f"prefill {n} tokens", t, floor, hf["prefill_s"].get(str(n)), mine("prefill_s", str(n)))
        first = ours.get("prefill_first_s", {}).get(str(n))
        if first:
            what = "records its graphs" if n <= 256 else "no graphs above 256 tokens"
            print(f"{'':34} first prompt of this length ({what}): {first * 1e3:.2f} ms")
    for b, d in ours["decode"].items():
        floor = ours["weight_bytes"] / bw
        row(f"decode step, batch {b}", d["per_step_s"], floor, hf["decode"][b]["per_step_s"],
            mine("decode", b, "per_step_s"))
        print(f"{'':34} {d['tokens_per_s']:10.0f} tok/s vs HF {hf['decode'][b]['tokens_per_s']:.0f} tok/s")
    plain = ours["trace"]["plain"]["per_step_s"]
    for name, d in ours["trace"].items():
        peer = hf["decode_hook_read"]["per_step_s"] if name == "read" else None
        row(f"trace {name}, per step", d["per_step_s"], ours["weight_bytes"] / bw, peer,
            mine("trace", name, "per_step_s"))
        if name != "plain":
            print(f"{'':34} {100 * (d['per_step_s'] / plain - 1):+.1f} % over the plain trace")
    gb = ours["checkpoint_bytes"] / 1e9
    for k in ("load_first_s", "load_warm_s"):
        print(f"{k:34} {ours[k]:10.2f} s  {gb / ours[k]:.2f} GB/s")


if __name__ == "__main__":
    main()
