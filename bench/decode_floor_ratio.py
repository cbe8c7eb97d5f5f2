"""Decode at batch 1 against its corrected floor (bench/floors.py) for `gpu_speed` JSON runs that
measured no prefill of 2048 tokens (report_scaling.py needs one): per run the step time, the
per-GPU floor, the ratio and the plain and read traces per step.

    python3 bench/decode_floor_ratio.py run.json ...
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floors  # noqa: E402


def line(name, r):
    shape = floors.Shape.from_run(r, r.get("config"))
    step = r["decode"]["1"]["per_step_s"]
    floor = floors.decode_floor(shape, 1, r["bandwidth_bytes_per_s"], tp=r["tp"],
                                attended=floors.decode_attended(r))
    trace = r.get("trace", {})
    plain = trace.get("plain", {}).get("per_step_s", float("nan"))
    read = trace.get("read", {}).get("per_step_s", float("nan"))
    return (f"{name}: tp={r['tp']} decode b1 {step * 1e3:.2f} ms, floor {floor * 1e3:.2f} ms "
            f"({r['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s), {step / floor:.2f}x; trace plain "
            f"{plain * 1e3:.2f} ms/step, read {read * 1e3:.2f} ms/step")


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(line(os.path.basename(path), json.load(open(path))))
