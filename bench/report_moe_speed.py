"""Prints the Qwen3-MoE (issue 16) and DeepSeek-V2 (issue 17) speed runs against their floors
(bench/moe_floors.py: MoeShape or DeepseekShape by the run's config.json) and the Hugging Face peer
of the same call (bench/peers/hf_speed.py, one GPU):

    python3 bench/report_moe_speed.py hf.json ours-tp1.json ours-tp2.json ours-tp2-ep.json

Each gpu_speed JSON says its tp and expert layout. Ratios below 1 against HF mean ShardScope is
faster; the floor of a step at tp holds 1/tp of its bytes or FLOPs per GPU.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floors  # noqa: E402
import moe_floors  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    hf = json.load(open(sys.argv[1]))
    peers = hf.get("attention", {})
    runs = [json.load(open(p)) for p in sys.argv[2:]]
    config = runs[0]["config"]
    shape = moe_floors.shape_of(config)
    print(f"{config.get('model_type')}: {shape.layers} layers, {shape.experts} experts top-{shape.top_k}; a batch-1 "
          f"decode step reads {shape.decode_weight_bytes(1) / 1e9:.2f} GB of weights, a batch-16 "
          f"step about {shape.decode_weight_bytes(16) / 1e9:.2f} GB (uniform-routing estimate), a "
          f"prefill {shape.streamed_weight_bytes() / 1e9:.1f} GB")
    header = f"{'run':18} {'case':14} {'ours':>10} {'floor':>10} {'bound':>8} {'x floor':>8}"
    for a in peers:
        header += f" {'HF ' + a:>11} {'x HF':>6}"
    print(header)
    for run in runs:
        tp = run.get("tp", 1)
        label = f"tp={tp}" + (" ep" if run.get("expert_parallel") else "")
        bw, rate = run["bandwidth_bytes_per_s"], run["matmul_flops_per_s"]
        attended = floors.decode_attended(run)
        cases = []
        for batch, d in run.get("decode", {}).items():
            floor = moe_floors.decode_floor(shape, int(batch), bw, tp, attended)
            cases.append((f"decode b{batch}", d["per_step_s"], floor, "bytes", ("decode", batch, "per_step_s")))
        for n, t in run.get("prefill_s", {}).items():
            floor, bound = moe_floors.prefill_floor(shape, int(n), bw, rate, tp)
            cases.append((f"prefill {n}", t, floor, bound, ("prefill_s", n)))
        for name, t, floor, bound, key in cases:
            line = f"{label:18} {name:14} {t * 1e3:8.2f}ms {floor * 1e3:8.2f}ms {bound:>8} {t / floor:8.2f}"
            for a, peer in peers.items():
                p = peer
                for k in key:
                    p = p.get(k) if isinstance(p, dict) else None
                line += f" {p * 1e3:9.2f}ms {t / p:6.2f}" if p else f" {'-':>11} {'-':>6}"
            print(line)


if __name__ == "__main__":
    main()
