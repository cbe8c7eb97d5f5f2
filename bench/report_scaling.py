"""Tensor-parallel scaling table (issue 8) from `gpu_speed --scaling --tp N` runs: decode latency
per token at batch 1 against the per-GPU bandwidth floor (each GPU streams 1/tp of the weights),
prefill of 2048 tokens against the matmul floor of tp GPUs, and the cost of one gathered read per
decode step (trace that saves layer 10's o_proj.input every step, minus the plain trace).

    python3 bench/report_scaling.py tp1.json tp2.json ...
"""
import json
import sys


def main():
    runs = [json.load(open(p)) for p in sys.argv[1:]]
    base = runs[0]
    print(f"floors (GPU 0): copy {base['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s, "
          f"bf16 matmul {base['matmul_flops_per_s'] / 1e12:.0f} TFLOP/s; "
          f"weights {base['weight_bytes'] / 1e9:.2f} GB")
    print(f"{'tp':>3} {'decode b1':>10} {'floor':>8} {'x floor':>8} {'speed-up':>9} "
          f"{'prefill 2048':>13} {'floor':>8} {'x floor':>8} {'read/step':>10}")
    for r in runs:
        tp = r["tp"]
        bw, flops = r["bandwidth_bytes_per_s"], r["matmul_flops_per_s"]
        decode = r["decode"]["1"]["per_step_s"]
        decode_floor = r["weight_bytes"] / tp / bw
        n, layers, hidden = 2048, r["layers"], r["hidden"]
        prefill = r["prefill_s"]["2048"]
        prefill_floor = (2 * r["matmul_params"] * n + 2 * layers * hidden * n * n) / flops / tp
        read = r["trace"]["read"]["per_step_s"] - r["trace"]["plain"]["per_step_s"]
        speedup = base["decode"]["1"]["per_step_s"] / decode
        print(f"{tp:>3} {decode * 1e3:8.2f}ms {decode_floor * 1e3:6.2f}ms {decode / decode_floor:8.2f} "
              f"{speedup:8.2f}x {prefill * 1e3:11.2f}ms {prefill_floor * 1e3:6.2f}ms "
              f"{prefill / prefill_floor:8.2f} {read * 1e6:8.0f}us")


if __name__ == "__main__":
    main()
