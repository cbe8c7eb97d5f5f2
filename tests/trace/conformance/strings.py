# Strings: literals and escapes, concatenation and repetition, indexing and slicing, membership,
# comparisons, repr and the str methods the language has.

s = "Hello, World"
print(s, len(s), s[0], s[-1], s[4], s[-5])
print(s[:5], s[7:], s[-5:], s[:-7], s[::2], s[::-1], s[1:10:3], s[-2:-9:-2])
print(s[100:], s[:100], s[5:2], s[-100:3], repr(s[3:3]))

# Literals: both quotes, escapes, raw strings, adjacent literals joined, triple quotes.
print('single', "double", 'it\'s', "say \"hi\"", 'tab\there', "back\\slash")
print("a" "b" 'c', r"raw\n", R'C:\path', "line1\nline2", "nul[\0]" == "nul[" + "\0" + "]")
print("""triple
quoted""", '''single triple''', "unknown \q escape", "x\
y")

# Concatenation, repetition, membership and comparison.
print("ab" + "cd", "ab" * 3, 3 * "xy", "-" * 10, "" * 5 == "", "ab" * 0)
print("ell" in s, "xyz" in s, "" in s, "W" not in s, "Wo" in "World")
print("abc" < "abd", "abc" < "ab", "B" < "a", "abc" == "abc", "a" != "b", "Z" >= "A")
print(max("apple", "pear", "fig"), min("apple", "pear", "fig"), sorted(["b", "C", "a", "B"]))

# repr picks the quote that needs no escaping, as Python does.
print(repr("plain"), repr("it's"), repr('say "hi"'), repr("both ' and \""), repr("a\nb\tc\\"))
print(repr(""), repr("\x01"), str("text"), str(12), str(1.5), str(None), str(True), str([1, "a"]))

# Methods: join, upper, lower, strip, startswith, endswith, replace.
words = ["alpha", "beta", "gamma"]
print(", ".join(words), "".join(words), "-".join([]), "+".join(["one"]), " ".join("abc"))
print("MiXeD 123".upper(), "MiXeD 123".lower(), "  padded \t\n".strip() + "|", "   ".strip() == "")
print(s.startswith("Hell"), s.startswith("hell"), s.endswith("World"), s.endswith(""), "".startswith(""))
print("aaa".replace("a", "b"), "banana".replace("an", "AN"), "abc".replace("x", "y"))
print("aaaa".replace("aa", "a"), "abab".replace("ab", "abab"), "x.y.z".replace(".", ""))

# Strings as sequences: iteration, indexing in loops, counting.
vowels = 0
for ch in "conformance":
    if ch in "aeiou":
        vowels += 1
print(vowels, list("abc"), tuple("hi"), len(""), sorted("banana"))

# Augmented assignment builds new strings.
t = "ab"
t += "cd"
t *= 2
print(t)

# More escapes: \x, octal, \a \b \f \v, as repr shows them.
print(repr("\x41\x7e\x7f"), repr("\101\060\0"), repr("\a\b\f\v"), len("\x00\x01"), "\u0041\U00000042")

# Method arguments: strip(chars), replace(old, new, count), startswith and endswith of a tuple.
print("xxhixx".strip("x"), "--a-b--".strip("-"), "abcba".strip("ab"), "hello".strip("") + "|")
print("aaaa".replace("a", "b", 2), "aaaa".replace("a", "b", 0), "abab".replace("ab", "x", 1))
print("report.csv".endswith((".csv", ".tsv")), "report.txt".endswith((".csv", ".tsv")))
print("layer.3".startswith(("mlp", "layer")), "attn".startswith(("mlp", "layer")))

# printf-style formatting with %: conversions, flags, widths and precisions (digits or *), keys
# from a dict, and what a lone value, a list or a dict stands for.
print("%d items" % 3, "%s and %r" % ("a", "b"), "%5.2f|%-6d|%06.1f|%+d|% d|" % (3.14159, 42, -2.5, 7, 7))
print("%x %X %o %#x %#o %#X" % (255, 255, 8, 255, 8, 255), "%e %E %g %G" % (12345.678, 0.000123, 1e-5, 1e20))
print("%c%c" % (65, "b"), "%%" % (), "%(a)s-%(b)03d" % {"a": "x", "b": 5}, "%(a)s %(a)s" % {"a": 1})
print("%*d|%-*d|%.*f" % (5, 1, 4, 2, 2, 3.14159), "%.3d|%5.3d|%-6.2x|" % (5, -7, 10), "%0-5d|" % 3)
print("%s" % {"a": 1}, "%s" % [1, 2], "%s" % ((1, 2),), "%d" % 3.99, "%d" % True, "x" % [], "x" % {})
print("%.2s|%5.1s|" % ("abc", "xyz"), "%i %u %ld" % (1, 2, 3), "%r" % 1.5, "%+.1e" % -0.0, "%#.0f %#g" % (3, 2))

# ascii(), %a and !a: repr with every non-ASCII character escaped (\x, \u or \U by its size).
smile = "\U0001f600"
print(ascii("caf\u00e9"), "%a" % "\u20ac", f"{smile!a}", "{!a}".format(["n\u00e9", 1]), ascii("plain"))

# Widths, precisions and fills count characters, not UTF-8 bytes.
print('%-4s|%c|%.1s|%5.2s|%-3c|%3c' % ('é', 'ü', 'éa', 'üxy', 'ß', 65), '[%6s]' % '日本', '[%-6r]' % 'é')
print('[' + 'é'.ljust(3) + ']', '[' + 'é'.rjust(3, 'ü') + ']', '[' + 'ab'.center(5, 'ß') + ']', '[' + 'é'.center(4) + ']', '-é'.zfill(4))
print('{:é^7}'.format('ab'), '{0!r:>5}|{0!a}'.format('é'))
