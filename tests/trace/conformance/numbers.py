# Numbers and operators: int and float arithmetic, floor division and modulo of negative
# operands, powers, precedence, bitwise operators, comparisons and float repr.

# Floor division and modulo round toward negative infinity, for every sign.
for a in [7, -7, 6, -6, 0]:
    for b in [2, -2, 3, -3]:
        print(a, b, a // b, a % b, divmod(a, b))

# Floats: the same rules, with float results.
for a in [7.5, -7.5, 1.0, -0.5]:
    for b in [2, -2, 0.1, -0.25]:
        print(a, b, a // b, a % b)
print(1 // 0.1, 1 % 0.1, -1 // 0.1, 5.0 // 3, -5.0 // 3, 5 % -3.0)

# True division always gives a float.
print(7 / 2, -7 / 2, 6 / 3, 1 / 3, 2 / -4)

# Powers: right-associative, binding tighter than unary minus on the left.
print(2 ** 10, 2 ** -1, 2 ** 3 ** 2, -2 ** 2, (-2) ** 2, 2 ** -2 ** 2)
print(0 ** 0, 10 ** 0, 1.5 ** 2, 4 ** 0.5, (-8) ** 3, 3 ** 39)

# Precedence of the arithmetic, shift, bitwise, comparison and boolean operators.
print(1 + 2 * 3, (1 + 2) * 3, 10 - 4 - 3, 100 / 10 / 5, 2 * 3 % 4, 7 - -3, - -4, +-5)
print(1 + 2 << 3, 1 << 2 + 3, 6 & 3 | 8, 5 ^ 1 & 3, ~5, ~-1, 1 | 2 ^ 3 & 4)
print(255 >> 4, -16 >> 2, 1 << 40, 0xFF & 0b1010, 0o17)
print(not 1 == 2, not (1 and 0), 1 < 2 == 2, 3 > 2 > 1, 1 < 3 < 2, 1 == 1.0)
print(1 < 2 < 3 < 4, 5 >= 5 > 4 <= 4, 2 != 2.0, -1 < -0.5 <= 0)

# Integer literals with underscores, in other bases; float literals of every form.
print(1_000_000, 0x_ff, 0b_1010, 1_0.5, 1e3, 2.5e-3, .5, 5., 1E+2, 0.000_1)

# Float repr: the shortest digits that read back, fixed between 1e-4 and 1e16.
print(0.1 + 0.2, 1 / 3, 2 / 3, 1e-4, 1e-5, 1.5e-7, 123456.789)
print(1e15, 1e16, 1e17, 1.5e16, 12345678901234567.0, 1e22, 1e100, -1e-10)
print(100.0, 0.0, -0.0, 3.0 * 2, 1e300 * 1e10, -1e300 * 1e10, 2.0 ** 0.5)
print(repr(0.1), str(2.5), repr(1e16), str(1e-4), [0.5, 1e20])

# Mixed int, float and bool arithmetic.
print(True + True, True * 3, 3 - False, 1 + 2.0, 2 * 0.5, True / 2, -True)
print(10 // 4, 10.0 // 4, 10 % 4.0, 2 ** 62, -2 ** 62, (-2) ** 63)

# Comparisons between numbers of different types.
print(1 == True, 0 == False, 2 > True, 1.5 < 2, 3 == 3.0, 0.1 + 0.2 == 0.3)
print(abs(-3), abs(3.5), abs(-0.0), abs(True), abs(-2 ** 62))

# Augmented assignment on numbers.
x = 17
x += 3
x -= 1
x *= 2
x //= 3
x %= 7
x **= 3
print(x)
y = 7.0
y /= 2
y //= 0.5
y %= 4
print(y)

# Bitwise operators on negative ints, and on bools (bool & bool is a bool).
print(-5 & 3, -5 | 3, -5 ^ 3, ~0, -1 >> 10, 5 & -1, True & False, True | False, True ^ True)
print(True & 3, 6 | False, -7 >> 1, 1 << 0, 2 ** 8 - 1 & 0xF0)

# Float literals at the ends of the range: subnormals, overflow to inf.
print(5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e400, -1e400, 1e-400)

# Ints and floats compare by their exact values (no rounding of the int to a double); a NaN is
# unordered: every ordering is False.
big = 2 ** 53
print(big + 1 == float(big + 1), big + 1 > float(big), big + 1 > big, float(big) < big + 1)
print(2 ** 62 < 2.0 ** 63, -(2 ** 62) > -(2.0 ** 63), 3 == 3.0, 3 < 3.5, -3 > -3.5, True == 1.0)
nan = float("nan")
print(nan < 1, nan >= 1, 1 <= nan, nan == nan, nan != nan, 1 == nan)
print(sorted([3, 1.5, 2, big + 1, float(big)]))

# `is` on values CPython keeps one object of: None, the bools and the small ints (-5 to 256); ints
# computed at run time outside that range are distinct objects.
small, also_small = int("256"), 255 + int("1")
large, also_large = int("257"), 256 + int("1")
neg = int("-5")
print(small is also_small, large is also_large, large is not also_large, neg is -5 + int("0"))
empty, other, f = [], [], float(small)
print(None is None, (1 == 1) is True, (1 == 2) is not False, empty is other, small is f)

# Modulo by -1 is 0 for every int, the smallest included (its // -1 is past 64 bits: an error).
print((-2**62 - 2**62) % -1, 7 % -1, -7 // -1, 7 // -1, abs(-2**62), abs(True))

# Augmented bit operators on ints.
n = 5
n &= 3
n |= 8
n ^= 1
n <<= 3
n >>= 1
print(n)
