# Comprehensions and generator expressions: list, dict and generator forms, several `for` and
# `if` clauses, nesting, their own scope (loop names do not leak; lambdas bind late), and the
# builtins that take a generator (sum, any, all, sorted, max, min, list, tuple).
xs = [3, 1, 2]
print([x * 2 for x in xs])
print([x for x in range(10) if x % 2 if x > 3])
print([(i, j) for i in range(3) for j in range(i)])
print([y for row in [[1, 2], [3], []] for y in row if y != 2])
print([[y for y in range(x)] for x in range(4)])
print({k: v for k, v in [("a", 1), ("b", 2), ("a", 3)]})
print({c: i for i, c in enumerate("abca")})
print({i: [j * j for j in range(i)] for i in range(3)})
print(sum(x * x for x in xs), sum((x for x in xs), 10))
print(max(x for x in xs), min(-x for x in xs))
print(any(v > 2 for v in xs), all(v > 0 for v in xs), any([]), all([]))
print(any([0, "", None]), all([1, "a", [0]]), any(x for x in "") is False)
print(sorted(str(i) for i in range(12)))
print(list(x.upper() for x in "ab"), tuple(i for i in range(3)))
print([f"{i}:{c}" for i, c in enumerate("xyz")])
print([a for a, b in {1: 2, 3: 4}.items() if b > 2])
print([i for i in range(5) if (i if i % 2 else False)])
print([(lambda v: v + 1)(i) for i in range(3)])

x = "outer"
print([x for x in "ab"], x)
n = 3
print([i + n for i in range(n)])
fs = [lambda: i for i in range(3)]
print([f() for f in fs])


def squares(limit):
    return [k * k for k in range(limit) if k != limit - 1]


print(squares(4), {s: s % 3 for s in squares(5)})
rows = [[1, 2, 3], [4, 5, 6]]
print([[r[c] for r in rows] for c in range(3)])
print(len([0 for _ in range(1000)]))
print(any(range(10 ** 9)), all(range(10 ** 9)), any(range(0)), all(range(3, 0)), all(range(1, 4)))
