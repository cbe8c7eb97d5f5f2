# Layout: brackets spanning lines (with comments and blank lines inside), backslash continuation,
# comments, blank lines inside blocks, indentation of nested blocks, string literals joined across
# lines, semicolons and `if __name__ == "__main__":`.

values = [
    1,
    2,  # a comment inside brackets

    3,
]
print(values)
mapping = {
    "a": (1,
          2),
    "b": [
        [3, 4],
        [5],
    ],
}
print(mapping)
total = (1 +
         2 +
         3)
print(total)
message = ("first part, "
           "second part, "
           'third part')
print(message)
print(
    "call",
    "spanning",
    "lines",
)
result = max(
    [4, 9, 2]
)
print(result)

longer = 1 + \
    2 + \
    3
print(longer)
if longer > 5 and \
        total > 5:
    print("continued condition")


def blocks(n):
    # A comment at the start of a block.

    out = []

    for i in range(n):

        # Blank lines and comments between statements of the same block.
        if i % 2 == 0:
            out.append(i)

        else:
            out.append(-i)
    # A comment indented less than the block, then the block goes on.
    return out


print(blocks(5))

for i in range(2):
    for j in range(2):
        if i == j:
            print("diag", i)
        else:
            print("off", i, j)
    print("row done", i)
print("all done")

x = [1, 2,
     3]; print(x)

# Deeper nesting and dedenting several levels at once.
def deep(a):
    if a > 0:
        if a > 1:
            if a > 2:
                return "big"
            return "two"
    return "small"


print(deep(3), deep(2), deep(1), deep(0))

tabs = 0
if True:
	tabs = 1
print(tabs)

if __name__ == "__main__":
    print("main block")
