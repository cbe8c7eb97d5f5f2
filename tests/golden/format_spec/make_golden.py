#!/usr/bin/env python3
"""CPython's own format() results for the specs tst_format_spec checks (run: python3 make_golden.py
> golden.json). Each row: value kind, value, spec, and the text or null where CPython refuses."""
import json
import sys

ints = [0, 7, -7, 42, 255, 1234567, -1234567, 2**40]
floats = [0.0, -0.0, 1.0, 1.5, -2.25, 3.14159265, 1234567.891, 1e-5, 1e21, 123.456e10,
          float("inf"), float("-inf"), float("nan"), 0.1]
strs = ["", "ab", "héllo", "a longer string"]
specs = ["", "d", "5d", "<5", ">8", "^9", "*^9", "=+8", "+d", " d", "05d", ",", "_", "_x", "#x",
         "#X", "#o", "#b", "b", "x", "c", "n", ".2f", "10.3f", "<10.3f", "+.1e", ".3E", "g", ".3g",
         "G", "#.3g", ".0f", "#.0f", "%", ".1%", ",.2f", "012.3f", ".3", "e", "f", "F", "s", ".2s",
         "10s", "<10", "05", "-^11.4", "é>6", ">+6", "z", ".", "10.", "5x5", ",x", "0>4d", "08,", "010,.2f", "s%s%s%sf", "99999999999", ".99999999999f", "%s", "%n", "1$d",
         "<<5", "{}", "\x00<5", "-z.1f", "z.0f", "#", "+#09x", " 6"]

rows = []
for kind, values in (("int", ints), ("float", floats), ("str", strs)):
    for v in values:
        for s in specs:
            try:
                out = format(v, s)
            except (ValueError, TypeError, OverflowError, MemoryError):
                out = None
            rows.append({"kind": kind, "value": repr(v) if kind == "float" else v, "spec": s,
                         "text": out})
json.dump({"python": sys.version.split()[0], "rows": rows}, sys.stdout, ensure_ascii=False,
          indent=0)
