#!/usr/bin/env python3
"""Differential conformance test of the trace language's plain-Python part.

Runs every other .py file in this folder under this Python and under `shardscope-cli run`, and
compares what they print, line by line. The scripts use only what docs/trace-language.md says the
language supports (no model, no torch), so any difference is a bug of the interpreter.

Usage: check.py SHARDSCOPE_CLI [FOLDER]   (FOLDER defaults to this script's folder)
"""
import difflib
import os
import subprocess
import sys

TIMEOUT_S = 120


def run(command, cwd):
    """Returns (exit code, stdout lines, stderr) of `command`."""
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, [], f"timed out after {TIMEOUT_S} s"
    return done.returncode, done.stdout.splitlines(), done.stderr


def first_difference(expected, actual):
    """The 1-based number of the first line that differs, or None when the outputs are equal."""
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e != a:
            return i + 1
    if len(expected) != len(actual):
        return min(len(expected), len(actual)) + 1
    return None


def check(script, cli, folder):
    """Compares one script's output; returns a report of what differs, or None."""
    name = os.path.basename(script)
    py_code, py_out, py_err = run([sys.executable, script], folder)
    if py_code != 0:
        return f"{name}: python3 itself failed (exit {py_code}); fix the script:\n{py_err}"
    ss_code, ss_out, ss_err = run([cli, "run", script], folder)
    line = first_difference(py_out, ss_out)
    if line is None and ss_code == 0:
        return None
    report = [f"{name}: shardscope-cli run differs from python3"]
    if ss_code != 0:
        report.append(f"  shardscope-cli exited with {ss_code}: {ss_err.strip()}")
    if line is not None:
        expected = py_out[line - 1] if line <= len(py_out) else "<no more output>"
        actual = ss_out[line - 1] if line <= len(ss_out) else "<no more output>"
        report.append(f"  first difference at output line {line}:")
        report.append(f"    python3:        {expected}")
        report.append(f"    shardscope-cli: {actual}")
        report.extend("  " + d for d in difflib.unified_diff(
            py_out, ss_out, f"{name} (python3)", f"{name} (shardscope-cli)", lineterm=""))
    return "\n".join(report)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    cli = os.path.abspath(sys.argv[1])
    folder = os.path.abspath(sys.argv[2] if len(sys.argv) == 3 else os.path.dirname(__file__))
    if not os.access(cli, os.X_OK):
        sys.exit(f"{cli} is not an executable: build shardscope-cli first")
    me = os.path.abspath(__file__)
    scripts = sorted(os.path.join(folder, f) for f in os.listdir(folder)
                     if f.endswith(".py") and os.path.join(folder, f) != me)
    if not scripts:
        sys.exit(f"no scripts in {folder}")
    failures = [r for r in (check(s, cli, folder) for s in scripts) if r]
    for r in failures:
        print(r, end="\n\n")
    print(f"{len(scripts) - len(failures)} of {len(scripts)} scripts print what python3 prints")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
