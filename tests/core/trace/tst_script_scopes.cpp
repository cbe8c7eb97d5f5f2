// What a trace script's runs hold and free, and what crosses between the driver and the ranks:
// reference cycles freed when a run's scopes are released (and only what nothing else holds);
// saved dicts, lists and results copied to the driver and to each rank as they alias; driver
// functions and builtins called in a block using the rank's copies; and a last run's values kept
// until every rank has left its job.
#include <QtTest/QtTest>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/demo_engine.h"
#include "common/script_checks.h"
#include "common/test_support.h"
#include "common/tp_rows.h"
#include "core/trace/ast.h"
#include "core/trace/interpreter.h"
#include "core/trace/scope_release.h"
#include "core/trace/script_runner.h"

using namespace shardscope;
using namespace shardscope::test;

class TestScriptScopes : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Reference cycles (a function in the scope it closes over, a list holding itself, an inner
  // function its call's scope holds, kept or long dropped, two dicts holding each other, a list
  // holding its own bound method, reached only through that method) are freed when a run's scopes
  // are released, tensors in them too; what the builtins hold (the torch namespace a global
  // names) is left whole, so the next run works.
  void releasedScopesFreeTheirCycles() {
    NoModelHost host;
    auto globals = std::make_shared<trace::Environment>(trace::builtinScope());
    auto in = std::make_unique<trace::Interpreter>(
        trace::parseProgram("def f():\n    return t\n"
                            "t = torch.ones(4)\n"
                            "a = [t]\na.append(a)\n"
                            "def outer():\n    def inner():\n"
                            "        return inner\n    return inner\n"
                            "g = outer()\n"
                            "d = {'t': t}\ne = {'d': d}\nd['e'] = e\n"
                            "th = torch\n"
                            "def helper(x):\n    def keep():\n        return x\n    return 1\n"
                            "def tidy():\n    def k():\n        return 0\n    k = 0\n"
                            "for i in range(200):\n    helper(t)\n    tidy()\n"
                            "def maker():\n    m = [t].append\n    m(m)\n"
                            "    def keep():\n        return 0\n    return keep\n"
                            "km = maker()\n",
                            "cycles.py"),
        host, globals, 100000);
    in->run(in->program().body);
    // The call scopes still alive: outer's (g holds inner), each of helper's 200 (each holds its
    // keep, which closes over it, and x) and maker's (km); tidy's went with their calls.
    std::vector<std::shared_ptr<trace::Environment>> scopes = in->functionScopes();
    QCOMPARE(scopes.size(), size_t(202));
    in.reset();
    const long tensorHolders = (*globals->find("t")).use_count();
    QVERIFY2(tensorHolders > 200, std::to_string(tensorHolders).c_str());  // helper's calls' x
    scopes.insert(scopes.begin(), globals);
    std::vector<std::weak_ptr<trace::Object>> held;
    for (const char* name : {"f", "t", "a", "g", "d", "e", "km"})
      held.push_back(*globals->find(name));
    const std::weak_ptr<trace::Environment> scope = globals;
    const size_t torchMembers = (*globals->find("th"))->attributes.size();
    QVERIFY(torchMembers > 10);
    trace::releaseScopes(scopes, {trace::builtinScope().get()});
    scopes.clear();
    globals.reset();
    QVERIFY(scope.expired());
    for (size_t i = 0; i < held.size(); ++i) QVERIFY2(held[i].expired(), std::to_string(i).c_str());
    QCOMPARE((*trace::builtinScope()->find("torch"))->attributes.size(), torchMembers);
  }

  // Cycles made in calls that are over, which no scope reaches (a list holding itself, through
  // append, its bound method, a slice or +=, stored while it was still empty too; a dict holding
  // itself; two dicts holding each other), are freed as a runner frees them (the run's scopes,
  // then the interpreter's cycle candidates handed to releaseCycles), tensors in them too; a
  // cycle also held from outside stays whole.
  void cyclesNoScopeReachesAreFreed() {
    NoModelHost host;
    auto globals = std::make_shared<trace::Environment>(trace::builtinScope());
    auto in = std::make_unique<trace::Interpreter>(
        trace::parseProgram(
            "t = torch.ones(4)\n"
            "def f():\n    x = [t]\n    x.append(x)\n"
            "def g():\n    m = [t].append\n    m(m)\n"
            "def h():\n    d = {'t': t}\n    e = {'d': d}\n    d['e'] = e\n"
            "def s():\n    z = [t, 0]\n    z[1:] = [z]\n"
            "def p():\n    w = [t]\n    w += [w]\n"
            "def empty():\n    a = []\n    a.append(a)\n    a.append(t)\n"
            "    b = {}\n    b['b'] = b\n    b['t'] = t\n"
            "    c = []\n    c[:] = [c]\n    c.append(t)\n"
            "    w = []\n    w += [w]\n    w.append(t)\n"
            "    q = []\n    mq = q.append\n    mq(q)\n    q.append(t)\n"
            "def k():\n    c = [t]\n    c.append(c)\n    return c\n"
            "for i in range(100):\n    f()\n    g()\n    h()\n    s()\n    p()\n    empty()\n"
            "kept = k()\n",
            "calls.py"),
        host, globals, 1000000);
    in->run(in->program().body);
    QVERIFY(in->functionScopes().empty());  // no call defined a function: no scope holds them
    const trace::Value kept = *globals->find("kept");
    const std::weak_ptr<trace::Object> t = *globals->find("t");
    QVERIFY2(t.use_count() > 1000, std::to_string(t.use_count()).c_str());
    std::vector<trace::Value> candidates = in->cycleCandidates();
    QVERIFY2(candidates.size() >= 1000, std::to_string(candidates.size()).c_str());
    in.reset();
    globals->vars().erase("kept");  // held from outside the run now, by this test only
    trace::releaseScopes({globals}, {trace::builtinScope().get()});
    globals.reset();
    trace::releaseCycles(std::move(candidates), {});
    QCOMPARE(t.use_count(), 1L);  // kept's
    QCOMPARE(kept->items.size(), size_t(2));
    QVERIFY(kept->items[1] == kept);
    kept->items.clear();
    QVERIFY(t.expired());
  }

  // A function whose closure is `scope`, held by it under `name`: the cycle a call leaves when it
  // defines an inner function.
  static trace::Value functionIn(const std::shared_ptr<trace::Environment>& scope,
                                 const std::string& name) {
    auto f = std::make_shared<trace::Object>();
    f->type = trace::Type::Function;
    f->function = std::make_shared<trace::FunctionDef>();
    f->function->name = name;
    f->function->closure = scope;
    scope->set(name, f);
    return f;
  }

  // releaseCycles frees what only its roots and scopes reach, cycles included, and leaves whole
  // what is held elsewhere too, with what it reaches (its own cycle as well).
  void releasedCyclesFreeOnlyWhatNothingElseHolds() {
    const trace::Value t = trace::tensor(at::ones({4}));
    trace::Value cyclic = trace::list({t});
    cyclic->items.push_back(cyclic);
    // `inner` is held by `held` and by a root only, so only what `held` reaches keeps it.
    trace::Value inner = trace::list({t});
    trace::Value held = std::make_shared<trace::Object>();
    held->type = trace::Type::Dict;
    held->dict.emplace_back(trace::string("inner"), inner);
    held->dict.emplace_back(trace::string("self"), held);
    const std::weak_ptr<trace::Object> cyclicGone = cyclic, innerKept = inner;
    const trace::Value heldOutside = held;
    // Not an initializer list: its copies would outlive the call.
    std::vector<trace::Value> roots;
    roots.push_back(std::move(cyclic));
    roots.push_back(std::move(held));
    roots.push_back(trace::list({std::move(inner)}));
    // A result object whose outputs list holds it.
    trace::Value result = std::make_shared<trace::Object>();
    result->type = trace::Type::ResultObject;
    result->attributes["outputs"] = trace::list({result, t});
    const std::weak_ptr<trace::Object> resultGone = result;
    roots.push_back(std::move(result));
    // Two call scopes, each holding a function that closes over it, below a scope not handed over
    // (a driver's globals): the first's function nothing else holds; the second's the test keeps.
    const auto outside = std::make_shared<trace::Environment>();
    outside->set("t", t);
    std::vector<std::shared_ptr<trace::Environment>> scopes{
        std::make_shared<trace::Environment>(outside),
        std::make_shared<trace::Environment>(outside)};
    scopes[0]->set("x", t);
    // Its default, a list, is entered after the function: the node list grows while the
    // function's definition is read (that read went through a moved vector before).
    functionIn(scopes[0], "dropped")->function->defaults.push_back(trace::list({t}));
    scopes[1]->set("x", t);
    const trace::Value keptFunction = functionIn(scopes[1], "kept");
    const std::weak_ptr<trace::Environment> droppedScope = scopes[0];
    // A driver's function (made in `outside`) that only a root holds, whose default holds itself:
    // the function is not entered (other ranks may be reading a driver function's defaults), so
    // the default is left as it is.
    trace::Value driverFunction = std::make_shared<trace::Object>();
    driverFunction->type = trace::Type::Function;
    driverFunction->function = std::make_shared<trace::FunctionDef>();
    driverFunction->function->closure = outside;
    trace::Value driverDefault = trace::list({t});
    driverDefault->items.push_back(driverDefault);
    driverFunction->function->defaults.push_back(driverDefault);
    const std::weak_ptr<trace::Object> driverDefaultLeft = driverDefault;
    driverDefault.reset();
    roots.push_back(std::move(driverFunction));
    trace::releaseCycles(std::move(roots), std::move(scopes));
    QVERIFY(cyclicGone.expired());
    QVERIFY(resultGone.expired());
    QVERIFY(droppedScope.expired());
    QCOMPARE(heldOutside->dict.size(), size_t(2));
    QVERIFY(!innerKept.expired());
    QCOMPARE(innerKept.lock()->items.size(), size_t(1));
    // The kept function still reads its call's names; the scope above was not entered.
    QCOMPARE(keptFunction->function->closure->vars().size(), size_t(2));
    QCOMPARE(outside->vars().size(), size_t(1));
    QVERIFY(!driverDefaultLeft.expired());
    QCOMPARE(driverDefaultLeft.lock()->items.size(), size_t(2));
    // here, in `inner`, in `outside`, in the kept call's scope and in the driver's default
    QCOMPARE(t.use_count(), 5L);
    heldOutside->dict.clear();
    keptFunction->function->closure->vars().clear();
    driverDefaultLeft.lock()->items.clear();
  }

  // Saved dicts and lists reach the driver as copies that alias as in the block: a dict that holds
  // itself and a list, and a saved list inside a saved dict, though the block's values are freed
  // when it ends (each rank frees its own at tp=2; rank 0's are the ones copied out).
  void aSavedDictThatHoldsItselfReachesTheDriverWhole_data() { addTpRows(); }
  void aSavedDictThatHoldsItselfReachesTheDriverWhole() {
    QFETCH(int, tp);
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines, tp);
    const std::string e = errorOf(*runner,
                                  "model = VLLM('demo')\n"
                                  "with model.trace('hi'):\n"
                                  "    d = {'l': [1, 2]}\n    d['d'] = d\n    d.save()\n"
                                  "    a = [d]\n    a.append(a)\n"
                                  "    l = [1]\n    m = {'l': l}\n    l.save()\n    m.save()\n"
                                  "print(d['l'], d['d']['l'], len(d), d['d'] is d)\n"
                                  "l.append(2)\nprint(m['l'], m['l'] is l)\n");
    QCOMPARE(e, std::string("no error"));
    QCOMPARE(lines, (std::vector<std::string>{"[1, 2] [1, 2] 2 True", "[1, 2] True"}));
  }

  // A function made in a driver function's call is copied to each rank with that call's scope, so
  // called in a block it counts in the rank's copy of the call's list and appends to the rank's
  // copy of the driver's `log`, as a driver's bound method does (`m`): what the block hands it, its
  // own functions and builtins included, stays in the rank, and the driver's values are as they
  // were (at tp=2 both ranks' threads appended to the one driver list through it). The driver's own
  // function counts from where it was.
  void aFunctionMadeInADriverCallUsesTheRanksCopies_data() { addTpRows(); }
  void aFunctionMadeInADriverCallUsesTheRanksCopies() {
    QFETCH(int, tp);
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines, tp);
    const std::string e =
        errorOf(*runner,
                "model = VLLM('demo')\nlog = []\nm = log.append\n"
                "def counter(start):\n    n = [start]\n"
                "    def step():\n        n[0] = n[0] + 1\n        log.append(n[0])\n"
                "        return n[0]\n"
                "    def both():\n        return [step(), step()]\n    return both\n"
                "both = counter(10)\n"
                "with model.trace('hi') as tracer:\n    m(0)\n    got = both() + [len(log)]\n"
                "    def h():\n        return 1\n"
                "    for f in [h, tracer.stop, print, model.model.layers[0].mlp.down_proj.whole]:\n"
                "        m(f)\n"
                "    k = len(log).save()\n    got.save()\n"
                "print(got, k, len(log), both())\n");
    QCOMPARE(e, std::string("no error"));
    QCOMPARE(lines, std::vector<std::string>{"[11, 12, 3] 7 0 [11, 12]"});
  }

  // A function defined at the driver's global scope and called in a block runs with the rank's
  // copies of the driver names, as the block itself does: its appends stay in the block (the
  // driver's list is as it was, and at tp=2 no two ranks write one list), it reads a global the
  // block assigned (as a module's function reads its module's globals), and so do the functions
  // it calls and its defaults. On the driver after the trace it is the driver's own again.
  void aDriverFunctionCalledInABlockUsesTheRanksCopies_data() { addTpRows(); }
  void aDriverFunctionCalledInABlockUsesTheRanksCopies() {
    QFETCH(int, tp);
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines, tp);
    const std::string e =
        errorOf(*runner,
                "model = VLLM('demo')\nlog = []\ny = 3\n"
                "def later():\n    return y + 1\n"
                "def reg(x, seen=[]):\n    log.append(x)\n    seen.append(x)\n"
                "    return [len(log), len(seen)]\n"
                "count = lambda: len(log)\n"
                "with model.trace('hi'):\n"
                "    a = reg(1) + [later()]\n    y = 10\n    b = reg(2) + [later()]\n"
                "    got = [a, b, count()].save()\n"
                "print(got, len(log), reg(5), count())\n");
    QCOMPARE(e, std::string("no error"));
    QCOMPARE(lines, std::vector<std::string>{"[[1, 1, 4], [2, 2, 11], 2] 0 [1, 1] 1"});
  }

  // The driver's print reached in a block (a driver function's default) prints as the block's
  // print does: once, from rank 0, in order with the driver's lines. VLLM(...) reached there fails:
  // the ranks' threads would load models into the driver's engines.
  void theDriversBuiltinsInABlock_data() { addTpRows(); }
  void theDriversBuiltinsInABlock() {
    QFETCH(int, tp);
    const std::string prelude =
        "model = VLLM('demo')\n"
        "def make(out=print, load=VLLM):\n    def say(x):\n        out('said', x)\n"
        "        return 1\n"
        "    def again():\n        return load('demo')\n    return [say, again]\n"
        "say, again = make()\n";
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines, tp);
    std::string e = errorOf(
        *runner, prelude + "with model.trace('hi'):\n    n = say(3).save()\nprint('after', n)\n");
    QCOMPARE(e, std::string("no error"));
    QCOMPARE(lines, (std::vector<std::string>{"said 3", "after 1"}));
    e = errorOf(*runner, prelude + "with model.trace('hi'):\n    m = again()\n");
    QVERIFY2(e.find("VLLM(...) loads a model for the driver: call it before the trace block") !=
                 std::string::npos,
             e.c_str());
  }

  // A RequestOutput the driver saved from one trace is copied to each rank of the next, as lists
  // are: an append to its token ids stays in the rank (it reached the driver's object, from both
  // ranks' threads at tp=2).
  // A comprehension in a block runs on each rank as the loop it stands for: it reads the modules'
  // whole outputs and calls modules (batched as a loop's calls are), a driver name it mentions
  // (`scale`) is captured, its saved list and dict reach
  // the driver, and they equal the explicit loop's values (in a second trace of the same prompt)
  // bit for bit, at tp=1 as at tp=2.
  void aComprehensionInABlockIsItsLoop_data() { addTpRows(); }
  void aComprehensionInABlockIsItsLoop() {
    QFETCH(int, tp);
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines, tp);
    const std::string e =
        errorOf(*runner,
                "model = VLLM('demo')\nscale = 2.0\n"
                "with model.trace('Hello world'):\n"
                "    hs = [model.model.layers[i].output[0] for i in range(2)]\n"
                "    made = [h.norm() * scale for h in hs].save()\n"
                "    signs = {i: bool(o > 0) for i, o in enumerate(made)}.save()\n"
                "    total = sum(o for o in made).save()\n"
                "    mlps = [model.model.layers[1].mlp(model.model.norm(h)) for h in hs].save()\n"
                "    apart = []\n"
                "    for h in hs:\n"
                "        apart.append(model.model.layers[1].mlp(model.model.norm(h)))\n"
                "    apart = apart.save()\n"
                "with model.trace('Hello world'):\n"
                "    looped = []\n"
                "    for i in range(2):\n"
                "        looped.append(model.model.layers[i].output[0].norm() * scale)\n"
                "    looped = looped.save()\n"
                "print(len(made), all(torch.equal(a, b) for a, b in zip(made, looped)), signs,\n"
                "      torch.equal(total, made[0] + made[1]),\n"
                "      all(torch.equal(a, b) for a, b in zip(mlps, apart)))\n");
    QCOMPARE(e, std::string("no error"));
    QCOMPARE(lines, std::vector<std::string>{"2 True {0: True, 1: True} True True"});
  }

  // Unpacking in a block: a starred target over the layers' outputs, a call's *args and **kwargs
  // into a module call and a driver function, and a display of both ports; each rank sees the
  // whole tensors, so the values equal tp=1's.
  void unpackingInABlock_data() { addTpRows(); }
  void unpackingInABlock() {
    QFETCH(int, tp);
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines, tp);
    const std::string e = errorOf(
        *runner,
        "model = VLLM('demo')\n"
        "def pick(*xs, scale=1.0, **unused):\n"
        "    return xs[0] * scale\n"
        "with model.trace('Hello world'):\n"
        "    first, *rest = [layer.output[0] for layer in model.model.layers]\n"
        "    options = {'scale': 2.0}\n"
        "    both = [*rest[-1:], first]\n"
        "    normed = model.model.norm(*both[:1]).save()\n"
        "    direct = model.model.norm(rest[2]).save()\n"
        "    twice = pick(*both[1:], **options).save()\n"
        "    firsts = first.save()\n"
        "    sizes = [len(rest), *first.shape].save()\n"
        "    ref = model.logits.save()\n"
        "prompts = ['Hello world']\n"
        "with model.trace() as tracer:\n"
        "    with tracer.invoke(*prompts):\n"
        "        unpacked = model.logits.save()\n"
        "print(*sizes, torch.equal(twice, firsts * 2.0), torch.equal(normed, direct),\n"
        "      '%.4f' % twice.norm() == f'{twice.norm():.4f}', torch.equal(unpacked, ref),\n"
        "      repr(firsts.float), repr(list))\n");
    QCOMPARE(e, std::string("no error"));
    QCOMPARE(lines, std::vector<std::string>{
                        "3 2 32 True True True True <built-in function float> <class 'list'>"});
  }

  void aSavedResultIsCopiedToEachRank_data() { addTpRows(); }
  void aSavedResultIsCopiedToEachRank() {
    QFETCH(int, tp);
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines, tp);
    const std::string e =
        errorOf(*runner,
                "model = VLLM('demo')\n"
                "with model.trace('hi', max_tokens=2) as tracer:\n    r = tracer.result.save()\n"
                "n = len(r.outputs[0].token_ids)\n"
                "with model.trace('hi'):\n    r.outputs[0].token_ids.append(7)\n"
                "    k = len(r.outputs[0].token_ids).save()\n"
                "print(n, k - n, len(r.outputs[0].token_ids) - n)\n");
    QCOMPARE(e, std::string("no error"));
    QCOMPARE(lines, std::vector<std::string>{"2 1 0"});
  }

  // What such a function may read is captured, not its parameters: a parameter named as a driver
  // global (here one nested too deeply to copy) leaves that global on the driver; a name it
  // assigns after reading the global (`log += [v]`, legal here) and an import in it are captured,
  // in a function made in a driver function's call too (`g`). Of a call's scope only what its
  // functions read is copied, and a name it holds shadows the global. An import of a name the
  // block deleted fails cleanly.
  void aDriverFunctionsCopyCapturesOnlyWhatItReads() {
    const std::string prelude =
        "model = VLLM('demo')\nx = []\nfor i in range(1500):\n    x = [x]\n"
        "def f(x):\n    y = x + 1\n    for x in [y]:\n        z = x\n    return z\n"
        "log = []\ndef reg(v):\n    log += [v]\n    from vllm import TokensPrompt\n"
        "    return len(log)\n"
        "def importer():\n    def g():\n        from vllm import TokensPrompt\n"
        "        return 1\n    return g\n"
        "g = importer()\n"
        "def make(x):\n    def h():\n        return len(x)\n    return h\n"
        "h = make([1, 2])\n"
        "def keepBig():\n    big = x\n    def k():\n        return 5\n    return k\n"
        "k = keepBig()\n";
    const struct {
      const char* rest;
      const char* error;
      const char* printed;
    } cases[] = {
        {"with model.trace('hi'):\n    a = [f(1), reg(3), reg(4)].save()\nprint(a, len(x), log)\n",
         "no error", "[2, 1, 2] 1 []"},
        {"with model.trace('hi'):\n    a = g().save()\nprint(a)\n", "no error", "1"},
        // h's x is its call's, not the deep global; k does not read its call's `big`.
        {"with model.trace('hi'):\n    a = [h(), k()].save()\nprint(a)\n", "no error", "[2, 5]"},
        {"from vllm import TokensPrompt\nwith model.trace('hi'):\n    del TokensPrompt\n"
         "    a = g().save()\n",
         "cannot import 'TokensPrompt' here: TokensPrompt is not in this scope", nullptr}};
    for (const auto& c : cases) {
      std::vector<std::string> lines;
      auto runner = makeRunner(&lines);
      const std::string e = errorOf(*runner, prelude + c.rest);
      QVERIFY2(e.find(c.error) != std::string::npos, e.c_str());
      if (c.printed) QCOMPARE(lines, std::vector<std::string>{c.printed});
    }
  }

  // A builtin bound to a block fails with the script's error when another thread calls it (another
  // rank's block, which reached it through a driver's list, would run this rank's collectives) and
  // after its block has ended; its own thread calls it while the block lives.
  void blockBoundBuiltinsStayOnTheirRank() {
    auto block = std::make_shared<const int>(0);
    int calls = 0;
    const trace::Value f = trace::boundToBlock(trace::builtin("probe",
                                                              [&calls](trace::CallArgs&) {
                                                                ++calls;
                                                                return trace::none();
                                                              }),
                                               block);
    const auto call = [&f]() -> std::string {
      try {
        trace::CallArgs args;
        f->builtin(args);
      } catch (const trace::RuntimeFailure& e) {
        return e.what();
      }
      return "no error";
    };
    QCOMPARE(call(), std::string("no error"));
    std::string elsewhere;
    std::thread other([&] { elsewhere = call(); });
    other.join();
    QVERIFY2(elsewhere.find("probe() belongs to another rank's trace block") != std::string::npos,
             elsewhere.c_str());
    block.reset();
    const std::string after = call();
    QVERIFY2(after.find("probe() belongs to a trace block that has ended") != std::string::npos,
             after.c_str());
    QCOMPARE(calls, 1);
  }

  // A deferred value's method looked up in one invoke and called in the next computes in the next
  // (it once held the op in the first invoke's interpreter, whose block had ended: the saved value
  // failed to compute).
  void aDeferredMethodCalledInALaterInvoke() {
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines);
    const std::string e =
        errorOf(*runner,
                "model = VLLM('demo')\n"
                "with model.trace() as tracer:\n"
                "    with tracer.invoke('Hi'):\n"
                "        mlp = model.model.layers[0].mlp\n"
                "        y = mlp(mlp.input)\n        s = y.sum\n        ys = y.sum().save()\n"
                "    with tracer.invoke('Hello'):\n"
                "        h = model.model.layers[1].mlp.output\n        z = s().save()\n"
                "print(torch.allclose(z, ys))\n");
    QCOMPARE(e, std::string("no error"));
    QCOMPARE(lines, std::vector<std::string>{"True"});
  }

  // A runner frees a run's globals when the next starts: cycles through the runner's own names
  // and the builtins leave them working.
  void runsAfterCyclesWork() {
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines);
    QCOMPARE(errorOf(*runner,
                     "def f(x):\n    return f\nth = torch\np = print\n"
                     "a = [th, p]\na.append(a)\nprint(len(a))\n"),
             std::string("no error"));
    const std::string e = errorOf(*runner, "print(torch.ones(2).sum().item())\nprint(f)\n");
    QVERIFY2(e.find("hostile.py:2:7: name 'f' is not defined") != std::string::npos, e.c_str());
    QCOMPARE(lines, (std::vector<std::string>{"3", "2.0"}));
  }

  // While a rank is in a job (one lost past a failed job's timeout may read the last run's
  // values), the next run leaves those values whole, the call scopes its inner functions hold too;
  // a later run frees them.
  void aLastRunsValuesWaitForRanksToLeaveTheirJobs() {
    auto engine = test::demoEngine(1);
    std::vector<std::string> lines;
    trace::RunOptions o = demoRunOptions(&lines);
    o.engine = engine.get();
    trace::ScriptRunner runner(o);
    runner.run(
        "model = VLLM('demo')\na = [torch.ones(2)]\na.append(a)\n"
        "def make(x):\n    def get():\n        return x\n    return 0\n"
        "for i in range(3):\n    make(a)\n"
        "def loop():\n    y = [torch.ones(2)]\n    y.append(y)\n"
        "loop()\n",
        "first.py");
    std::atomic<bool> release{false}, inside{false};
    JobHandle job = engine->submit([&](RankContext&) {
      inside = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    struct Release {  // a failed check below must not leave the rank spinning on a gone flag
      std::atomic<bool>& flag;
      JobHandle& job;
      ~Release() {
        flag = true;
        job.wait();
      }
    };
    {
      const Release guard{release, job};
      while (!inside) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      runner.run("b = [1]\nb.append(b)\n", "second.py");
      QCOMPARE(runner.unreleasedScopes(), size_t(4));  // the globals and make's three calls
      QCOMPARE(runner.unreleasedCycleCandidates(), size_t(2));  // a, and loop's y
    }
    runner.run("print(len([1, 2]))\n", "third.py");
    QCOMPARE(runner.unreleasedScopes(), size_t(0));
    QCOMPARE(runner.unreleasedCycleCandidates(), size_t(0));
    QCOMPARE(lines, std::vector<std::string>{"2"});
  }
};

QTEST_GUILESS_MAIN(TestScriptScopes)
#include "tst_script_scopes.moc"
