"""Restates the committed GPU speed runs (docs/runs/2026-11-29-*) on the corrected floors of
bench/floors.py: the decode floor counts the bytes a step streams (every weight but the embedding
table, plus the KV-cache rows attended), the prefill floor is max(FLOPs computed / matmul rate,
bytes read / bandwidth) with the LM head for the last row only. Every figure comes from the runs'
JSON where it was kept and from gpu_speed's own log lines in the run's report otherwise (times to
0.01 ms, rates to 1 GB/s and 1 TFLOP/s there). Each run's floor uses the bandwidth and matmul rate
its own process measured. Prints markdown tables (bench/RESULTS.md, issue 15).

    python3 bench/restate_floors.py [docs/runs]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floors  # noqa: E402
import report_scaling  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = json.load(open(os.path.join(HERE, "configs", "qwen3-8b.json")))


def load_runs(runs_dir):
    """{name: gpu_speed figures} of the one-GPU runs 3-6 (ours; '-eager' for --eager)."""
    path = lambda name: os.path.join(runs_dir, f"2026-11-29-gpu-speed-{name}")  # noqa: E731
    runs = {}
    for name in ("3-ours", "4-ours", "6-ours", "6-eager", "5-eager"):
        if os.path.exists(path(name + ".json")):
            runs[name] = json.load(open(path(name + ".json")))
    # Run 5 kept only the eager JSON: ours is the first process of its log.
    logged = floors.parse_gpu_speed_log(open(path("5.txt")).read().splitlines())
    runs["5-ours"] = logged[0]
    return runs


def ratio_rows(runs):
    shape = floors.Shape.from_config(CONFIG)
    order = ["3-ours", "4-ours", "5-ours", "6-ours", "6-eager"]
    print("| case | " + " | ".join(f"run {n.replace('-ours', '').replace('-eager', ' no graphs')}"
                                   for n in order) + " |")
    print("|---" * (len(order) + 1) + "|")
    cases = [("prefill", n) for n in ("5", "128", "2048")] + \
            [("decode", b) for b in ("1", "16", "64")] + [("trace", t) for t in ("plain", "read")]
    for kind, key in cases:
        cells = []
        for name in order:
            r = runs[name]
            bw, rate = r["bandwidth_bytes_per_s"], r["matmul_flops_per_s"]
            if kind == "prefill":
                t = r["prefill_s"][key]
                floor, bound = floors.prefill_floor(shape, int(key), bw, rate)
                old = (2 * (shape.weight_bytes / 2 - shape.embedding_bytes() / 2) * int(key)
                       + 2 * shape.layers * shape.hidden * int(key) ** 2) / rate
            else:
                t = r[kind][key]["per_step_s"]
                batch = int(key) if kind == "decode" else 1
                floor = floors.decode_floor(shape, batch, bw)
                bound, old = "bytes", shape.weight_bytes / bw
            cells.append(f"{t * 1e3:.2f} ms: {t / floor:.2f} ({t / old:.2f})")
        label = {"prefill": f"prefill {key} tokens", "decode": f"decode step, batch {key}",
                 "trace": f"trace {key}, per step"}[kind]
        floor_note = ""
        if kind == "prefill":
            f, bound = floors.prefill_floor(shape, int(key), runs["6-ours"]["bandwidth_bytes_per_s"],
                                            runs["6-ours"]["matmul_flops_per_s"])
            floor_note = f" [{bound}-bound]"
        print(f"| {label}{floor_note} | " + " | ".join(cells) + " |")


def scaling(runs_dir):
    shape = floors.Shape.from_config(CONFIG)
    for n in (1, 2):
        logged = floors.parse_gpu_speed_log(
            open(os.path.join(runs_dir, f"2026-11-29-scaling-{n}.txt")).read().splitlines())
        runs = [r for r in logged if r["decode"]][:2]
        for tp, r in zip((1, 2), runs):
            r["tp"] = tp
        print(f"scaling run {n}:")
        print("\n".join(report_scaling.table(runs, [shape] * len(runs))))


def main():
    runs_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "docs", "runs")
    print("Cells: time: x corrected floor (x old floor).")
    ratio_rows(load_runs(runs_dir))
    print()
    scaling(runs_dir)


if __name__ == "__main__":
    main()
