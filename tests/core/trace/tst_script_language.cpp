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

  // ascii() of bytes that are not UTF-8 (strings are bytes; slicing makes them): each byte as \x,
  // where a decoder would have read a code point (an overlong form, a surrogate, past U+10FFFF).
  void asciiEscapesBytesThatAreNotUtf8() {
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines);
    runner->run(
        "e0 = '\\u0800'[0]\nc80 = '\\u0080'[1]\ned = '\\ud7ff'[0]\na0 = '\\u0800'[1]\n"
        "f4 = '\\U0010ffff'[0]\nc90 = '\\U00010000'[1]\n"
        "print(ascii(e0 + c80 + c80), ascii(ed + a0 + c80), ascii(f4 + c90 + c80 + c80))\n"
        "print(ascii(e0), ascii('\\u07ff\\ud7ff'), '%a' % c80)\n",
        "ok.py");
    QCOMPARE(lines, (std::vector<std::string>{
                        R"('\xe0\x80\x80' '\xed\xa0\x80' '\xf4\x90\x80\x80')",
                        R"('\xe0' '\u07ff\ud7ff' '\x80')",
                    }));
  }

  // A function prints with its qualified name, as Python's repr has it (without the address).
  void functionsPrintTheirQualifiedName() {
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines);
    runner->run("def g():\n    def f():\n        pass\n    return f\nprint(g(), g, lambda: 0)\n",
                "ok.py");
    QCOMPARE(
        lines,
        (std::vector<std::string>{"<function g.<locals>.f> <function g> <function <lambda>>"}));
  }

  // A tensor indexed by an empty tuple, written or unpacked (t[()], t[*[]]), is the whole tensor,
  // as in torch; LibTorch's index() refuses an empty index list.
  void emptyIndexIsTheWholeTensor() {
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines);
    runner->run(
        "import torch\nt = torch.arange(6).reshape(2, 3)\ne = []\n"
        "print(t[()].shape, t[*e].shape, torch.tensor(3)[()].item())\n"
        "t[*e] = 5\nt[()] += 1\nprint(t.sum().item())\n",
        "ok.py");
    QCOMPARE(lines, (std::vector<std::string>{"torch.Size([2, 3]) torch.Size([2, 3]) 3", "36"}));
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
