# Lists and tuples: indexing (negative too), slicing, concatenation and repetition, membership,
# comparison, unpacking, mutation through methods and subscripts, and aliasing.

a = [10, 20, 30, 40, 50, 60]
print(a[0], a[-1], a[-6], a[2:4], a[:3], a[3:], a[-2:], a[:-2], a[::2], a[::-1], a[1::-1])
print(a[4:1:-1], a[-1:-4:-1], a[10:], a[-10:2], a[2:2], a[::3], a[5:0:-2], a[:])

t = (1, "two", 3.0, None, True)
print(t, t[1], t[-2], t[1:3], t[::-1], len(t), (), (7,), (7), tuple())
print(t[-5:-3], t[:0], t[1:100])

# Concatenation, repetition and membership.
print([1, 2] + [3], (1,) + (2, 3), [0] * 4, 2 * [1, 2], (None,) * 3, [] * 9, [[0]] * 2)
print(3 in [1, 2, 3], 4 in (1, 2), 4 not in [4], "a" in ["a", "b"], [1] in [[1], [2]], 2.0 in [2])

# Comparison: element by element, then by length.
print([1, 2] == [1, 2], [1, 2] < [1, 3], [1, 2] < [1, 2, 0], (1, 2) > (1,), [] < [0], (2,) >= (1, 9))
print([1, [2, 3]] == [1, [2, 3]], (1, 2) == (1, 2.0), [1] != [1], ("a", 1) < ("a", 2), [1, 2] == (1, 2))

# Unpacking into names, nested, and swapping.
p, q = 1, 2
p, q = q, p
(r, s), u = (3, 4), [5]
first, second, third = "xyz"
print(p, q, r, s, u, first, second, third)
i = j = k = 0
print(i, j, k)
[m, n] = [7, 8]
print(m + n)

# Item assignment, including negative indices, and aliasing of lists.
b = a
b[0] = 11
b[-1] = 66
print(a, a is b, a == b, [1] is [1], a[0] is b[0])
nested = [[1, 2], [3, 4]]
nested[1][0] = 30
print(nested, nested[-1][-1])
grid = [[0] * 3] * 2
grid[0][0] = 9
print(grid)

# Methods: append, extend, pop, index, count (list); index, count (tuple).
c = []
c.append(1)
c.append([2])
c.extend([3, 4])
c.extend((5,))
c.extend("ab")
print(c, len(c))
print(c.pop(), c.pop(0), c.pop(-2), c)
d = [3, 1, 3, 2, 3]
print(d.index(3), d.index(3, 1), d.index(3, -2), d.index(2, 0, 4), d.count(3), d.count(9))
print((1, 2, 1).count(1), (5, 6, 7).index(7), ["a", "b"].index("b"), [1, 1.0, True].count(1))
e = [1, 2]
e.extend(e)
print(e)

# Augmented assignment: += on a list extends it in place; on a tuple it makes a new tuple.
f = [1]
g = f
f += [2, 3]
print(f, g, f is g)
h = (1,)
h2 = h
h += (2,)
print(h, h2)
f *= 2
print(f)

# Truthiness of sequences and len().
print(bool([]), bool([0]), bool(()), bool((None,)), len([[], []]), len(range(3)))
print(list(range(5)), list((1, 2)), tuple([3, 4]), list(), list([1, [2]]))

# += on a list takes any iterable, as extend does.
w = [0]
w += "xy"
w += (1, 2)
w += range(3, 5)
print(w)

# A trailing comma makes a tuple; chained targets share one object.
single = 1,
print(single, len(single))
l1 = l2 = []
l1.append("shared")
print(l2, l1 is l2)

# Augmented assignment through subscripts.
counts = [1, 2, 3]
counts[0] += 10
counts[-1] *= 5
box = {"n": 1, "s": "a"}
box["n"] += 1
box["s"] += "b"
grid2 = [[1, 2], [3, 4]]
grid2[1][0] -= 3
print(counts, box, grid2)

# Slice assignment: a plain slice takes any iterable, of any length (growing or shrinking the list,
# inserting where the slice is empty); an extended slice takes exactly as many items as it selects.
s = [0, 1, 2, 3, 4, 5]
s[1:3] = [7, 8, 9]
print(s)
s[2:5] = []
print(s)
s[0:0] = "ab"
print(s)
s[len(s):] = (6, 7)
s[5:2] = [None]
print(s)
s[-2:] = range(2)
print(s)
s[:] = s
s[::2] = [10, 20, 30, 40, 50][: len(s[::2])]
print(s)
s[::-3] = ["x", "y", "z"][: len(s[::-3])]
print(s)
s[1:6:1] = [1]
alias = s
s[:] = []
print(s, alias, s is alias)

# del: items, plain and extended slices (out-of-range slices delete nothing), several targets.
r = list(range(12))
del r[0]
del r[-1]
print(r)
del r[2:4]
print(r)
del r[::3]
print(r)
del r[::-2]
print(r)
del r[100:], r[3:1], r[0], (r[0])
print(r)
grid = [[1, 2, 3], [4, 5, 6]]
del grid[0][1:], grid[1][::2]
print(grid)

# A list that holds itself prints as Python prints it.
loop = [1]
loop.append(loop)
print(loop, (loop,), [loop, [loop]])

# A value that holds itself equals itself: items are compared by identity first, as Python does,
# so the comparison ends (a NaN inside a list equals itself there too).
a = []
a.append(a)
d = {}
d["d"] = d
nan = float("nan")
print(a == a, a != a, a in a, a < a, a <= a, d == d, [a] == [a], [nan] == [nan], nan == nan)
print([a, 1] == [a, 1], [a, 1] < [a, 2], (a, nan) == (a, nan), {"x": a} == {"x": a})

# Membership in a range: ints and bools by arithmetic, a float where it equals an item, anything
# else never.
print(3.0 in range(5), 2.5 in range(5), True in range(2), "a" in range(3), None not in range(3))
print(-1.0 in range(0, -5, -1), 4.0 in range(0, 10, 2), 5.0 in range(0, 10, 2), float("inf") in range(3))

# Ranges are equal as the sequences they walk, and so are one dict key.
print(range(3) == range(3), range(0) == range(2, 2), range(0, 3, 5) == range(1),
      range(1, 5, 2) == range(1, 6, 2), range(3) == range(1, 3), range(3) != range(0, 3))
keyed = {range(3): "a"}
keyed[range(0, 3)] = "b"
print(keyed, range(3) in [range(3)], (range(2),) == (range(0, 2),))

# Unpacking: * in calls, displays and targets (one starred target, anywhere, nested too), ** in
# calls and dict displays, and the for loop's and a comprehension's targets.
def parts(a, b=2, c=3):
    return (a, b, c)
pair = [1, 2]
print(parts(*pair), parts(*pair, c=9), parts(**{"a": 5, "c": 6}), parts(1, **{"b": 7}),
      parts(*[1], *(2,), **{}))
print(*pair, sep="-")
print([*pair, *"ab", 0], (*pair,), (*pair, *pair), *range(3))
base = {"x": 1}
print({**base, "y": 2, **{"x": 3}}, dict(**base, z=0))
first, *rest = [1, 2, 3, 4]
*init, last = "abc"
a, *mid, z = range(5)
[p, *q] = (9,)
print(first, rest, init, last, a, mid, z, p, q)
for head, *tail in [(1, 2, 3), (4,)]:
    print(head, tail)
print([t for _, *t in [(1, 2), (3, 4, 5)]])
u, (v, *w) = 1, [2, 3]
both = *pair, 3
print(u, v, w, both, max(*pair), list(zip(*[(1, 2), (3, 4)])))
