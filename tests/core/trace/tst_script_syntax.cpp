// Trace scripts refuse what Python refuses, in its words and at its place: assignment, `del` and
// augmented-assignment targets, f-string fields (errors placed inside the field), keys Python
// cannot hash, `dict()`, unpacking with * and **, parameters and the arguments bound to them, and
// printf-style % formatting. The rest of the language's errors: tst_script_language.cpp.
#include <QtTest/QtTest>

#include "common/script_checks.h"

using namespace shardscope;
using namespace shardscope::test;

class TestScriptSyntax : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void pythonsErrorsAtPythonsPlace_data() {
    QTest::addColumn<QString>("script");
    QTest::addColumn<QString>("message");
    // What Python's compiler refuses as a target, refused before the script runs (`[1] += [2]`
    // ran silently, `f() = 1` failed only when reached), in its words and at its column.
    // A condition followed by '=': CPython's hints, at the target's column, and none where no
    // value follows or a second '=' does.
    QTest::newRow("= after a name in an if")
        << "x = 1\nif x = 1:\n    pass\n"
        << "hostile.py:2:4: syntax error: invalid syntax. Maybe you meant '==' or ':=' instead "
           "of '='?";
    QTest::newRow("= after a name in a while")
        << "while x = 3: pass\n"
        << "hostile.py:1:7: syntax error: invalid syntax. Maybe";
    QTest::newRow("= after a call in an if")
        << "if f() = 1:\n    pass\n"
        << "hostile.py:1:4: syntax error: cannot assign to function call here. Maybe you meant "
           "'==' instead of '='?";
    QTest::newRow("= after a not") << "if not x = 1:\n    pass\n"
                                   << "hostile.py:1:10: syntax error: expected ':', found '='";
    QTest::newRow("= twice") << "if x = 1 = 2:\n    pass\n"
                             << "hostile.py:1:6: syntax error: expected ':', found '='";
    QTest::newRow("assigned a literal") << "x = 1\n[1] = 3\n"
                                        << "hostile.py:2:2: syntax error: cannot assign to literal";
    QTest::newRow("assigned a call") << "print(1)\nlen(x) = 3\n"
                                     << "hostile.py:2:1: syntax error: cannot assign to function "
                                        "call";
    QTest::newRow("assigned in a chain")
        << "a = 1 = 2\n"
        << "hostile.py:1:5: syntax error: cannot assign to literal";
    QTest::newRow("assigned an operation") << "a.b, c + 1 = 2, 3\n"
                                           << "hostile.py:1:6: syntax error: cannot assign to "
                                              "expression";
    QTest::newRow("assigned a parenthesized operation") << "(a) + b = 1\n"
                                                        << "hostile.py:1:1: syntax error: cannot "
                                                           "assign to expression";
    QTest::newRow("assigned a comparison") << "x = 1\na + b < c = 1\n"
                                           << "hostile.py:2:1: syntax error: cannot assign to "
                                              "comparison";
    QTest::newRow("assigned a conditional") << "a.b if c else d = 1\n"
                                            << "hostile.py:1:1: syntax error: cannot assign to "
                                               "conditional expression";
    QTest::newRow("assigned an f-string") << "rf'{x}' = 1\n"
                                          << "hostile.py:1:1: syntax error: cannot assign to "
                                             "f-string expression";
    QTest::newRow("deleted a comparison") << "del a < b\n"
                                          << "hostile.py:1:5: syntax error: cannot delete "
                                             "comparison";
    QTest::newRow("with as, then another manager")  // two managers, not a tuple target
        << "with a as b, c:\n    pass\n"
        << "several context managers in one with statement: not supported";
    QTest::newRow("assigned a comprehension") << "[x for x in y] = 1\n"
                                              << "cannot assign to list comprehension";
    QTest::newRow("for over a literal") << "for a, 1 in x:\n    pass\n"
                                        << "hostile.py:1:8: syntax error: cannot assign to literal";
    QTest::newRow("comprehension over a call") << "y = [1 for f() in x]\n"
                                               << "hostile.py:1:12: syntax error: cannot assign "
                                                  "to function call";
    QTest::newRow("with as a literal") << "with a as (b, None):\n    pass\n"
                                       << "hostile.py:1:15: syntax error: cannot assign to None";
    QTest::newRow("augmented list") << "[1] += [2]\n"
                                    << "hostile.py:1:1: syntax error: 'list' is an illegal "
                                       "expression for augmented assignment";
    QTest::newRow("augmented tuple") << "a, b += 1\n"
                                     << "'tuple' is an illegal expression for augmented assignment";
    QTest::newRow("augmented comprehension")
        << "[x for x in y] += [1]\n"
        << "'list comprehension' is an illegal expression for augmented assignment";
    QTest::newRow("augmented call") << "x.f() += 1\n"
                                    << "hostile.py:1:1: syntax error: 'function call' is an "
                                       "illegal expression for augmented assignment";
    QTest::newRow("del of a literal") << "del 1\n"
                                      << "syntax error: cannot delete literal";
    // Keys Python cannot hash are refused where Python refuses them (`{[1]: 2}` was a dict).
    QTest::newRow("list as a key") << "d = {[1]: 2}\n"
                                   << "hostile.py:1:1: unhashable type: 'list'";
    QTest::newRow("list in a tuple key") << "d = {}\nd[(1, [2])] = 3\n"
                                         << "hostile.py:2:1: unhashable type: 'list'";
    QTest::newRow("dict looked up by a dict") << "d = {1: 2}\nx = d[{}]\n"
                                              << "hostile.py:2:1: unhashable type: 'dict'";
    QTest::newRow("list in a dict") << "x = [1] in {1: 2}\n"
                                    << "hostile.py:1:1: unhashable type: 'list'";
    QTest::newRow("list in a keys view") << "x = [1] in {1: 2}.keys()\n"
                                         << "unhashable type: 'list'";
    QTest::newRow("list key in an items view") << "x = ([1], 2) in {1: 2}.items()\n"
                                               << "unhashable type: 'list'";
    QTest::newRow("values view is a key, by identity")  // as Python hashes dict_values
        << "d = {1: 2}\nv = d.values()\ne = {v: 1}\nassert e[v] == 1 and len(e) == 1\nx = 1 / 0\n"
        << "hostile.py:5:1: division by zero";
    QTest::newRow("keys view as a key") << "d = {1: 2}\ne = {d.keys(): 1}\n"
                                        << "unhashable type: 'dict_keys'";
    QTest::newRow("dict.get of a list") << "x = {1: 2}.get([1], 0)\n"
                                        << "unhashable type: 'list'";
    QTest::newRow("dict.pop of a list") << "x = {1: 2}.pop([1], 0)\n"
                                        << "unhashable type: 'list'";
    QTest::newRow("dict.setdefault of a list") << "x = {}.setdefault([1])\n"
                                               << "unhashable type: 'list'";
    QTest::newRow("del of a list key") << "d = {1: 2}\ndel d[[1]]\n"
                                       << "unhashable type: 'list'";
    QTest::newRow("dict comprehension of list keys") << "d = {[k]: k for k in range(2)}\n"
                                                     << "unhashable type: 'list'";
    QTest::newRow("dict of two arguments") << "d = dict({}, {})\n"
                                           << "hostile.py:1:1: dict expected at most 1 argument, "
                                              "got 2";
    QTest::newRow("dict of an int") << "d = dict(1)\n"
                                    << "hostile.py:1:1: 'int' object is not iterable";
    QTest::newRow("dict of ints") << "d = dict([(1, 2), 3])\n"
                                  << "cannot convert dictionary update sequence element #1 to a "
                                     "sequence";
    QTest::newRow("dict of a triple") << "d = dict([(1, 2, 3)])\n"
                                      << "dictionary update sequence element #0 has length 3; 2 "
                                         "is required";
    // An f-string field's errors, at parse time and when it runs, point into the field where it
    // stands (they were at line 1 of the field's own text); an empty field is Python's error.
    QTest::newRow("f-string field")
        << "x = 1\n\nprint(f'a {x +} b')\n"
        << "hostile.py:3:15: syntax error: the expression is incomplete (in the "
           "f-string's field '{x +}')\n    print(f'a {x +} b')";
    QTest::newRow("f-string field's name error")
        << "x = 1\ny = 2\nprint(f'{x} and {x} {x + undefined_name}')\n"
        << "hostile.py:3:26: name 'undefined_name' is not defined\n"
           "    print(f'{x} and {x} {x + undefined_name}')";
    // Each character of an f-string knows where it stands (the lexer records it), so indented
    // lines, escaped braces and literals concatenated around it place the field right.
    QTest::newRow("f-string field on an indented line")
        << "for i in range(1):\n    print(f'value: {i +}')\n"
        << "hostile.py:2:24: syntax error: the expression is incomplete";
    QTest::newRow("f-string field after escaped braces") << "print(f'{{u}} {u}')\n"
                                                         << "hostile.py:1:16: name 'u' is not "
                                                            "defined";
    QTest::newRow("f-string field after a concatenated literal")
        << "x = 1\nprint(f'{x}' '{u' f'{u}')\n"
        << "hostile.py:2:22: name 'u' is not defined";
    QTest::newRow("f-string field on the next line of a concatenation")
        << "print('{u'\n      f'{u}')\n"
        << "hostile.py:2:10: name 'u' is not defined";
    QTest::newRow("f-string field on a triple-quoted string's second line")
        << "print(f\"\"\"{\nu}\"\"\")\n"
        << "hostile.py:2:1: name 'u' is not defined";
    QTest::newRow("f-string field's lexer error") << "x = 1\ny = 2\nprint(f'{x ? 1}')\n"
                                                  << "hostile.py:3:12: syntax error: unexpected "
                                                     "character '?' (in the f-string's field";
    QTest::newRow("f-string field's unterminated string")
        << "print(f\"{'a}\")\n"
        << "hostile.py:1:10: syntax error: unterminated string literal";
    QTest::newRow("f-string unmatched parenthesis") << "x = 1\nprint(f'{x)}')\n"
                                                    << "hostile.py:2:11: syntax error: f-string: "
                                                       "unmatched ')'";
    QTest::newRow("f-string mismatched parenthesis")
        << "print(f'{(1 +}')\n"
        << "hostile.py:1:14: syntax error: f-string: closing parenthesis '}' does not match "
           "opening parenthesis '('";
    QTest::newRow("f-string single closing brace")
        << "print(f'a}')\n"
        << "hostile.py:1:10: syntax error: f-string: single '}' is not allowed";
    QTest::newRow("f-string spec's field") << "print(f'{1:>{undefined_width}}')\n"
                                           << "hostile.py:1:14: name 'undefined_width' is not "
                                              "defined";
    QTest::newRow("f-string spec's empty field")
        << "print(f'{1:{}}')\n"
        << "hostile.py:1:12: syntax error: f-string: empty expression not allowed";
    QTest::newRow("f-string field after a longer one")  // the first field's text is not it
        << "undefined_name_2 = 1\nprint(f'{undefined_name_2}{undefined_name}')\n"
        << "hostile.py:2:28: name 'undefined_name' is not defined";
    QTest::newRow("empty f-string field")
        << "print(f'{ }')\n"
        << "hostile.py:1:9: syntax error: f-string: empty expression not allowed";
    // Unpacking with * and ** (in calls, displays and targets) fails as Python's does.
    // Parameters and the arguments bound to them, as Python's compiler and calls check them.
    QTest::newRow("default before a required parameter")
        << "def f(a=1, b):\n    pass\n"
        << "hostile.py:1:12: syntax error: non-default argument follows default argument";
    QTest::newRow("parameter twice") << "def f(a, a):\n    pass\n"
                                     << "duplicate argument 'a' in function definition";
    QTest::newRow("bare star last") << "def f(a, *):\n    pass\n"
                                    << "named arguments must follow bare *";
    QTest::newRow("parameter after **kwargs") << "def f(**k, a):\n    pass\n"
                                              << "arguments cannot follow var-keyword argument";
    QTest::newRow("missing arguments") << "def f(a, b, c):\n    pass\nf()\n"
                                       << "hostile.py:3:1: f() missing 3 required positional "
                                          "arguments: 'a', 'b', and 'c'";
    QTest::newRow("missing keyword-only") << "def f(*, k):\n    pass\nf()\n"
                                          << "f() missing 1 required keyword-only argument: 'k'";
    QTest::newRow("too many positional")
        << "def f(a, b=1, *, x):\n    pass\nf(1, 2, 3, x=1)\n"
        << "f() takes from 1 to 2 positional arguments but 3 positional arguments (and 1 "
           "keyword-only argument) were given";
    QTest::newRow("argument twice") << "def f(a):\n    pass\nf(1, a=2)\n"
                                    << "f() got multiple values for argument 'a'";
    QTest::newRow("positional-only by keyword") << "def f(a, /):\n    pass\nf(a=1)\n"
                                                << "f() got some positional-only arguments "
                                                   "passed as keyword arguments: 'a'";
    // printf-style % formatting: Python's TypeErrors and ValueErrors, word for word.
    QTest::newRow("% of a str as an int") << "x = '%d' % 'x'\n"
                                          << "hostile.py:1:1: %d format: a real number is "
                                             "required, not str";
    QTest::newRow("% hex of a float") << "x = '%x' % 1.5\n"
                                      << "%x format: an integer is required, not float";
    QTest::newRow("% too few") << "x = '%d %d' % (1,)\n"
                               << "not enough arguments for format string";
    QTest::newRow("% too many") << "x = '%d' % (1, 2)\n"
                                << "not all arguments converted during string formatting";
    QTest::newRow("% unknown conversion") << "x = '%q' % 1\n"
                                          << "unsupported format character 'q' (0x71) at index 1";
    QTest::newRow("format: a brace in a field name") << "x = '{0{}}'.format(1, 2)\n"
                                                     << "unexpected '{' in field name";
    QTest::newRow("format: a brace in an open field's name") << "x = '{0{'.format(1)\n"
                                                             << "unexpected '{' in field name";
    QTest::newRow("format: an unknown conversion") << "x = '{0!x}'.format(1)\n"
                                                   << "Unknown conversion specifier x";
    QTest::newRow("format: text after the conversion") << "x = '{0!rx}'.format(1)\n"
                                                       << "expected ':' after conversion specifier";
    QTest::newRow("format: the end after '!'")
        << "x = '{0!'.format(1)\n"
        << "end of string while looking for conversion specifier";
    QTest::newRow("format: an open index") << "x = '{0[1'.format(1)\n"
                                           << "expected '}' before end of string";
    // Python's builtins take their leading parameters by position only.
    QTest::newRow("len by keyword") << "n = len(obj=[1])\n"
                                    << "hostile.py:1:1: len() takes no keyword arguments";
    QTest::newRow("len by another keyword") << "n = len(x=[1])\n"
                                            << "len() takes no keyword arguments";
    // A wrong count in CPython 3.11's words: METH_O builtins, then Argument Clinic's.
    QTest::newRow("len of nothing") << "n = len()\n"
                                    << "hostile.py:1:1: len() takes exactly one argument (0 given)";
    QTest::newRow("abs of two") << "n = abs(1, 2)\n"
                                << "abs() takes exactly one argument (2 given)";
    QTest::newRow("repr by keyword") << "n = repr(obj=1)\n"
                                     << "repr() takes no keyword arguments";
    QTest::newRow("sorted of nothing") << "n = sorted()\n"
                                       << "sorted expected 1 argument, got 0";
    QTest::newRow("sorted's iterable by keyword") << "n = sorted(iterable=[1])\n"
                                                  << "sorted expected 1 argument, got 0";
    QTest::newRow("divmod of one") << "n = divmod(7)\n"
                                   << "divmod expected 2 arguments, got 1";
    QTest::newRow("range of nothing") << "n = range()\n"
                                      << "range expected at least 1 argument, got 0";
    QTest::newRow("range of four") << "n = range(1, 2, 3, 4)\n"
                                   << "range expected at most 3 arguments, got 4";
    QTest::newRow("float of two") << "n = float(1, 2)\n"
                                  << "float expected at most 1 argument, got 2";
    QTest::newRow("list by keyword") << "n = list(iterable=[1])\n"
                                     << "list() takes no keyword arguments";
    QTest::newRow("max of nothing") << "n = max(key=len)\n"
                                    << "max expected at least 1 argument, got 0";
    QTest::newRow("min of an empty list") << "n = min([])\n"
                                          << "min() arg is an empty sequence";
    QTest::newRow("sum's iterable by keyword")
        << "n = sum(iterable=[1])\n"
        << "sum() takes at least 1 positional argument (0 given)";
    QTest::newRow("sum's iterable twice") << "n = sum([1], iterable=[2])\n"
                                          << "'iterable' is an invalid keyword argument for sum()";
    QTest::newRow("sum's unknown keyword")
        << "n = sum([1], foo=2)\n"
        << "sum() got an unexpected keyword argument 'foo'; it takes start";
    QTest::newRow("% literal with a width, no argument")
        << "x = '%5%' % ()\n"
        << "not enough arguments for format string";
    QTest::newRow("% literal with a width") << "x = '%5%' % 1\n"
                                            << "unsupported format character '%' (0x25) at index 2";
    // CPython names a code point and counts characters: '?' unless printable ASCII.
    QTest::newRow("% with a non-ASCII type")
        << "x = 'é%é' % 1\n"
        << "unsupported format character '?' (0xe9) at index 2";
    QTest::newRow("format: a non-ASCII conversion") << "x = '{0!é}'.format(1)\n"
                                                    << "Unknown conversion specifier \\xe9";
    QTest::newRow("% with a NUL type") << "x = '%\\x00' % 1\n"
                                       << "unsupported format character '?' (0x0) at index 1";
    QTest::newRow("format: a space for a conversion") << "x = '{0! }'.format(1)\n"
                                                      << "Unknown conversion specifier \\x20";
    QTest::newRow("f-string: an unknown conversion")
        << "x = f'{1!\u00e9}'\n"
        << "f-string: invalid conversion character: expected 's', 'r', or 'a'";
    QTest::newRow("max of only an unknown keyword") << "n = max(foo=1)\n"
                                                    << "max expected at least 1 argument, got 0";
    QTest::newRow("center of nothing") << "x = 'a'.center()\n"
                                       << "center expected at least 1 argument, got 0";
    QTest::newRow("rjust's fill by keyword") << "x = 'a'.rjust(3, fillchar='x')\n"
                                             << "str.rjust() takes no keyword arguments";
    QTest::newRow("zfill of two") << "x = 'a'.zfill(3, 4)\n"
                                  << "str.zfill() takes exactly one argument (2 given)";
    QTest::newRow("center filled by a number")
        << "x = 'a'.center(3, 5)\n"
        << "The fill character must be a unicode character, not int";
    QTest::newRow("% at the end") << "x = 'a %' % ()\n"
                                  << "incomplete format";
    QTest::newRow("% key without a dict") << "x = '%(a)s' % 1\n"
                                          << "format requires a mapping";
    QTest::newRow("% key missing") << "x = '%(a)s' % {}\n"
                                   << "KeyError: 'a'";
    QTest::newRow("% width too large") << "x = '%99999d' % 1\n"
                                       << "the format's width is larger than 10000";
    QTest::newRow("too many to unpack") << "a, b = [1, 2, 3]\n"
                                        << "hostile.py:1:1: too many values to unpack (expected 2)";
    QTest::newRow("too few to unpack")
        << "a, *b, c = [1]\n"
        << "not enough values to unpack (expected at least 2, got 1)";
    QTest::newRow("unpacked an int") << "a, b = 1\n"
                                     << "cannot unpack non-iterable int object";
    QTest::newRow("lone starred value") << "x = *[1]\n"
                                        << "hostile.py:1:5: syntax error: can't use starred "
                                           "expression here";
    QTest::newRow("lone starred target") << "*a = [1]\n"
                                         << "starred assignment target must be in a list or tuple";
    QTest::newRow("two starred targets") << "a, *b, *c = [1, 2]\n"
                                         << "multiple starred expressions in assignment";
    QTest::newRow("deleted starred") << "del (a, *b)\n"
                                     << "hostile.py:1:9: syntax error: cannot delete starred";
    QTest::newRow("starred in a comprehension") << "x = [*a for a in b]\n"
                                                << "iterable unpacking cannot be used in "
                                                   "comprehension";
    QTest::newRow("call unpacks an int") << "print(*1)\n"
                                         << "print() argument after * must be an iterable, not "
                                            "int";
    QTest::newRow("call unpacks a list as keywords") << "def f(): pass\nf(**[1])\n"
                                                     << "hostile.py:2:1: __main__.f() argument "
                                                        "after ** must be a mapping, not list";
    // Python names a function by its qualified name: where it was made, and in unpacking errors
    // its module too.
    QTest::newRow("nested function's name")
        << "def g():\n    def f(a):\n        pass\n    return f\ng()()\n"
        << "hostile.py:5:1: g.<locals>.f() missing 1 required positional argument: 'a'";
    QTest::newRow("lambda in a comprehension's name")
        << "def g():\n    return [lambda: 0 for _ in [1]][0]\ng()(1)\n"
        << "g.<locals>.<listcomp>.<lambda>() takes 0 positional arguments but 1 was given";
    QTest::newRow("nested function's name when unpacking")
        << "def g():\n    def f(a):\n        pass\n    return f\ng()(*1)\n"
        << "__main__.g.<locals>.f() argument after * must be an iterable, not int";
    QTest::newRow("keyword twice through **") << "def f(a): pass\nf(a=1, **{'a': 2})\n"
                                              << "f() got multiple values for keyword argument "
                                                 "'a'";
    QTest::newRow("keyword repeated") << "print(a=1, a=2)\n"
                                      << "hostile.py:1:12: syntax error: keyword argument "
                                         "repeated: a";
    QTest::newRow("keywords not strings") << "print(**{1: 2})\n"
                                          << "keywords must be strings";
    QTest::newRow("positional after **") << "print(**{}, 1)\n"
                                         << "positional argument follows keyword argument "
                                            "unpacking";
    QTest::newRow("display unpacks an int") << "x = [*1]\n"
                                            << "Value after * must be an iterable, not int";
    QTest::newRow("positional-only by keyword beside another")
        << "def f(a, /):\n    pass\nf(a=1, z=2)\n"
        << "f() got some positional-only "
           "arguments passed as keyword "
           "arguments: 'a'";
    QTest::newRow("positional-only in parameter order") << "def f(a, b, /):\n    pass\n"
                                                           "f(b=1, a=2)\n"
                                                        << "passed as keyword arguments: 'a, b'";
    QTest::newRow("f-string spec nested twice") << "x = 1\nprint(f'{x:{x:{x}}}')\n"
                                                << "hostile.py:2:15: syntax error: f-string: "
                                                   "expressions nested too deeply";
    QTest::newRow("dict unpacked in a comprehension")
        << "x = {**d for d in y}\n"
        << "dict unpacking cannot be used in dict comprehension";
    QTest::newRow("generator after a keyword") << "print(k=1, x for x in y)\n"
                                               << "hostile.py:1:12: syntax error: Generator "
                                                  "expression must be parenthesized";
    QTest::newRow("dict unpacks an int") << "x = {**1}\n"
                                         << "'int' object is not a mapping";
  }
  void pythonsErrorsAtPythonsPlace() { failsWithMessageAndRunnerWorksOn(); }
};

QTEST_GUILESS_MAIN(TestScriptSyntax)
#include "tst_script_syntax.moc"
