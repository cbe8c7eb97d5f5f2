# Functions: def with positional, default and keyword arguments, return values (several, none),
# recursion, nested functions and closures, functions as values, lambdas.

def add(a, b):
    return a + b

def greet(name, greeting="Hello", punct="!"):
    return greeting + ", " + name + punct

def nothing():
    pass

def early(x):
    if x > 0:
        return "positive"
    return

def pair(x):
    return x, x * x

print(add(1, 2), add("a", "b"), add([1], [2]), add(b=1, a=2), add(1, b=5))
print(greet("Ann"), greet("Bob", "Hi"), greet("Cy", punct="?"), greet(punct=".", name="Di"))
print(nothing(), early(1), early(-1), pair(3), pair(2)[1])
q, sq = pair(4)
print(q, sq)

# Defaults are evaluated once, at definition.
base = 10
def scaled(x, factor=base):
    return x * factor
base = 100
print(scaled(2), scaled(2, 3))

# Recursion.
def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)

def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)

print(fact(10), fact(20), fib(15))

# Nested functions see the enclosing scope; the enclosing scope's later values too.
def outer(x):
    y = x * 2
    def inner(z):
        return x + y + z
    return inner(1) + inner(2)

print(outer(5))

def make_adder(n):
    def adder(x):
        return x + n
    return adder

add3 = make_adder(3)
add10 = make_adder(10)
print(add3(1), add10(1), make_adder(-1)(1))

# Functions as values, passed and stored.
def apply(f, v):
    return f(v)

ops = {"double": lambda v: v * 2, "neg": lambda v: -v, "fact": fact}
for name in ["double", "neg", "fact"]:
    print(name, apply(ops[name], 5))

# Lambdas: defaults, several parameters, immediately called, in sorted-like use.
square = lambda v: v * v
mix = lambda a, b=2: a * 10 + b
print(square(7), mix(1), mix(1, 3), mix(b=4, a=5), (lambda: "called")(), (lambda a, b: b - a)(1, 10))

# Local names do not leak; a function reads globals at call time.
counter = 0
def read_counter():
    return counter
counter = 5
print(read_counter())
def shadow():
    counter = 99
    return counter
print(shadow(), counter)

# A function mutating a list it was given.
def push(items, v):
    items.append(v)
    return len(items)
acc = []
print(push(acc, 1), push(acc, 2), acc)

# Type hints and a docstring are accepted.
def hinted(a: int, b: float = 1.5) -> float:
    "Adds two numbers."
    return a + b
print(hinted(1), hinted(2, b=0.25))

# Closures see the variable, not its value at definition (late binding); defaults capture values.
def late():
    x = 1
    def get():
        return x
    x = 2
    return get
print(late()())
fns = []
for i in range(3):
    fns.append(lambda: i)
bound = []
for i in range(3):
    bound.append(lambda i=i: i * 10)
print(fns[0](), fns[2](), bound[0](), bound[2]())

# Parameters as Python's: *args, keyword-only after * or *args, **kwargs, positional-only before
# /, in defs and lambdas, and the arguments bound to them.
def every(a, b=2, *args, k, m=1, **kw):
    return (a, b, args, k, m, kw)
print(every(1, k=0), every(1, 2, 3, 4, k=5, z=6), every(*[1, 2], k=3, **{"m": 4, "q": 5}))
def positional_first(a, /, b, *, c=3):
    return (a, b, c)
print(positional_first(1, 2), positional_first(1, b=2, c=4))
def named_like_a(a, /, **kw):
    return (a, kw)
print(named_like_a(1, a=2))
collect = lambda *a, **k: (a, k)
print(collect(1, 2, x=3), collect())
def forward(*args, **kwargs):
    return every(*args, **kwargs)
print(forward(1, k=2), forward(1, 2, 3, k=4, extra=5))
