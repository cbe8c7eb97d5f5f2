# Control flow: if/elif/else, for and while with break and continue, nested loops, conditional
# expressions, boolean operators (short-circuit values), pass and assert.

for n in [-5, 0, 3, 10, 15]:
    if n < 0:
        print(n, "negative")
    elif n == 0:
        print(n, "zero")
    elif n % 5 == 0 and n % 3 == 0:
        print(n, "fizzbuzz")
    elif n % 5 == 0:
        print(n, "buzz")
    else:
        print(n, "other")

# for over ranges of every form, lists, tuples, strings, dicts and enumerate/zip.
print(list(range(4)), list(range(2, 6)), list(range(10, 0, -3)), list(range(0)), list(range(5, 1)))
print(list(range(-3, 3, 2)), list(range(0, -10, -4)), range(3), range(1, 9, 2), len(range(1, 10, 3)))
total = 0
for i in range(1, 101):
    total += i
print(total)
for i, ch in enumerate("abc"):
    print(i, ch)
for x, y in zip([1, 2, 3], "xyz"):
    print(x, y)

# break and continue, in nested loops; the loop name keeps its last value.
found = None
for i in range(10):
    if i % 2 == 0:
        continue
    if i > 6:
        found = i
        break
print(found, i)
for i in range(3):
    for j in range(3):
        if j > i:
            break
        if j == 1:
            continue
        print("pair", i, j)

# while with break and continue; a loop that never runs.
k = 0
steps = []
while True:
    k += 1
    if k % 3 == 0:
        continue
    if k > 10:
        break
    steps.append(k)
print(steps, k)
while False:
    print("never")
n = 27
count = 0
while n != 1:
    n = n // 2 if n % 2 == 0 else 3 * n + 1
    count += 1
print(count)

# Conditional expressions and the values of and / or.
for v in [0, 1, "", "s", None, [], [0]]:
    print(repr(v), "truthy" if v else "falsy", v and "yes", v or "no", not v)
print(1 and 2 and 3, 1 and 0 and 3, 0 or "" or None, 0 or [] or "last", None or 0)
print("a" if 1 > 2 else "b" if 2 > 3 else "c", (lambda: 1)() if True else 0)

# Short-circuit: the right side is not evaluated.
calls = []
def mark(x):
    calls.append(x)
    return x
print(mark(0) and mark(1), mark(2) or mark(3), mark(0) or mark(4) and mark(5), calls)

# Chained comparisons evaluate each operand once.
calls = []
print(mark(1) < mark(2) < mark(3), mark(3) < mark(2) < mark(1), calls)

# pass, assert, and statements after a semicolon.
if True:
    pass
assert 1 + 1 == 2
assert len("ab") == 2, "length"
a = 1; b = 2; print(a + b)
if a < b: print("one-line if")
for i in range(2): print("one-line for", i)

# is and is not.
x = None
empty = []
print(x is None, x is not None, empty is not [], empty is empty, x is not empty)

# del of names: the name is unbound (and may be bound again); in a function, of its local names.
gone = 1
also = [gone]
del gone
gone = "again"
print(gone, also)
del gone, also


def scratch(n):
    tmp = n * 2
    del tmp
    tmp = n + 1
    return tmp


print(scratch(4))

# A for loop over a list reads it by position at each pass, as Python's list iterator: a worklist
# the body appends to is walked to its end, removed items are skipped, a replaced item is seen.
queue = [0]
for n in queue:
    if n < 3:
        queue.append(n + 1)
print(queue)
shrinking = [1, 2, 3, 4]
for x in shrinking:
    shrinking.pop(0)
    print(x, shrinking)
replaced = [1, 2, 3]
for x in replaced:
    replaced[2] = 9
    print(x)
rebound = [[1], [2]]
for x in rebound:
    rebound = [5]
    print(x)
print(rebound)

# A loop's else runs when the loop ends without break (also when it never ran); a continue in
# it belongs to the loop around it.
for x in []:
    pass
else:
    print("empty for: else ran")
k = 0
while k < 3:
    k += 1
else:
    print("while else", k)
for i in range(5):
    if i == 2:
        break
else:
    print("not printed")
print("broke at", i)
for i in range(3):
    for j in range(3):
        if j == i:
            break
    else:
        continue
    print("inner broke", i, j)


def first_even(xs):
    for x in xs:
        if x % 2 == 0:
            return x
    else:
        return None


print(first_even([1, 3, 4]), first_even([1]))
