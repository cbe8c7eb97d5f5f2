# Builtins: len, range, sum, min, max, abs, round, divmod, sorted, enumerate, zip, tuple, list,
# int, float, str, bool, repr and print's sep.

print(len("abc"), len([1, 2]), len((1,)), len({"a": 1}), len(range(10)), len(range(5, 0, -2)))

# sum: of ints, floats, mixed, with a start, of an empty sequence, over a range.
print(sum([1, 2, 3]), sum([0.5, 0.25]), sum([1, 2.5]), sum([1, 2], 10), sum([]), sum(range(5)))
print(sum([0.1] * 10), sum((True, True, False)), sum([], 7.5))
# sum adds with `+`: lists and tuples concatenate from a start of their kind.
print(sum([[1], [2, 3]], []), sum([(1,), (2,)], ()), sum([True, 2.5]), sum([1.5, True], True))

# min and max: of a sequence or several arguments; the first of equal ones wins.
print(min([3, 1, 2]), max([3, 1, 2]), min(4, 2, 8), max(4, 2.5, 8.5), max([1, 1.0]), min([1.0, 1]))
print(max(-1, -2), min(-0.5, 0), max(range(7)), min((9, 3, 5)), max([True, 2]), max("b", "a"))
print(max(["aa", "b", "ab"]), min(["aa", "b", "ab"]), max([[1, 2], [1, 3], [0, 9]]), min((2, 1), (1, 5)))

# abs, round (to even at halves), divmod.
print(abs(-7), abs(7), abs(-2.5), abs(0), abs(False))
print(round(2.5), round(3.5), round(-2.5), round(0.5), round(1.4999), round(-1.6), round(7))
print(round(2.675, 2), round(1.005, 2), round(0.125, 2), round(3.14159, 3), round(-1.25, 1))
print(round(1234.5678, -2), round(15, -1), round(25, -1), round(7, 2), round(2.5, 0), round(-0.4))
print(divmod(17, 5), divmod(-17, 5), divmod(17, -5), divmod(-17, -5), divmod(0, 3))
print(divmod(7.5, 2), divmod(-7.5, 2), divmod(1, 0.3), divmod(True, 2))

# sorted: numbers, strings, reversed, stable; a sorted copy leaves the original alone.
orig = [3, 1, 2, 1.5, -4]
print(sorted(orig), orig, sorted(orig, reverse=True), sorted(()), sorted("hello"))
print(sorted(["pear", "Apple", "fig", "apple"]), sorted([2, 1], reverse=False), sorted({"b": 1, "a": 2}))
print(sorted([(2, "b"), (1, "z"), (2, "a")]), sorted([[3], [1, 2], [1]]), sorted([True, 0, 0.5]))

# enumerate and zip.
print(list(enumerate("ab")), list(enumerate(["x", "y"], 5)), list(enumerate([])))
print(list(zip([1, 2, 3], "ab")), list(zip()), list(zip([1], [2], [3])), list(zip(range(3), (9, 8, 7))))
for i, (a, b) in enumerate(zip("pq", [10, 20])):
    print(i, a, b)

# Conversions: int, float, str, bool, tuple, list, repr.
print(int(3.9), int(-3.9), int("42"), int(" -7 "), int(True), int(2.0), int(-0.5), int("+5"))
print(float(2), float("2.5"), float("-1e3"), float(" 0.1 "), float(True), float("inf"), float("-inf"))
print(str(1), str(1.0), str(-0.0), str(True), str(None), str((1,)), str([None]), str(""))
print(bool(0), bool(1), bool(-1), bool(0.0), bool(""), bool(" "), bool([]), bool(None), bool())
print(repr(1), repr(1.0), repr("q"), repr([1, "q"]), repr((1,)), repr(None), repr(True), repr({1: "a"}))
print(tuple([1, 2]), tuple("ab"), tuple(range(3)), list((1, 2)), list({"k": 1}), list(range(2, 5)))
print(int(), float(), str(), tuple(), list())
# int() and float() of a string take underscores between digits, as literals do.
print(int("1_000"), int(" -1_0 "), int("+2_5"), int("0_0"), int("1_2_3"), float("1_000.5"))
print(float("1_0e1_0"), float(" -1_2.5_0 "), float(".5_5"), float("1_0."), float("1_5E-0_1"))

# print: several arguments, sep, no arguments.
print("a", "b", "c", sep="-")
print("a", 1, None, sep="")
print(1, 2, sep=", ")
print()
print("end")

# Keyword forms of the optional arguments.
print(list(enumerate(["x", "y"], start=1)), sum([1, 2], start=10), round(3.14159, ndigits=2))
# sorted(reverse=True) keeps equal values in their order, as a stable sort does.
print(sorted([1, 1.0, True, 0], reverse=True), sorted([2, 1.0, 1, 2.0], reverse=True))

# key= orders by each value's key (stably; reverse keeps equal keys in order); default= answers an
# empty iterable.
pairs = [("b", 2), ("a", 3), ("c", 1), ("d", 2)]
print(sorted(pairs, key=lambda p: p[1]), sorted(pairs, key=lambda p: p[1], reverse=True))
print(sorted(["bb", "a", "ccc"], key=len), sorted([3, -1, 2], key=abs), sorted(pairs, key=None))
print(max(pairs, key=lambda p: p[1]), min(pairs, key=lambda p: p[1]), max(["bb", "a"], key=len))
print(max([], default=7), min([], default=None), max([4, 5], default=0), max(3, 9, key=lambda x: -x))

# The builtins that are classes print as classes, the others as built-in functions.
print(list, dict, len, int, str, range, zip, enumerate, sorted, bool, float, tuple)
