"""Tensor-parallel scaling table (issue 8) from `gpu_speed --scaling --tp N` runs: decode latency
per token at batch 1 against the per-GPU floor (each GPU streams 1/tp of the weights but the
embedding table, and of the KV-cache rows attended), prefill of 2048 tokens against the per-GPU
floor max(FLOPs / matmul rate, bytes / bandwidth) with the LM head for the last row only
(bench/floors.py), and the cost of one gathered read and of one head write per decode step (the
trace that saves layer 10's o_proj.input every step, or zeroes a head of it, minus the plain
trace). Runs without a 2048-token prefill (`--prefills 5`) show "-" there.

    python3 bench/report_scaling.py tp1.json tp2.json ... [--config CONFIG.json]

--config gives the model's shape for runs recorded before gpu_speed kept its config.json.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floors  # noqa: E402


def over_plain(run, name):
    """A trace's cost per step over the plain trace, or "-" when the run did not time it."""
    trace = run.get("trace", {})
    if name not in trace or "plain" not in trace:
        return "-"
    return f"{(trace[name]['per_step_s'] - trace['plain']['per_step_s']) * 1e6:.0f}us"


def table(runs, shapes):
    """The table's lines; `runs` are gpu_speed JSON dicts (or parsed logs with "tp" set)."""
    base = runs[0]
    lines = [f"floors (GPU 0): copy {base['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s, "
             f"bf16 matmul {base['matmul_flops_per_s'] / 1e12:.0f} TFLOP/s; "
             f"a step streams {shapes[0].streamed_weight_bytes() / 1e9:.2f} GB "
             f"(weights {shapes[0].weight_bytes / 1e9:.2f} GB)",
             f"{'tp':>3} {'decode b1':>10} {'floor':>8} {'x floor':>8} {'speed-up':>9} "
             f"{'prefill 2048':>13} {'floor':>8} {'x floor':>8} {'read/step':>10} "
             f"{'write/step':>11}"]
    for r, shape in zip(runs, shapes):
        tp = r["tp"]
        bw, rate = r["bandwidth_bytes_per_s"], r["matmul_flops_per_s"]
        decode = r["decode"]["1"]["per_step_s"]
        decode_floor = floors.decode_floor(shape, 1, bw, tp=tp, attended=floors.decode_attended(r))
        speedup = base["decode"]["1"]["per_step_s"] / decode
        row = (f"{tp:>3} {decode * 1e3:8.2f}ms {decode_floor * 1e3:6.2f}ms "
               f"{decode / decode_floor:8.2f} {speedup:8.2f}x ")
        prefill = r["prefill_s"].get("2048")
        if prefill is None:
            row += f"{'-':>13} {'-':>8} {'-':>8} "
        else:
            prefill_floor, _ = floors.prefill_floor(shape, 2048, bw, rate, tp=tp)
            row += (f"{prefill * 1e3:11.2f}ms {prefill_floor * 1e3:6.2f}ms "
                    f"{prefill / prefill_floor:8.2f} ")
        lines.append(row + f"{over_plain(r, 'read'):>10} {over_plain(r, 'zero_head'):>11}")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--config")
    args = ap.parse_args()
    runs = [json.load(open(p)) for p in args.runs]
    config = json.load(open(args.config)) if args.config else None
    shapes = [floors.Shape.from_run(r, config or r.get("config")) for r in runs]
    print("\n".join(table(runs, shapes)))


if __name__ == "__main__":
    main()
