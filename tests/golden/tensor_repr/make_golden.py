#!/usr/bin/env python3
"""What print() shows, for tst_script_language's tensorsPrintAsTorchPrintsThem.

Each line of cases.txt is an expression the trace language evaluates too; PyTorch evaluates it here
and print() (str) shows it with torch's default print options. Run where torch is installed, from the
repository root (Debian 12's python3-torch, 1.13.1, or the GPU machine's torch 2.11):

    /usr/bin/python3 tests/golden/tensor_repr/make_golden.py > tests/golden/tensor_repr/golden.json
"""
import json
import os
import sys

import torch


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "cases.txt"), encoding="utf-8") as f:
        cases = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    out = {
        "made_by": "tests/golden/tensor_repr/make_golden.py",
        "torch": torch.__version__,
        "cases": [{"expression": c, "printed": str(eval(c, {"torch": torch}))} for c in cases],
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
