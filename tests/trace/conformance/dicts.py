# Dicts: literals, lookup, insertion order, item assignment, membership, get, keys, values,
# items, len, equality, nesting and iteration.

d = {"a": 1, "b": 2}
d["c"] = 3
d["a"] = 10
print(d, len(d), d["b"], d.get("c"), d.get("z"), d.get("z", 0), d.get("a", 0))
print("a" in d, "z" in d, 1 in d, "b" not in d)

# Keys of several types: ints, strings, tuples, bools equal to ints.
m = {1: "one", "1": "string one", (1, 2): "pair", 2.5: "float", None: "none"}
print(m[1], m["1"], m[(1, 2)], m[2.5], m[None], m[1.0], m[True])
m[True] = "true"
print(m, len(m))

# Iteration order is insertion order; a key assigned again keeps its place.
order = {}
for k in ["z", "y", "x", "y"]:
    order[k] = len(order)
print(order)
for k in order:
    print(k, order[k])
for k, v in order.items():
    print(k, "->", v)
print(list(order.keys()), list(order.values()), list(order.items()))
print(sorted(order), sorted(order.values()), sum(order.values()), len(order.items()))

# Equality ignores order; nesting; aliasing.
print({"a": 1, "b": 2} == {"b": 2, "a": 1}, {} == {}, {"a": 1} == {"a": 1.0}, {"a": 1} != {"a": 2})
nested = {"layers": [1, 2], "meta": {"name": "x", "size": (3, 4)}}
nested["layers"].append(3)
nested["meta"]["size"] = (5, 6)
print(nested, nested["meta"]["size"][1])
alias = nested["meta"]
alias["name"] = "y"
print(nested["meta"]["name"], bool({}), bool({0: 0}))

# Counting with get, and building a dict of lists.
counts = {}
for w in ["the", "cat", "and", "the", "hat", "and", "the"]:
    counts[w] = counts.get(w, 0) + 1
print(counts)
groups = {}
for n in range(10):
    key = "even" if n % 2 == 0 else "odd"
    if key not in groups:
        groups[key] = []
    groups[key].append(n)
print(groups, repr({}), str({"k": "v"}), {"q": 'it\'s'})

# Views: keys(), values() and items() print as Python prints them, iterate, unpack and have len(),
# bool() and `in`; they read the dict whenever they are used, so a view taken earlier shows later
# changes.
shop = {"apple": 3, "pear": 0}
ks, vs, its = shop.keys(), shop.values(), shop.items()
print(ks, vs, its, {}.keys(), {}.values(), {}.items())
print(len(ks), len(vs), len(its), bool(ks), bool({}.items()), repr(ks), str(vs), f"{its}")
print("apple" in ks, "fig" in ks, 0 in vs, 4 not in vs, ("pear", 0) in its, ("pear", 1) in its)
print(("pear",) in its, "pear" in its, list(ks), tuple(vs), sorted(its), sum(vs), max(ks))
first, second = ks
print(first, second, "+".join(ks), list(zip(ks, vs)), list(enumerate(its)))
shop["fig"] = 7
shop["apple"] += 1
print(ks, vs, its, len(ks))
for name in ks:
    print(name, shop[name])
for name, count in its:
    print(name, count)

# keys and items views compare equal as sets (order aside); a values view equals only itself.
other = {"fig": 7, "pear": 0, "apple": 4}
print(ks == other.keys(), its == other.items(), ks == shop.keys(), vs == shop.values(), vs == vs)
print(ks != other.keys(), ks == ["apple", "pear", "fig"], its == other.keys(), {}.keys() == {}.keys())

# A pass over a dict reads it as it is then: a value assigned to a later key is seen.
marks = {"a": 1, "b": 2, "c": 3}
for key, value in marks.items():
    if key == "a":
        marks["c"] = 30
    print(key, value)
for value in marks.values():
    print(value)

# del d[key] removes the key (views and loops see the dict without it); del of several keys.
del shop["pear"]
print(shop, ks, vs, its)
del other["fig"], other["apple"]
print(other, len(other))
nested2 = {"a": {"b": 1, "c": 2}}
del nested2["a"]["b"]
print(nested2)
cycle = {}
cycle["self"] = cycle
cycle["values"] = cycle.values()
cycle["items"] = cycle.items()
print(cycle)

# dict() builds one as dict.update() fills one: from a mapping (a shallow copy), from pairs, from
# keywords, and from both.
print(dict(), dict(a=1, b=2), dict([(1, 2), [3, 4]], c=5))
original = {"x": [1], "y": 2}
copied = dict(original)
copied["z"] = 3
copied["x"].append(4)
print(original, copied, copied["x"] is original["x"])
print(dict(zip("abc", range(3))), dict(original.items()), dict(enumerate("hi")))
print(dict({1: "one", 1.0: "float one", True: "true"}))
print({(1, (2, 3)): "nested tuple key"}[(1, (2, 3))])

# Starred items in a subscript make a tuple key (Python 3.11), in a read, a store and a del.
pair = [1, 2]
keyed = {(1, 2): "a", (0, 1, 2): "b"}
print(keyed[*pair], keyed[0, *pair], keyed[*pair,])
keyed[*pair] = "c"
del keyed[0, *pair]
print(keyed)
fallback = [1, 2]
print(keyed[*[] or fallback], keyed[*pair if pair else fallback])

# Large dicts (looked up through an index past 16 entries): numbers as one key (1, 1.0, True),
# tuples and ranges by value, and the index kept right through clear, del, pop and popitem,
# including a dict refilled so that its last key is the same object at the same place.
vocab = {f"tok{i}": i for i in range(3000)}
print(len(vocab), vocab["tok2999"], "tok3000" in vocab, {**vocab}["tok7"])
numbers = {i: i * 2 for i in range(100)}
print(numbers[1.0], numbers[True], 3.5 in numbers, numbers[99.0])
pairs = {(i, i + 1): i for i in range(40)}
spans = {range(i): i for i in range(40)}
print(pairs[3, 4], (40, 41) in pairs, spans[range(2, 2)], spans[range(0, 3)], len(spans))
refilled = {k: k for k in range(20)}
print(refilled[19])
refilled.clear()
for k in range(100, 119):
    refilled[k] = k
refilled[19] = "last"
refilled[100] = "again"
print(len(refilled), refilled[100], refilled[19])
edited = {k: 1 for k in range(40)}
del edited[0]
edited[100] = 5
edited.pop(5)
print(edited[100], 0 in edited, 5 in edited, edited[39], len(edited))
while len(edited) > 2:
    edited.popitem()
for k in range(50):
    edited[k] = k * 3
print(edited[1], edited[49], len(edited), 100 in edited, list(edited)[:3])
forward = {i: str(i) for i in range(500)}
backward = {i: str(i) for i in range(499, -1, -1)}
print(forward == backward, forward == {**backward, 3: "x"}, {1: "a"} == {1.0: "a"})

# Random edits of a large dict (a linear congruential generator, the same in both): the index
# follows removals from the middle, the front and the end, and renumbers as they pile up.
state = [12345]
def draw(n):
    state[0] = (state[0] * 1103515245 + 12345) % 2147483648
    return state[0] % n
churn = {i: i for i in range(200)}
seen = []
for step in range(3000):
    op, k = draw(100), draw(400)
    if op < 30:
        churn[k] = step
    elif op < 50:
        seen.append(churn.pop(k, -1))
    elif op < 55:
        if churn:
            seen.append(churn.popitem())
    elif op < 60:
        if k in churn:
            del churn[k]
    elif op < 61:
        churn = {kk: vv for kk, vv in churn.items() if kk % 3}
    else:
        seen.append(churn.get(k, "x"))
print(len(churn), sum(churn), list(churn.items())[:20], seen[-40:], len(seen))
