// Trace scripts do what Python does with the same text: format specs as CPython formats them,
// Python's errors for what Python refuses, its number literals, and values that hold themselves or
// nest deeply (compared, saved, copied and freed, or the script's error at its line where Python
// raises RecursionError). What runs free and what crosses between the driver and the ranks:
// tst_script_scopes.cpp.
#include <QtTest/QtTest>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/demo_engine.h"
#include "common/script_checks.h"
#include "common/test_support.h"
#include "common/tp_rows.h"
#include "core/trace/ast.h"
#include "core/trace/format_spec.h"
#include "core/trace/interpreter.h"
#include "core/trace/script_runner.h"

using namespace shardscope;
using namespace shardscope::test;

class TestScriptLanguage : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Every (value, spec) row of the golden file: CPython's text, or refused where CPython refuses.
  void formatSpecMatchesCPython() {
    std::ifstream in(test::sourceDir() / "tests/golden/format_spec/golden.json");
    QVERIFY(in.good());
    const auto golden = nlohmann::json::parse(in);
    int rows = 0;
    for (const auto& r : golden.at("rows")) {
      const std::string kind = r.at("kind"), spec = r.at("spec");
      std::string text;
      bool refused = false;
      try {
        const trace::FormatSpec s = trace::parseFormatSpec(spec);
        if (kind == "int") {
          text = trace::formatInteger(r.at("value").get<long long>(), s);
        } else if (kind == "float") {
          text =
              trace::formatFloat(std::strtod(r.at("value").get<std::string>().c_str(), nullptr), s);
        } else {
          text = trace::formatString(r.at("value").get<std::string>(), s);
        }
      } catch (const trace::FormatSpecError& e) {
        refused = true;
        text = e.what();
      }
      const std::string row = kind + " " + r.at("value").dump() + " '" + spec + "': " + text;
      if (r.at("text").is_null()) {
        QVERIFY2(refused, ("CPython refuses, we gave " + row).c_str());
      } else {
        QVERIFY2(!refused && text == r.at("text").get<std::string>(),
                 (row + " (CPython: '" + r.at("text").get<std::string>() + "')").c_str());
      }
      ++rows;
    }
    QVERIFY(rows > 1000);
  }

  // Slice assignment, del, dict views and int()/float() of text refuse what Python refuses, with
  // Python's message (after the file, line and column); tests/trace/conformance checks what they
  // print when they work.
  void languageErrorsArePythons_data() {
    QTest::addColumn<QString>("script");
    QTest::addColumn<QString>("message");
    QTest::newRow("extended slice of another length")
        << "a = [1, 2, 3]\na[::2] = [7, 8, 9]\n"
        << "hostile.py:2:1: attempt to assign sequence of size 3 to extended slice of size 2";
    // torch takes a tensor or a number beside a tensor (the list was made a tensor).
    QTest::newRow("tensor plus a list")
        << "x = torch.ones(2)\ny = x + [1, 2]\n"
        << "hostile.py:2:1: unsupported operand type(s) for +: 'Tensor' and 'list'";
    QTest::newRow("tensor extended in place by a list")
        << "x = torch.ones(2)\nx += [1, 2]\n"
        << "hostile.py:2:1: unsupported operand type(s) for +=: 'Tensor' and 'list'";
    QTest::newRow("tensor ordered against a list")
        << "x = torch.ones(2)\ny = x < (1, 2)\n"
        << "hostile.py:2:1: '<' not supported between instances of 'Tensor' and 'tuple'";
    QTest::newRow("a list searched for a tensor of many elements")  // Python's bool(t1 == t2)
        << "l = [torch.tensor([1, 2]), 3]\nfound = 3 in l\n"
        << "hostile.py:2:1: the truth value of a tensor with 2 elements is ambiguous";
    QTest::newRow("a device's unknown attribute")
        << "d = torch.ones(2).device.kind\n"
        << "hostile.py:1:1: 'torch.device' object has no attribute 'kind' (it has: type, index)";
    QTest::newRow("a device's index given twice")
        << "d = torch.device('cuda:0', 1)\n"
        << "hostile.py:1:1: torch.device(): 'cuda:0' names its index already: give it once, "
           "'cuda:0' or ('cuda', 0)";
    QTest::newRow("where's condition a bool")
        << "i = torch.where(True)\n"
        << "hostile.py:1:1: where(): argument 'condition' (position 1) must be Tensor, not bool";
    QTest::newRow("a device index past c10's")
        << "d = torch.device('cuda', 200)\n"
        << "hostile.py:1:1: torch.device(): 'cuda:200' is not a device tensors live on here: "
           "'cpu', 'cuda' or 'cuda:N' (N in 0..127, c10's device index)";
    QTest::newRow("a device tensors do not live on")
        << "d = torch.device('tpu')\n"
        << "hostile.py:1:1: torch.device(): 'tpu' is not a device tensors live on here: 'cpu', "
           "'cuda' or 'cuda:N' (N in 0..127, c10's device index)";
    QTest::newRow("a device's name added to a str")  // torch.device is not a str
        << "s = 'on ' + torch.ones(2).device\n"
        << "hostile.py:1:1: can only concatenate str (not \"torch.device\") to str";
    QTest::newRow("a str and an int added") << "s = 'n' + 1\n"
                                            << "hostile.py:1:1: can only concatenate str (not "
                                               "\"int\") to str";
    QTest::newRow("a Size and a list added") << "s = torch.ones(2).shape + [1]\n"
                                             << "hostile.py:1:1: can only concatenate tuple (not "
                                                "\"list\") to tuple";
    QTest::newRow("a str and a tensor added")  // Tensor.__radd__ gives way to str's error
        << "s = 'n' + torch.ones(2)\n"
        << "hostile.py:1:1: can only concatenate str (not \"Tensor\") to str";
    QTest::newRow("a list repeated by a float")
        << "l = [1] * 1.5\n"
        << "hostile.py:1:1: can't multiply sequence by non-int of type 'float'";
    QTest::newRow("a list repeated by a tensor of two")
        << "l = [1] * torch.tensor([1, 2])\n"
        << "hostile.py:1:1: only integer tensors of a single element can be converted to an index";
    QTest::newRow("an int and a str added")
        << "s = 1 + 'n'\n"
        << "hostile.py:1:1: unsupported operand type(s) for +: 'int' and 'str'";
    QTest::newRow("a tensor method's other a list")  // torch's methods take a tensor or a number
        << "y = torch.ones(2).add([1, 2])\n"
        << "hostile.py:1:1: add(): argument 'other' (position 1) must be Tensor, not list";
    QTest::newRow("an in-place method's other a tuple")
        << "x = torch.ones(2)\nx.mul_((1, 2))\n"
        << "hostile.py:2:1: mul_(): argument 'other' (position 1) must be Tensor, not tuple";
    QTest::newRow("torch.flip's dims an int")  // x.flip(0) takes it; torch.flip wants a tuple
        << "y = torch.flip(torch.arange(6), 0)\n"
        << "hostile.py:1:1: flip(): argument 'dims' (position 2) must be tuple of ints, not int";
    QTest::newRow("torch.reshape's shape dimension by dimension")
        << "y = torch.reshape(torch.arange(6), 2, 3)\n"
        << "hostile.py:1:1: torch.reshape() takes at most 2 positional arguments (3 given)";
    QTest::newRow("a dtype that is not one")  // the method names itself, not the budget's ask
        << "y = torch.ones(3).softmax(0, dtype='f')\n"
        << "hostile.py:1:1: Tensor.softmax(): dtype must be a torch dtype such as torch.float32, "
           "got 'f'";
    QTest::newRow("a str in a tensor") << "x = 'a' in torch.ones(2)\n"
                                       << "hostile.py:1:1: Tensor.__contains__ only supports "
                                          "Tensor or scalar, but you passed in a "
                                          "str";
    QTest::newRow("torch.Size of a str")
        << "s = torch.ones(2).shape + ('a',)\n"
        << "hostile.py:1:1: torch.Size() takes an iterable of 'int' (item 1 is 'str')";
    QTest::newRow("slice assigned a non-iterable") << "a = [1, 2]\na[0:1] = 5\n"
                                                   << "hostile.py:2:1: can only assign an iterable";
    QTest::newRow("extended slice assigned a non-iterable")
        << "a = [1, 2]\na[::2] = 5\n"
        << "hostile.py:2:1: must assign iterable to extended slice";
    QTest::newRow("slice step zero") << "a = [1, 2]\ndel a[::0]\n"
                                     << "hostile.py:2:1: slice step cannot be zero";
    QTest::newRow("del past the end") << "a = [1, 2, 3]\ndel a[3]\n"
                                      << "hostile.py:2:1: index 3 out of range for length 3";
    QTest::newRow("del missing key") << "d = {'a': 1}\ndel d['b']\n"
                                     << "hostile.py:2:1: key 'b' not found";
    QTest::newRow("del of a tuple item") << "t = (1, 2)\ndel t[0]\n"
                                         << "'tuple' object doesn't support item deletion";
    QTest::newRow("del of a name twice") << "x = 1\ndel x\ndel x\n"
                                         << "hostile.py:3:5: name 'x' is not defined";
    QTest::newRow("use after del") << "x = 1\ndel x\nprint(x)\n"
                                   << "hostile.py:3:7: name 'x' is not defined";
    QTest::newRow("del of an outer name in a function")
        << "x = 1\ndef f():\n    del x\nf()\n"
        << "hostile.py:3:9: cannot access local variable 'x' where it is not associated with a "
           "value";
    QTest::newRow("del of a call") << "del len([])\n"
                                   << "hostile.py:1:5: syntax error: cannot delete function call";
    QTest::newRow("del of a generator") << "del (a, (x for x in y))\n"
                                        << "hostile.py:1:9: syntax error: cannot delete generator "
                                           "expression";
    // What Python's compiler refuses as a target, refused before the script runs (`[1] += [2]`
    // ran silently, `f() = 1` failed only when reached), in its words and at its column.
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
    QTest::newRow("keys view indexed") << "d = {'a': 1}\nk = d.keys()[0]\n"
                                       << "hostile.py:2:1: 'dict_keys' object is not subscriptable";
    QTest::newRow("values view indexed") << "v = {'a': 1}.values()[0]\n"
                                         << "'dict_values' object is not subscriptable";
    QTest::newRow("items view assigned") << "d = {'a': 1}\nd.items()[0] = 1\n"
                                         << "'dict_items' object does not support item assignment";
    QTest::newRow("set operation on views") << "d = {'a': 1}\nx = d.keys() & d.keys()\n"
                                            << "set operations on dict views (&) are not supported";
    QTest::newRow("dict grown while iterated")
        << "d = {'a': 1}\nfor k in d.keys():\n    d[k + '!'] = 2\n"
        << "hostile.py:2:1: dictionary changed size during iteration";
    QTest::newRow("dict shrunk while iterated")
        << "d = {'a': 1, 'b': 2}\nfor k in d:\n    del d[k]\n"
        << "dictionary changed size during iteration";
    QTest::newRow("dict key swapped while iterated")  // a removed and an added key: none skipped
        << "d = {'a': 1, 'b': 2, 'c': 3}\nfor k in d:\n    if k == 'a':\n        del d['a']\n"
           "        d['z'] = 0\n"
        << "hostile.py:2:1: dictionary keys changed during iteration";
    QTest::newRow("dict key added and removed in one pass is fine")  // as in CPython
        << "d = {'a': 1, 'b': 2}\nn = 0\nfor k in d:\n    d['tmp'] = 0\n    del d['tmp']\n"
           "    n += 1\nassert n == 2 and d == {'a': 1, 'b': 2}\nx = 1 / 0\n"
        << "hostile.py:8:1: division by zero";
    QTest::newRow("dict key removed and added again while iterated")
        << "d = {'a': 1, 'b': 2}\nfor k in d:\n    v = d[k]\n    del d[k]\n    d[k] = v\n"
        << "hostile.py:2:1: dictionary keys changed during iteration";
    QTest::newRow("dict values changed while iterated are fine")
        << "d = {'a': 1, 'b': 2}\nfor k in d:\n    d[k] = d[k] * 10\nassert d == {'a': 10, 'b': "
           "20}\nx = 1 / 0\n"
        << "hostile.py:5:1: division by zero";
    for (const char* text : {"_1", "1_", "1__0", "-_1", "1_ 0"}) {
      QTest::addRow("int of '%s'", text)
          << QString("x = int('%1')\n").arg(text)
          << QString("invalid literal for int() with base 10: '%1'").arg(text);
    }
    for (const char* text : {"_1.0", "1_.5", "1._5", "1e_5", "1.5_", "1__0.5"}) {
      QTest::addRow("float of '%s'", text)
          << QString("x = float('%1')\n").arg(text)
          << QString("could not convert string to float: '%1'").arg(text);
    }
    // break, continue and return where Python refuses them (before, the interpreter's signal
    // escaped the run: a top-level `break` or `return` ended the process), and in a with block,
    // which runs on the model's ranks apart from the driver's loops and functions.
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
                                                     << "hostile.py:2:1: f() argument after ** "
                                                        "must be a mapping, not list";
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
    // A comprehension runs as Python's: its own scope (its loop names do not leak), errors at the
    // clause or element that raised them, and Python's syntax errors for its forms.
    QTest::newRow("comprehension's loop name") << "y = [i for i in range(3)]\nprint(i)\n"
                                               << "hostile.py:2:7: name 'i' is not defined";
    QTest::newRow("comprehension's element raises")
        << "y = [1 // x for x in [1, 0]]\n"
        << "hostile.py:1:8: integer division or modulo by zero";
    QTest::newRow("generator beside another argument")
        << "s = sum(x for x in [1], 1)\n"
        << "hostile.py:1:9: syntax error: Generator expression must be parenthesized";
    QTest::newRow("generator after another argument")
        << "s = sum(1, x * 2 for x in [1])\n"
        << "hostile.py:1:12: syntax error: Generator expression must be parenthesized";
    QTest::newRow("comprehension without in") << "y = [x for x]\n"
                                              << "syntax error: expected 'in' in the comprehension";
    QTest::newRow("comprehension over an int") << "y = {x: 1 for x in 5}\n"
                                               << "hostile.py:1:11: cannot iterate over int";
    // Each clause nests its loop one level deeper: 300 of them are the nesting error, not a parse
    // tree whose freeing ran the stack out.
    QTest::newRow("comprehension of 300 clauses")
        << "y = [1 for x in [1]" + QString(" if 1").repeated(300) + "]\n"
        << "levels deep here; split this into several statements";
    // The str, list and dict methods' errors are Python's.
    QTest::newRow("split on empty") << "x = 'a'.split('')\n"
                                    << "hostile.py:1:1: empty separator";
    QTest::newRow("index not found") << "x = 'abc'.index('z')\n"
                                     << "hostile.py:1:1: substring not found";
    QTest::newRow("str method argument") << "x = 'abc'.find(1)\n"
                                         << "str.find() argument 'sub' must be str, not int";
    QTest::newRow("str method keyword") << "x = 'abc'.split(sepp=',')\n"
                                        << "str.split() got an unexpected keyword argument 'sepp'";
    QTest::newRow("format index") << "x = '{} {}'.format(1)\n"
                                  << "Replacement index 1 out of range for positional args tuple";
    QTest::newRow("format numbering") << "x = '{0} {}'.format(1, 2)\n"
                                      << "cannot switch from manual field specification";
    QTest::newRow("format key") << "x = '{a}'.format(b=1)\n"
                                << "hostile.py:1:1: KeyError: 'a'";
    QTest::newRow("format spec's field past the arguments") << "x = '{:{}}'.format(1)\n"
                                                            << "Replacement index 1 out of range";
    QTest::newRow("format spec nested twice") << "x = '{:{:{}}}'.format(1, 2, 3)\n"
                                              << "hostile.py:1:1: Max string recursion exceeded";
    QTest::newRow("format spec unclosed") << "x = '{:{}'.format(1, 2)\n"
                                          << "unmatched '{' in format spec";
    QTest::newRow("format field unclosed") << "x = '{0'.format(1)\n"
                                           << "expected '}' before end of string";
    QTest::newRow("list remove") << "l = [1]\nl.remove(2)\n"
                                 << "hostile.py:2:1: list.remove(x): x not in list";
    QTest::newRow("dict pop") << "d = {}\nd.pop('x')\n"
                              << "hostile.py:2:1: KeyError: 'x'";
    QTest::newRow("dict popitem") << "d = {}\nd.popitem()\n"
                                  << "KeyError: 'popitem(): dictionary is empty'";
    QTest::newRow("dict update pairs") << "d = {}\nd.update([(1, 2, 3)])\n"
                                       << "dictionary update sequence element #0 has length 3";
    QTest::newRow("dict pop in a loop")
        << "d = {'a': 1, 'b': 2}\nfor k in d:\n    d.pop('b')\n"
        << "hostile.py:2:1: dictionary changed size during iteration";
    QTest::newRow("break in a loop's else") << "for i in range(2):\n    pass\nelse:\n    break\n"
                                            << "hostile.py:4:5: syntax error: 'break' outside loop";
    QTest::newRow("join of ints")
        << "s = ', '.join([1, 2])\n"
        << "hostile.py:1:1: sequence item 0: expected str instance, int found";
    QTest::newRow("break outside loop") << "x = 1\nbreak\n"
                                        << "hostile.py:2:1: syntax error: 'break' outside loop";
    QTest::newRow("continue outside loop")
        << "if True:\n    continue\n"
        << "hostile.py:2:5: syntax error: 'continue' not properly in loop";
    QTest::newRow("return outside function")
        << "return 3\n"
        << "hostile.py:1:1: syntax error: 'return' outside function";
    QTest::newRow("continue in a function in a loop")
        << "for i in range(2):\n    def f():\n        continue\n    f()\n"
        << "hostile.py:3:9: syntax error: 'continue' not properly in loop";
    QTest::newRow("break in a with block in a loop")
        << "model = VLLM('demo')\nfor i in range(2):\n    with model.trace('hi'):\n        break\n"
        << "hostile.py:4:9: syntax error: 'break' inside a with block: the block runs on the "
           "model's ranks, apart from the driver's loops; set a flag and test it after the with "
           "statement";
    QTest::newRow("return in a with block in a function")
        << "model = VLLM('demo')\ndef f():\n    with model.trace('hi'):\n        return 1\n"
        << "syntax error: 'return' inside a with block: the block runs on the model's ranks, "
           "apart from the driver's function; save the value and return it after the with "
           "statement";
    // Number literals in the source: Python's SyntaxError, at the character that breaks one.
    const std::pair<const char*, const char*> literals[] = {
        {"1__0", "1:6: invalid decimal literal"},
        {"1_", "1:6: invalid decimal literal"},
        {"1_.5", "1:6: invalid decimal literal"},
        {"1._5", "1:7: invalid decimal literal"},
        {"1.5_", "1:8: invalid decimal literal"},
        {"1e_5", "1:6: invalid decimal literal"},
        {"1e5_", "1:8: invalid decimal literal"},
        {"1e", "1:6: invalid decimal literal"},
        {"1abc", "1:6: invalid decimal literal"},
        {"0x_", "1:7: invalid hexadecimal literal"},
        {"0x", "1:7: invalid hexadecimal literal"},
        {"0x1__2", "1:8: invalid hexadecimal literal"},
        {"0o_", "1:7: invalid octal literal"},
        {"0b2", "1:7: invalid digit '2' in binary literal"},
        {"0b1e5", "1:8: invalid binary literal"},
        {"0o8", "1:7: invalid digit '8' in octal literal"},
        {"01", "1:5: leading zeros in decimal integer literals are not permitted"},
        {"0_1", "1:5: leading zeros in decimal integer literals are not permitted"},
    };
    for (const auto& [text, message] : literals) {
      QTest::addRow("literal %s", text)
          << QString("x = %1\n").arg(text) << QString("hostile.py:%1").arg(message);
    }
  }

  void languageErrorsArePythons() { failsWithMessageAndRunnerWorksOn(); }

  // Statements share their program's lines (each held a copy of its line: one line of 20000
  // `a = 1;` took 2.9 GB, a comprehension of 20000 clauses 2.1 GB), and still name their own.
  void statementsShareTheirProgramsLines() {
    const auto program =
        trace::parseProgram("a = 1; b = [x for x in [a] if x]\n  \nif a:\n    c = 2\n", "l.py");
    QCOMPARE(program->body.size(), size_t(3));
    const trace::Stmt& comprehension = *program->body[1];
    QVERIFY(comprehension.value && comprehension.value->kind == trace::ExprKind::Comprehension);
    for (const auto& s : {program->body[0], program->body[1], program->body[2],
                          program->body[2]->body[0], comprehension.value->body[1]}) {
      QVERIFY(s->lines == program->body[0]->lines);
    }
    QCOMPARE(program->body[1]->source(), std::string("a = 1; b = [x for x in [a] if x]"));
    QCOMPARE(program->body[2]->body[0]->source(), std::string("c = 2"));
  }

  // Number literals Python accepts, underscores and keywords after them included.
  void numberLiteralsArePythons() {
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines);
    runner->run(
        "print(1_000_000, 0_0, 00, 0x_ff, 0b1_0, 0o1_7, 1_0.2_5, 1.e5, .5, 1_0e1_0, 09.5, 1E-5)\n"
        "print(1if 1 else 2, 0x1or 2, 1 if 0else 3, 2and 3, 1in[1], 0b1in[1])\n",
        "ok.py");
    QCOMPARE(lines, (std::vector<std::string>{
                        "1000000 0 0 255 2 15 10.25 100000.0 0.5 100000000000.0 9.5 1e-05",
                        "1 1 3 3 True True",
                    }));
  }

  // Values that contain themselves or nest 100000 levels deep, and calls nested in expressions
  // nested in calls: each ran the stack out and killed the process (in ==, <, repr, torch.tensor,
  // save(), the copies into and out of a block). Each is now the script's error at its line, as
  // Python's RecursionError is. Run in this process, so that a crash fails the test run.
  void deepAndSelfContainingValuesFailAtTheirLine_data() {
    QTest::addColumn<QString>("script");
    QTest::addColumn<QString>("message");
    const QString loops = "a = []\na.append(a)\nb = []\nb.append(b)\n";
    const QString deep = "x = []\nfor _ in range(100000):\n    x = [x]\n";
    const QString trace = "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n";
    QTest::newRow("== of two lists that hold themselves")
        << loops + "print(a == b)\n"
        << "hostile.py:5:1: maximum recursion depth exceeded in comparison";
    QTest::newRow("< of two lists that hold themselves")
        << loops + "print(a < b)\n"
        << "hostile.py:5:1: maximum recursion depth exceeded in comparison";
    QTest::newRow("in with lists that hold themselves")
        << loops + "print(b in a)\n"
        << "hostile.py:5:1: maximum recursion depth exceeded in comparison";
    QTest::newRow("== of two dicts that hold themselves")
        << "a = {}\na['a'] = a\nb = {}\nb['a'] = b\nprint(a == b)\n"
        << "hostile.py:5:1: maximum recursion depth exceeded in comparison";
    QTest::newRow("== of two views that hold themselves")
        << "a = {}\na['a'] = a.items()\nb = {}\nb['a'] = b.items()\nprint(a.items() == "
           "b.items())\n"
        << "hostile.py:5:1: maximum recursion depth exceeded in comparison";
    QTest::newRow("torch.tensor of a list that holds itself")
        << "a = [1]\na.append(a)\nt = torch.tensor(a)\n"
        << "hostile.py:3:1: maximum recursion depth exceeded while converting a list to a tensor";
    QTest::newRow("repr of a list nested 100000 deep")
        << deep + "print(x)\n"
        << "hostile.py:4:1: maximum recursion depth exceeded while getting the repr of an object";
    QTest::newRow("== of lists nested 30000 deep")
        << "x = []\ny = []\nfor _ in range(30000):\n    x = [x]\n    y = [y]\nprint(x == y)\n"
        << "hostile.py:6:1: maximum recursion depth exceeded in comparison";
    const QString nested = QString("[").repeated(190) + "f(k - 1)" + QString("]").repeated(190);
    QTest::newRow("calls nested in expressions nested in calls")
        << "def f(k):\n    if k == 0:\n        return 0\n    return " + nested + "\nf(195)\n"
        << "hostile.py:4:5: maximum recursion depth exceeded";
    QTest::newRow("the same in a trace block")
        << "def f(k):\n    if k == 0:\n        return 0\n    return " + nested + "\n" + trace +
               "    f(195)\n"
        << "hostile.py:4:5: maximum recursion depth exceeded";
    QTest::newRow("saved list nested 100000 deep")
        << trace + "    x = []\n    for _ in range(100000):\n        x = [x]\n    x.save()\n"
        << "hostile.py:2:1: the saved value 'x': maximum recursion depth exceeded while copying a "
           "saved value out of the trace block";
    QTest::newRow("saved port value nested 100000 deep")
        << trace +
               "    x = [model.model.layers[0].mlp.output]\n    for _ in range(100000):\n"
               "        x = [x]\n    x.save()\n"
        << "hostile.py:6:5: maximum recursion depth exceeded while copying a saved value";
    QTest::newRow("driver value nested 100000 deep read in a block")
        << deep + trace + "    y = len(x)\n"
        << "hostile.py:5:1: 'x': maximum recursion depth exceeded while copying a value into the "
           "trace block";
  }

  void deepAndSelfContainingValuesFailAtTheirLine() { failsWithMessageAndRunnerWorksOn(); }

  // What Python does with such values works: a value that holds itself equals itself (its items
  // are compared by identity first), is saved and copied out of a block holding itself, and a
  // list nested 100000 deep is built, measured against the memory budget and freed, on the
  // driver's stack and on a block's own.
  void deepAndSelfContainingValuesWorkAsInPython() {
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines, 2);
    runner->run(
        "a = []\na.append(a)\nd = {}\nd['d'] = d\nnan = float('nan')\n"
        "print(a == a, a in a, a < a, d == d, [nan] == [nan], nan == nan, repr(a), repr(d))\n"
        "x = []\nfor _ in range(100000):\n    x = [x]\nx = 0\n"
        "model = VLLM(\"demo\")\n"
        "with model.trace(\"Hi\"):\n"
        "    loop = [model.model.layers[0].mlp.output]\n"
        "    loop.append(loop)\n"
        "    loop.save()\n"
        "    plain = [1]\n"
        "    plain.append(plain)\n"
        "    plain.save()\n"
        "    y = []\n"
        "    for _ in range(100000):\n"
        "        y = [y]\n"
        "    y = 0\n"
        "print(loop[1] is loop, loop[0].shape[0] > 0, plain[1] is plain, plain)\n",
        "loops.py");
    QCOMPARE(lines, (std::vector<std::string>{
                        "True True False True True False [[...]] {'d': {...}}",
                        "True True True [1, [...]]",
                    }));
  }

  void pythonResultsOfFormerlyUnsafeOperations() {
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines);
    runner->run(
        "print(1 ** (10 ** 18), (-1) ** (10 ** 18 + 1), 2 ** 62, 3 ** 39, -8 >> 70, 5 << 2)\n"
        "print([] * (10 ** 18), '' * (10 ** 18), [1, 2] * 2, 'ab' * 3, [0] * -2)\n"
        "x = [1, 2]\nx += x\nx.extend(x)\nprint(x, x.index(2), x.index(2, 2), x.count(1))\n"
        "print((3, 4, 3).index(3, 1), (3, 4, 3).count(3))\n"
        "print(f'{3.14159:>10.2f}|{42:_b}|{\"hi\":*^6}|{-0.0:z.1f}|{1e21}|{255:#x}|{0.5:.0%}')\n"
        "print(torch.gather(torch.tensor([[1, 2], [3, 4]]), 1, torch.tensor([[1], [0]])))\n"
        "print(torch.tensor([[1, 2], [3, 4]]).gather(0, torch.tensor([[1, 0]])))\n"
        "print(f'{torch.tensor(2.5):.2f}')\n",
        "ok.py");
    QCOMPARE(lines, (std::vector<std::string>{
                        "1 -1 4611686018427387904 4052555153018976267 -1 20",
                        "[]  [1, 2, 1, 2] ababab []",  // as CPython prints them
                        "[1, 2, 1, 2, 1, 2, 1, 2] 1 3 4",
                        "2 2",
                        "      3.14|10_1010|**hi**|0.0|1e+21|0xff|50%",
                        "tensor([[2],\n        [3]])",
                        "tensor([[3, 2]])",
                        "2.50",
                    }));
  }

  // `x[i] op= v` as Python runs it: the object and index once (`x[f(0)] += 1` called f twice), and
  // a tensor indexed with a list or a mask written back (it was a copy, and the write was lost:
  // `t[[0, 2]] += 1` left t as it was), in a port value too, where it must equal the same write
  // through a view of the same elements; a list slice too (`l[0:2] += [9]`). `**=`, `//=` and
  // `%=` on a tensor are in place, as torch's (a second name saw the old tensor); so are `<<=`,
  // `>>=`, `&=`, `|=` and `^=`, which the parser refused before (on ints too).
  void augmentedAssignmentToASubscript_data() { addTpRows(); }
  void augmentedAssignmentToASubscript() {
    QFETCH(int, tp);
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines, tp);
    const std::string e =
        errorOf(*runner,
                "model = VLLM('demo')\nlog = []\n"
                "def f(v):\n    log.append(v)\n    return v\n"
                "x = [5, 7]\nx[f(0)] += 1\nd = {'a': [1]}\nf(d)['a'] += [2]\n"
                "t = torch.zeros(4)\nt[[0, 2]] += 1\nu = torch.zeros(4)\nu[u == 0] *= 0\n"
                "u[torch.tensor([1, 3])] -= 2\nw = torch.zeros(4)\nw[1:3] += 3\n"
                "print(log, x, d, t.tolist(), u.tolist(), w.tolist())\n"
                "l = [1, 2, 3]\nl[0:2] += [9]\na = torch.tensor([2])\nb = a\na **= 2\n"
                "c = torch.tensor([11])\nk = c\nc //= 2\nc %= 3\nprint(l, b.tolist(), k.tolist())\n"
                "s = torch.tensor([1, 2])\nr = s\ns <<= 2\ns >>= 1\ns &= 6\ns |= 1\ns ^= 8\n"
                "n = 5\nn &= 3\nn |= 8\nn ^= 1\nn <<= 3\nn >>= 1\nprint(r.tolist(), n)\n"
                "with model.trace('hi'):\n    model.model.layers[0].mlp.output[:, [0, 2]] += 1.0\n"
                "    a = model.logits.save()\n"
                "with model.trace('hi'):\n    model.model.layers[0].mlp.output[:, 0:3:2] += 1.0\n"
                "    b = model.logits.save()\n"
                "with model.trace('hi'):\n    c = model.logits.save()\n"
                "print(torch.equal(a, b), torch.equal(a, c))\n");
    QCOMPARE(e, std::string("no error"));
    QCOMPARE(lines,
             (std::vector<std::string>{"[0, {'a': [1, 2]}] [6, 7] {'a': [1, 2]} [1.0, 0.0, "
                                       "1.0, 0.0] [0.0, -2.0, 0.0, -2.0] [0.0, 3.0, 3.0, "
                                       "0.0]",
                                       "[1, 2, 9, 3] [4] [2]", "[11, 13] 32", "True False"}));
  }

  // Every expression of tests/golden/tensor_repr/cases.txt prints as PyTorch's print() showed it
  // (golden.json, made by make_golden.py with torch 1.13): formats, widths, wrapping, summaries and
  // suffixes, and the values of 150-odd operations (indexing, reductions, type promotion, integer
  // division and modulo, dtype equality, the named tuples of max, topk and sort).
  void tensorsPrintAsTorchPrintsThem() {
    std::ifstream file(test::sourceDir() / "tests/golden/tensor_repr/golden.json");
    QVERIFY2(file.good(), "tests/golden/tensor_repr/golden.json is missing: see make_golden.py");
    const nlohmann::json golden = nlohmann::json::parse(file);
    QVERIFY(golden.at("cases").size() >= 200);
    for (const auto& c : golden.at("cases")) {
      const std::string expression = c.at("expression");
      std::vector<std::string> lines;
      auto runner = makeRunner(&lines);
      const std::string e = errorOf(*runner, "print(" + expression + ")\n");
      QVERIFY2(e == "no error", (expression + ": " + e).c_str());
      QVERIFY2(lines.size() == 1, expression.c_str());
      const std::string want = c.at("printed");
      QVERIFY2(lines[0] == want,
               (expression + "\nprinted:\n" + lines[0] + "\ntorch:\n" + want).c_str());
    }
  }

  // Operands run left to right, as in Python: a binary operator's (`f() + [len(log)]` read the
  // length first), a subscript's object before its index, a dict literal's key before its value.
  // `obj[i] = v` is the exception TRACE.md makes: the target first, so that a port waited on is
  // there before the value is computed (Python computes v first).
  void operandsAreEvaluatedLeftToRight() {
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines);
    runner->run(
        "log = []\nls = [0, 0]\n"
        "def f(x):\n    log.append(x)\n    return x\n"
        "def g(x):\n    log.append(x)\n    return ls\n"
        "a = f(1) + f(2)\nd = {f(3): f(4)}\ng('L')[f(1)] = f(5)\nb = g('M')[f(0)]\n"
        "c = f(6) < f(7) < f(8)\ne = [f(9)] + [len(log)]\n"
        "print(log, a, d, ls, b, c, e)\n",
        "order.py");
    QCOMPARE(lines, std::vector<std::string>{"[1, 2, 3, 4, 'L', 1, 5, 'M', 0, 6, 7, 8, 9] 3 {3: 4} "
                                             "[0, 5] 0 True [9, 13]"});
  }
};

QTEST_GUILESS_MAIN(TestScriptLanguage)
#include "tst_script_language.moc"
