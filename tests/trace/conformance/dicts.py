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
