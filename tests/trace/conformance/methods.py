# Methods of str, list and dict: split/rsplit (with and without sep, maxsplit), splitlines,
# find/rfind/index/rindex/count with start and end, partition, the is* tests and cases, padding,
# removeprefix/removesuffix, str.format, strip variants, startswith/endswith with bounds, replace;
# list.sort/reverse/insert/remove/copy/clear; dict.update/pop/setdefault/popitem/copy/clear.

for s in ["", " ", "a", " a b  c ", "a,b,,c,", ",", "a  b"]:
    print(repr(s), s.split(), s.split(None, 1), s.rsplit(None, 1), s.split(","), s.split(",", 1), s.rsplit(",", 1), s.split(" "), s.rsplit(" ", 2), s.split(maxsplit=0), s.rsplit(",", 0))

for s in ["banana", "", "aaa"]:
    for sub in ["", "a", "an", "z", "aa"]:
        print(s.find(sub), s.rfind(sub), s.count(sub), s.find(sub, 1), s.rfind(sub, 1), s.find(sub, -2), s.rfind(sub, 0, 3), s.count(sub, 1, 4), s.find(sub, 10), s.rfind(sub, 10), s.count(sub, 10), s.find(sub, 3, 3))

print("abc".index("c"), "abcabc".rindex("b"), "abc".index("", 3))

for s in ["a=b=c", "abc", "", "=="]:
    print(s.partition("="), s.rpartition("="), s.partition("b=c"), s.rpartition("=="))

for s in ["a\nb\r\nc\rd", "\n", "", "x\n\ny\n", "a\x0bb\x0cc\x1cd"]:
    print(s.splitlines(), s.splitlines(True), s.splitlines(keepends=True))

for s in ["", "1", "12a", "abc", "ABC", "aB", "  ", "a1", "1.5", "A1", "a b", "hello World 3", "they're bill's"]:
    print(repr(s), s.isdigit(), s.isalpha(), s.isalnum(), s.isspace(), s.isupper(), s.islower(), s.title(), s.capitalize(), s.swapcase(), s.upper(), s.lower())

for s in ["ab", "", "-4", "+12", "abcdef", "x"]:
    print(repr(s.center(7)), repr(s.center(6, "*")), repr(s.center(8, "-")), s.ljust(5, "."), s.rjust(5, "."), s.zfill(5), s.zfill(1), s.center(1), repr(s.ljust(-3)))

print("abc".removeprefix("ab"), "abc".removeprefix("x"), "abc".removesuffix("bc"), "abc".removesuffix(""), "".removeprefix(""), "abc".removeprefix(""))

print("{} and {}".format(1, "b"), "{1}{0}{1}".format("a", "b"), "{x}-{y!r}".format(x=1, y="s"), "{:>5}|{:<4}|{:^6.2f}".format(1, "ab", 3.14159), "{{}} {}".format(7), "{0!s:>4}".format([1]), "{:,}".format(1234567), "{}".format(None))

print("xyzzy".strip("yz"), "  a  ".lstrip(), "  a  ".rstrip(), "xxa".lstrip("x"), "axx".rstrip("x"), "abc".strip("abc"), "a".lstrip(None))

print("abc".startswith("b", 1), "abc".startswith("a", 1), "abc".endswith("b", 0, 2), "abc".startswith(("x", "bc"), 1), "abc".startswith("", 3), "abc".startswith("", 4), "abc".endswith("c", -1), "abc".endswith("", 5))

print("aaa".replace("a", "b"), "aaa".replace("a", "bb", 2), "abc".replace("", "-"), "abc".replace("", "-", 2), "abc".replace("x", "y"), "aaa".replace("aa", "b"), "".replace("", "x"), "ab".replace("a", "", -1))

l = [3, 1, 2]
l.sort()
print(l)
l.sort(reverse=True)
print(l)
l.sort(key=lambda x: x % 2)
print(l)
l.reverse()
print(l)
l.insert(0, 9)
l.insert(-1, 8)
l.insert(100, 7)
l.insert(-100, 6)
print(l)
l.remove(9)
print(l, l.copy(), l.copy() is l)
l.clear()
print(l)

l = [(1, "b"), (0, "a"), (1, "a")]
l.sort()
print(l)
w = ["bb", "a", "ccc", "dd"]
w.sort(key=len)
print(w)
w.sort(key=len, reverse=True)
print(w)

d = {"a": 1}
d.update({"b": 2}, c=3)
d.update([("d", 4), ["a", 0]])
d.update(e=5)
print(d)
print(d.pop("a"), d.pop("zz", None), d)
print(d.setdefault("b", 9), d.setdefault("n"), d.setdefault("m", [1]), d)
print(d.popitem(), d.popitem(), d)
c = d.copy()
c["q"] = 1
print(d, c, c is d)
d.clear()
print(d, len(d))

d = {"a": 1, "b": 2}
for k in d:
    d.update({"a": 5})
print(d)

# str.format's specs may hold fields of their own, numbered after the field's value.
print("[{:>{}}]".format(3.5, 8), "[{0:{1}.{2}f}]".format(3.14159, 9, 3),
      "[{x:{fill}^{w}}]".format(x="ab", fill="*", w=6))
print("{:{}}{}".format(1, 3, "z"), "{{}} {}".format(1), "{!r:>{}}".format("a", 5))
