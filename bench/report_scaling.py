"""Tensor-parallel scaling table (issue 8) from `gpu_speed --scaling --tp N` runs: decode latency
per token at batch 1 against the per-GPU floor (each GPU streams 1/tp of the weights but the
embedding table, and of the KV-cache rows attended), prefill of 2048 tokens against the per-GPU
floor max(FLOPs / matmul rate, bytes / bandwidth) with the LM head for the last row only
(bench/floors.py), and the cost of one gathered read and of one head write per decode step (the
trace that saves layer 10's o_proj.input every step, or zeroes a head of it, minus the plain
trace). Runs without a 2048-token prefill (`--prefills 5`) show "-" there.

    python3 bench/report_scaling.py tp1.json tp2.json ... [--config CONFIG.json]
    python3 bench/report_scaling.py --check   (RESULTS' decode-ahead rows from their committed JSON)

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


def _check():
    runs_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "runs")
    runs = [json.load(open(os.path.join(runs_dir, f"2026-11-30-{n}.json")))
            for n in ("ahead-tp1", "ahead-off-tp1", "ahead-tp2")]
    shapes = [floors.Shape.from_run(r, r.get("config")) for r in runs]
    rows = [line.split() for line in table(runs, shapes)[2:]]
    # tp, decode, floor, x floor, speed-up, prefill, floor, x floor, read, write: as RESULTS states
    assert rows[0][:4] == ["1", "4.19ms", "3.57ms", "1.17"], rows[0]
    assert rows[0][5:] == ["52.58ms", "37.72ms", "1.39", "81us", "66us"], rows[0]
    assert rows[1][3] == "1.18" and rows[1][5:8] == ["-", "-", "-"], rows[1]
    assert rows[2][:5] == ["2", "3.39ms", "1.80ms", "1.88", "1.24x"], rows[2]
    assert rows[2][7:] == ["1.79", "171us", "126us"], rows[2]
    assert over_plain({"trace": {"plain": {"per_step_s": 1e-3}}}, "read") == "-"
    print("report_scaling: all checks passed")


def main():
    if sys.argv[1:] == ["--check"]:
        return _check()
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
