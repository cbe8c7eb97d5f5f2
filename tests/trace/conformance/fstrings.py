# f-strings: fields, conversions (!r !s !a) and Python's format mini-language.

name = "trace"
n = 42
x = 3.14159
neg = -2.5
big = 1234567.891
items = [1, 2]
print(f"{name} has {n} items and pi is {x}")
print(f"{name!r} {name!s} {name!a} {items!r} {n!r}")
print(f"{{literal braces}} {n}{{}}")
print(f"{n + 1} {n * 2 - 1} {x > 3} {items[0] + items[-1]} {name.upper()} {len(name)}")
print(f"{'inner quotes'} {'a' if n else 'b'} {'b' * 2}")

# Width, alignment and fill.
print(f"[{name:10}] [{name:<10}] [{name:>10}] [{name:^10}] [{name:*^11}] [{name:.3}]")
print(f"[{n:5}] [{n:<5}] [{n:^5}] [{n:05}] [{-n:05}] [{n:+}] [{n: }] [{-n:=8}]")

# Integers in other bases and with grouping.
print(f"{255:b} {255:o} {255:x} {255:X} {255:#b} {255:#o} {255:#x} {255:#X} {65:c}")
print(f"{1234567:,} {1234567:_} {255:_b} {-1234567:,d} {1234567:>15,}")

# Floats: fixed, exponent, general, percent, and the default repr.
print(f"{x:.2f} {x:8.3f} {x:e} {x:.3E} {x:g} {big:g} {big:.10g} {0.25:%} {0.25:.1%}")
print(f"{neg:.1f} {neg:+.2f} {x:+.2f} {big:,.2f} {big:_.1f} {x:010.4f} {neg:010.2f}")
print(f"{1e-7:g} {1e20:g} {1e16:.2e} {0.0:.3f} {-0.0:.1f} {-0.0001:z.2f} {2.5:.0f} {3.5:.0f}")
print(f"{x} {neg} {1e-5} {1e16} {0.1 + 0.2} {float(n)} {x:10} {x:<10}| {1e22:}")

# Booleans and None.
print(f"{True} {False} {None} {True:d} {True!r} {None!r}")

# An escaped brace is a literal brace, not a field's.
print(f"\x7b{1}\x7d", f"\173x\175", f"a\x7b\x7bb")

# A field's expression may have spaces around it (Python reads it inside parentheses); `{x=}`
# prints the expression as written, then its repr, or its format with a spec.
x = 3.14159
name = "ab"
print(f"{ x }", f"{x }", f"{ x:>8.2f}", f"{ {'a': 1} }", f"{x, name}")
print(f"{x=}", f"{x = }", f"{x=:.2f}", f"{name=}", f"{name=!s}", f"{x == 3=}", f"{x>=1}")
print(f"{1 + 1 = }", f"{x!=1}", f"{name[0]=}")

# A spec may hold fields of its own, evaluated after the value: widths, precisions, fills, a
# conversion before them, and `=` with one.
pi, width, digits = 3.14159, 10, 2
print(f"[{pi:>{width}.{digits}f}]", f"[{pi!r:^{width}}]", f"[{'ab':{'*'}<{width - 4}}]")
for label, count in [("alpha", 1), ("b", 22)]:
    print(f"{label:<{width}}|{count:>{len(label)}}|")
print(f"{pi=:.{digits}f}", f"{{pi:{width}}}", f"{width:{'x' if width > 9 else 'd'}}")
