# Python runs operands left to right, and `x[i] op= v` evaluates x and i once, before v.
log = []


def f(v):
    log.append(v)
    return v


def g(v):
    log.append(v)
    return ls


ls = [0, 0]
a = f(1) + f(2)
print(a, log)
d = {f(3): f(4), f(5): f(6)}
print(d, log)
b = g('M')[f(0)]
c = f(6) < f(7) < f(8)
e = [f(9)] + [len(log)]
print(b, c, e, log)
del log[:]
x = [5, 7]
x[f(0)] += 1
dd = {'a': [1]}
f(dd)['a'] += [2]
g('L')[f(1)] += f(4)
print(log, x, dd, ls)
s = 'ab'
s += f('c') * 2
n = 10
n -= f(3) ** 2
print(s, n, log)
