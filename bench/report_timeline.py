#!/usr/bin/env python3
"""Sums a kernel timeline (gpu_speed --timeline: a Chrome trace from LibTorch's Kineto profiler)
per GPU: the span from the first kernel's start to the last one's end, the time some kernel ran
(busy) and the idle gaps between kernels; then per kernel name its count, its time and the idle
gap before it and how far it moved the latest end ("adds": under programmatic dependent launch a
kernel's time includes waiting for the one before; the adds sum to the span), each per forward
(the trace's forwards: --forwards, 17 for a 16-step decode after its prefill). Where the span
exceeds the busy time, the GPU waited on the host; where a kernel's time exceeds what its bytes
cost, the kernel itself is slow.

  report_timeline.py TRACE.json [--forwards 17] [--top 25] [--host-gaps N] [--sequence ANCHOR]
  report_timeline.py --check      (the sums on a made-up trace with known answers; ctest runs it)

--sequence ANCHOR prints one layer: from a kernel whose name starts with ANCHOR to the next, the
most common sequence's kernels with their median start and end, and how early each started
before the latest end so far (whether programmatic launch let it onto the GPU meanwhile).

--host-gaps N also lists, for each host thread that launched work, its N longest pauses between
two CUDA runtime calls (the host busy elsewhere: interpreting a trace, waiting on a copy), each
with what the call before and the call after put on the GPU (matched by CUPTI's correlation id).
"""
import argparse
import collections
import json
import re
import sys


def short_name(name):
    """The kernel's name and template arguments, without namespaces or parameters."""
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"\(.*$", "", name)  # parameter list
    name = re.sub(r"\b[A-Za-z_]\w*::", "", name)
    return name.replace("__nv_bfloat16", "bf16").replace(" ", "")


def kernels_by_device(events):
    per = collections.defaultdict(list)
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        args = e.get("args", {})
        per[args.get("device", 0)].append(
            (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e["cat"], short_name(e["name"])))
    for k in per.values():
        k.sort()
    return per


def summarize(kernels):
    """(span, busy, per-name [count, time, idle before, adds, early], gaps) of one GPU's kernels,
    sorted by start. `adds` is how far a kernel moved the latest end so far (its idle gap
    included): with programmatic dependent launch, a kernel's time includes waiting for the one
    before, and the adds of all kernels sum to the span, so they apportion it. `early` is how long
    before that latest end the kernel started: under programmatic launch, whether its blocks got
    onto the GPU (and loaded what does not depend on the kernel before) while that one ran."""
    start, end = kernels[0][0], max(k[1] for k in kernels)
    busy, reach = 0.0, start
    gaps = []
    per_name = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
    previous = None
    for ts, te, cat, name in kernels:
        gap = max(0.0, ts - reach)
        busy += max(0.0, te - max(ts, reach))  # overlapping kernels (PDL) count once
        if gap > 0 and previous is not None:
            gaps.append((gap, previous, name))
        row = per_name[name if cat == "kernel" else cat]
        row[0] += 1
        row[1] += te - ts
        row[2] += gap
        row[3] += max(0.0, te - reach)
        row[4] += max(0.0, reach - ts)
        reach = max(reach, te)
        previous = name
    return end - start, busy, per_name, gaps


def report(kernels, forwards, top, out):
    span, busy, per_name, gaps = summarize(kernels)
    f = float(forwards)
    out.write(f"  span {span / f:.1f} us a forward, busy {busy / f:.1f} us, idle {(span - busy) / f:.1f} us"
              f" ({len(kernels) / f:.1f} kernels a forward, {forwards} forwards)\n")
    out.write(f"  {'kernel':<44} {'n/fwd':>6} {'us/fwd':>8} {'mean us':>8} {'idle before, us/fwd':>20}"
              f" {'adds, us/fwd':>13} {'mean adds':>10} {'mean early':>11}\n")
    for name, (n, t, idle, adds, early) in sorted(per_name.items(),
                                                  key=lambda kv: -(kv[1][1] + kv[1][2]))[:top]:
        out.write(f"  {name[:44]:<44} {n / f:6.1f} {t / f:8.1f} {t / n:8.2f} {idle / f:20.1f}"
                  f" {adds / f:13.1f} {adds / n:10.2f} {early / n:11.2f}\n")
    gaps.sort(reverse=True)
    out.write("  longest gaps: " + "; ".join(f"{g:.0f} us {a} -> {b}" for g, a, b in gaps[:6]) + "\n")


def layer_sequence(kernels, anchor):
    """The windows from one kernel whose name starts with `anchor` to the next (a layer, with the
    router or the first GEMV as anchor): (windows of the most common sequence of names, that
    sequence as (name, median start, median end) relative to the anchor's start), or None."""
    starts = [i for i, k in enumerate(kernels) if k[3].startswith(anchor)]
    windows = collections.defaultdict(list)
    for a, b in zip(starts, starts[1:]):
        t0 = kernels[a][0]
        names = tuple(k[3] for k in kernels[a:b])
        windows[names].append([(k[0] - t0, k[1] - t0) for k in kernels[a:b]])
    if not windows:
        return None
    names, times = max(windows.items(), key=lambda kv: len(kv[1]))

    def median(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2

    return len(times), [(name, median([w[i][0] for w in times]), median([w[i][1] for w in times]))
                        for i, name in enumerate(names)]


def report_sequence(kernels, anchor, out):
    found = layer_sequence(kernels, anchor)
    if not found:
        out.write(f"  no two kernels named {anchor}...\n")
        return
    count, rows = found
    out.write(f"  a layer from {anchor} (median of {count} alike): start, end and how early each"
              f" starts before the latest end so far, us\n")
    reach = 0.0
    for name, start, end in rows:
        out.write(f"  {start:8.2f} {end:8.2f} {max(0.0, reach - start):6.2f}  {name[:60]}\n")
        reach = max(reach, end)


def host_gaps(events, n):
    """Per host thread: its n longest pauses between consecutive CUDA runtime calls, as
    (pause, call before, its GPU work, call after, its GPU work), longest first."""
    gpu_work = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            c = e.get("args", {}).get("correlation")
            if c is not None:
                gpu_work[c] = short_name(e["name"])
    calls = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cuda_runtime":
            calls[e.get("tid")].append(
                (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e["name"],
                 gpu_work.get(e.get("args", {}).get("correlation"), "-")))
    out = {}
    for tid, c in calls.items():
        c.sort()
        pauses = [(b[0] - a[1], a[2], a[3], b[2], b[3]) for a, b in zip(c, c[1:])]
        pauses.sort(reverse=True)
        out[tid] = (len(c), pauses[:n])
    return out


def load_events(path):
    """The events of a Chrome trace file (Kineto writes {"traceEvents": [...]}, others a list)."""
    with open(path) as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def _check():
    events = [  # GPU 0: a (0-10), b overlapping it (8-15), gap 5, a (20-30) with c (22-26) inside it;
        # GPU 1: one memcpy
        {"ph": "X", "cat": "kernel", "name": "void ns::(anonymous namespace)::a<float, 1>(Args)",
         "ts": 0, "dur": 10, "args": {"device": 0}},
        {"ph": "X", "cat": "kernel", "name": "b", "ts": 8, "dur": 7, "args": {"device": 0}},
        {"ph": "X", "cat": "kernel", "name": "void ns::(anonymous namespace)::a<float, 1>(Args)",
         "ts": 20, "dur": 10, "args": {"device": 0}},
        {"ph": "X", "cat": "kernel", "name": "c", "ts": 22, "dur": 4, "args": {"device": 0}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 3, "dur": 2,
         "args": {"device": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 99},
    ]
    per = kernels_by_device(events)
    assert sorted(per) == [0, 1], per
    span, busy, names, gaps = summarize(per[0])
    assert (span, busy) == (30.0, 25.0), (span, busy)
    assert names["a<float,1>"] == [2, 20.0, 5.0, 25.0, 0.0], names  # 0-10, then 15-30
    assert names["b"] == [1, 7.0, 0.0, 5.0, 2.0], names  # 10-15; started 2 before a's end
    assert names["c"] == [1, 4.0, 0.0, 0.0, 8.0], names  # inside a: moves no end
    assert sum(row[3] for row in names.values()) == span
    assert gaps == [(5.0, "b", "a<float,1>")], gaps
    assert summarize(per[1])[2]["gpu_memcpy"] == [1, 2.0, 0.0, 2.0, 0.0]
    runtime = [  # one thread: launch (0-2) of k1, memcpy call (10-11) of m1, launch (40-41) of k2
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 2,
         "tid": 7, "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "ts": 10, "dur": 1,
         "tid": 7, "args": {"correlation": 2}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 40, "dur": 1,
         "tid": 7, "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "k1", "ts": 5, "dur": 1, "args": {"correlation": 1}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH", "ts": 12, "dur": 1,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "k2", "ts": 45, "dur": 1, "args": {"correlation": 3}},
    ]
    layers = [  # two layers of r (0-1), g (1-5, from 0.5), d (4-6): and a third, other one
        (0.0, 1.0, "kernel", "r<x>"), (0.5, 5.0, "kernel", "g"), (4.0, 6.0, "kernel", "d"),
        (10.0, 11.0, "kernel", "r<x>"), (10.5, 15.0, "kernel", "g"), (14.0, 16.5, "kernel", "d"),
        (20.0, 21.0, "kernel", "r<x>"), (21.0, 22.0, "kernel", "other"), (30.0, 31.0, "kernel", "r<x>")]
    count, rows = layer_sequence(layers, "r")
    assert count == 2, count
    assert rows == [("r<x>", 0.0, 1.0), ("g", 0.5, 5.0), ("d", 4.0, 6.25)], rows
    gaps_by_thread = host_gaps(runtime, 1)
    assert gaps_by_thread == {7: (3, [(29.0, "cudaMemcpyAsync", "MemcpyDtoH", "cudaLaunchKernel",
                                       "k2")])}, gaps_by_thread
    print("report_timeline: all checks passed")


def main():
    if sys.argv[1:] == ["--check"]:
        return _check()
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--forwards", type=int, default=17)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--host-gaps", type=int, default=0)
    p.add_argument("--sequence", metavar="ANCHOR",
                   help="also print one layer's kernels from a kernel whose name starts so")
    a = p.parse_args()
    events = load_events(a.trace)
    per = kernels_by_device(events)
    if not per:
        sys.exit(f"{a.trace}: no kernel events (was the profiler built with CUPTI?)")
    print(a.trace)
    for device in sorted(per):
        print(f" GPU {device}:")
        report(per[device], a.forwards, a.top, sys.stdout)
        if a.sequence:
            report_sequence(per[device], a.sequence, sys.stdout)
    if a.host_gaps:
        for tid, (count, pauses) in sorted(host_gaps(events, a.host_gaps).items(),
                                           key=lambda kv: -kv[1][0]):
            print(f" host thread {tid}: {count} runtime calls; longest pauses between two:")
            for pause, before, work_before, after, work_after in pauses:
                print(f"  {pause:8.1f} us after {before} ({work_before[:40]}) before {after}"
                      f" ({work_after[:40]})")


if __name__ == "__main__":
    main()
