#!/usr/bin/env python3
"""Where one unit's wall time goes, host and GPU together: a Chrome trace from interp_units
--timeline-host (Kineto with the host's ATen ops, CUDA runtime calls and kernels; the unit inside
a user scope named "unit"). Prints the unit's span; when the GPU started its first kernel and
ended its last, relative to the unit's start; the GPU's busy time and idle gaps; and per host
thread its outermost events (ATen ops, runtime calls) in order, with the gaps between them where
the thread ran code that records nothing (the interpreter, the engine's own C++). A GPU gap the
host is inside an event for is the host's fault; one where the host is ahead waits on the GPU.

  report_unit_timeline.py TRACE.json [--min-us 5] [--lines 60]
  report_unit_timeline.py --check      (the sums on a made-up trace with known answers; ctest)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_timeline import kernels_by_device, load_events  # noqa: E402

HOST_CATS = ("cpu_op", "cuda_runtime", "cuda_driver", "user_annotation")


def unit_span(events):
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") == "unit":
            return float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))
    raise SystemExit("no 'unit' scope in the trace (record it with interp_units --timeline-host)")


def outermost(events, start, end):
    """Per host thread, the events not nested in another of the same thread, inside [start, end]:
    (ts, te, name), sorted."""
    per = {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in HOST_CATS or e.get("name") == "unit":
            continue
        ts, te = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))
        if te < start or ts > end:
            continue
        per.setdefault(e.get("tid"), []).append((ts, te, e["name"]))
    out = {}
    for tid, evs in per.items():
        evs.sort(key=lambda x: (x[0], -x[1]))
        top, reach = [], -1.0
        for ts, te, name in evs:
            if ts >= reach:
                top.append((ts, te, name))
                reach = te
        out[tid] = top
    return out


def gpu_gaps(kernels, start, end, min_us):
    """Idle stretches of the GPU inside [start, end] of at least min_us, as (from, to)."""
    gaps, reach = [], start
    for ts, te, _, _ in kernels:
        if ts - reach >= min_us and ts <= end:
            gaps.append((reach, min(ts, end)))
        reach = max(reach, te)
    if end - reach >= min_us:
        gaps.append((reach, end))
    return gaps


def busy_in(kernels, start, end):
    busy, reach = 0.0, start
    for ts, te, _, _ in kernels:
        ts, te = max(ts, reach), min(te, end)
        if te > ts:
            busy += te - ts
            reach = te
    return busy


def thread_lines(top, start, end, min_us):
    """The thread's outermost events of at least min_us, and the unrecorded gaps of at least
    min_us between them and up to the unit's end, in order: (offset, duration, text)."""
    lines, reach, small, small_us = [], start, 0, 0.0
    for ts, te, name in top:
        if ts - reach >= min_us:
            if small:
                lines.append((reach - start, 0.0, f"({small} shorter events, {small_us:.1f} us)"))
                small, small_us = 0, 0.0
            lines.append((reach - start, ts - reach, "[no recorded event: host code]"))
        if te - ts >= min_us:
            if small:
                lines.append((ts - start, 0.0, f"({small} shorter events, {small_us:.1f} us)"))
                small, small_us = 0, 0.0
            lines.append((ts - start, te - ts, name))
        else:
            small += 1
            small_us += te - ts
        reach = max(reach, te)
    if small:
        lines.append((reach - start, 0.0, f"({small} shorter events, {small_us:.1f} us)"))
    if end - reach >= min_us:
        lines.append((reach - start, end - reach, "[no recorded event: host code or waiting]"))
    return lines


def graph_launches(events):
    """The GPU work of each cudaGraphLaunch, matched by CUPTI's correlation id: [(launch ts,
    [(start, end), ...])] in launch order."""
    launches = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cuda_runtime" and e["name"] == "cudaGraphLaunch":
            launches[e.get("args", {}).get("correlation")] = (float(e["ts"]), [])
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            c = e.get("args", {}).get("correlation")
            if c in launches:
                launches[c][1].append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    return sorted((ts, sorted(work)) for ts, work in launches.values() if work)


def graph_line(work):
    """Kernels, span, busy and the median gap between consecutive kernels of one graph launch."""
    gaps = sorted(b[0] - a[1] for a, b in zip(work, work[1:]))
    busy = sum(te - ts for ts, te in work)
    median = gaps[len(gaps) // 2] if gaps else 0.0
    return (f"{len(work)} kernels, span {work[-1][1] - work[0][0]:.1f} us, busy {busy:.1f} us, "
            f"median gap {median:.2f} us")


def report(events, min_us, max_lines, out):
    start, end = unit_span(events)
    out.write(f" unit: {end - start:.1f} us on the host\n")
    for device, kernels in sorted(kernels_by_device(events).items()):
        inside = [k for k in kernels if k[1] >= start and k[0] <= end]
        if not inside:
            continue
        first, last = inside[0][0], max(k[1] for k in inside)
        busy = busy_in(inside, first, last)
        out.write(f" GPU {device}: first kernel at {first - start:.1f} us, last ends at"
                  f" {last - start:.1f} us ({end - last:.1f} us before the unit's end); busy"
                  f" {busy:.1f} us of its {last - first:.1f} us span, {len(inside)} kernels\n")
        gaps = gpu_gaps(inside, first, last, min_us)
        out.write(f"  idle gaps of {min_us:g} us or more inside the span: {len(gaps)}, "
                  f"{sum(b - a for a, b in gaps):.1f} us: " +
                  "; ".join(f"{a - start:.0f}+{b - a:.0f}" for a, b in gaps[:12]) + "\n")
    for ts, work in graph_launches(events):
        if ts >= start and ts <= end and len(work) > 2:
            out.write(f"  graph launched at {ts - start:.1f} us: {graph_line(work)}\n")
    threads = outermost(events, start, end)
    for tid, top in sorted(threads.items(), key=lambda kv: -len(kv[1])):
        covered = sum(te - ts for ts, te, _ in top)
        out.write(f" host thread {tid}: {len(top)} outermost events, {covered:.1f} us in them\n")
        lines = thread_lines(top, start, end, min_us)
        for offset, dur, text in lines[:max_lines]:
            out.write(f"  {offset:8.1f} {dur:8.1f}  {text[:90]}\n")
        if len(lines) > max_lines:
            out.write(f"  ... {len(lines) - max_lines} more lines\n")


def _check():
    events = [  # unit 0-100; thread 1: op a (5-15) holding a runtime call, host code, op b (40-42)
        {"ph": "X", "cat": "user_annotation", "name": "unit", "ts": 0, "dur": 100, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::a", "ts": 5, "dur": 10, "tid": 1},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 6, "dur": 2, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::b", "ts": 40, "dur": 2, "tid": 1},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 10, "dur": 20, "args": {"device": 0}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 50, "dur": 10, "args": {"device": 0}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 200, "dur": 10, "args": {"device": 0}},
    ]
    assert unit_span(events) == (0.0, 100.0)
    top = outermost(events, 0, 100)
    assert top == {1: [(5.0, 15.0, "aten::a"), (40.0, 42.0, "aten::b")]}, top
    kernels = kernels_by_device(events)[0]
    inside = [k for k in kernels if k[1] >= 0 and k[0] <= 100]
    assert gpu_gaps(inside, 10, 60, 5) == [(30.0, 50.0)], gpu_gaps(inside, 10, 60, 5)
    assert busy_in(inside, 10, 60) == 30.0
    lines = thread_lines(top[1], 0, 100, 5)
    assert lines == [(0.0, 5.0, "[no recorded event: host code]"), (5.0, 10.0, "aten::a"),
                     (15.0, 25.0, "[no recorded event: host code]"),
                     (42.0, 0.0, "(1 shorter events, 2.0 us)"),
                     (42.0, 58.0, "[no recorded event: host code or waiting]")], lines
    graph = [  # a launch of two kernels (0-10, 11-15: gap 1) and one of a lone kernel
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 0, "dur": 3,
         "args": {"correlation": 5}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 4, "dur": 1,
         "args": {"correlation": 6}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 11, "dur": 4, "args": {"correlation": 5}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 10, "args": {"correlation": 5}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 20, "dur": 1, "args": {"correlation": 6}},
    ]
    launches = graph_launches(graph)
    assert launches == [(0.0, [(0.0, 10.0), (11.0, 15.0)]), (4.0, [(20.0, 21.0)])], launches
    assert graph_line(launches[0][1]) == "2 kernels, span 15.0 us, busy 14.0 us, median gap 1.00 us"
    print("report_unit_timeline: all checks passed")


def main():
    if sys.argv[1:] == ["--check"]:
        return _check()
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--min-us", type=float, default=5.0)
    p.add_argument("--lines", type=int, default=60)
    a = p.parse_args()
    events = load_events(a.trace)
    print(a.trace)
    report(events, a.min_us, a.lines, sys.stdout)


if __name__ == "__main__":
    main()
