// What a rerun of a trace no longer pays for (issue 15, trace overhead): the bounded LRU, parsed
// programs cached by file and source (a cached program raises the same errors at the same line
// and column as a fresh parse; a source that fails to parse is never kept), tokenized prompts
// cached per tokenizer object (a freed tokenizer's entries never serve another), and the default
// memory budget read only once a block has made 1 MiB (and then enforced as before); a trace's
// ranks get only the driver names its blocks mention, and one trace leaves nothing for the next.
#include <QtTest>

#include "common/test_support.h"
#include "core/error.h"
#include "core/model/model_source.h"
#include "core/model/tokenizer.h"
#include "core/trace/bounded_lru.h"
#include "core/trace/memory_budget.h"
#include "core/trace/names_mentioned.h"
#include "core/trace/script_runner.h"
#include "core/trace/trace_caches.h"

using namespace shardscope;

namespace {

// Two byte-level BPE tokenizers that split "ab ab" alike into different ids (raw strings stay out
// of the test class: moc cannot parse them there).
constexpr const char* kFirstVocab = R"({"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4})";
constexpr const char* kSecondVocab = R"({"a": 4, "b": 3, "ab": 1, "Ġ": 0, "Ġab": 2})";

std::string tinyTokenizer(const std::string& vocab) {
  return R"({"version": "1.0", "added_tokens": [], "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": )" +
         vocab + R"(, "merges": [["a", "b"], ["Ġ", "ab"]]}})";
}

trace::RunOptions demoOptions(std::string* printed) {
  trace::RunOptions o;
  o.modelDirs["demo"] = ensureDemoModel().string();
  o.dtype = DType::F32;
  o.out = [printed](const std::string& line) { *printed += line + "\n"; };
  return o;
}

std::string errorOf(trace::ScriptRunner& runner, const std::string& source,
                    const std::string& file) {
  try {
    runner.run(source, file);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

// Whether `text` holds every one of `parts` (an error's place and its message, say).
bool holdsAll(const std::string& text, std::initializer_list<const char*> parts) {
  for (const char* p : parts) {
    if (text.find(p) == std::string::npos) return false;
  }
  return true;
}

}  // namespace

class TestTraceCaches : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void lruKeepsTheMostRecentWithinItsBounds() {
    trace::BoundedLru<int, int> lru(2, 100);
    const auto is = [](int k) { return [k](const int& key) { return key == k; }; };
    lru.put(1, 10, 10);
    lru.put(2, 20, 10);
    QCOMPARE(*lru.find(is(1)), 10);  // 1 is now the most recent
    lru.put(3, 30, 10);              // drops 2, the least recent
    QVERIFY(!lru.find(is(2)));
    QCOMPARE(*lru.find(is(3)), 30);
    lru.put(4, 40, 95);  // over the byte bound with anything else: only 4 stays
    QCOMPARE(lru.size(), size_t(1));
    lru.put(5, 50, 101);  // larger than the bound: not kept, nothing dropped
    QCOMPARE(lru.size(), size_t(1));
    lru.put(6, 60, 1, [](const int& key) { return key == 4; });  // stale entries go first
    QVERIFY(!lru.find(is(4)));
    QCOMPARE(lru.size(), size_t(1));
  }

  void programsAreCachedByFileAndSource() {
    const std::string source = "x = 1\ny = x + 2\n";
    const auto a = trace::parseProgramCached(source, "a.py");
    QVERIFY(a == trace::parseProgramCached(source, "a.py"));
    const auto b = trace::parseProgramCached(source, "b.py");
    QVERIFY(a != b);  // errors name the file: another file is another program
    QCOMPARE(b->file, std::string("b.py"));
  }

  void aCachedProgramGivesTheSameErrors() {
    trace::RunOptions o;
    o.modelDirs["demo"] = ensureDemoModel().string();
    o.dtype = DType::F32;
    o.out = [](const std::string&) {};
    trace::ScriptRunner runner(o);
    const std::string runtime =
        "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    h = model.model.layers[1].output\n"
        "    g = model.model.layers[0].output\n";
    const std::string first = errorOf(runner, runtime, "order.py");
    QVERIFY2(first.find("order.py:4:") != std::string::npos, first.c_str());
    QVERIFY2(first.find("already ran past") != std::string::npos, first.c_str());
    QCOMPARE(errorOf(runner, runtime, "order.py"), first);
    const std::string syntax = "x = (1,\ny = 2\n";
    const std::string parseError = errorOf(runner, syntax, "syntax.py");
    QVERIFY2(parseError.find("syntax.py:") != std::string::npos, parseError.c_str());
    QCOMPARE(errorOf(runner, syntax, "syntax.py"), parseError);
    // The same traced script twice: the same prints and saved values.
    const std::string good =
        "model = VLLM(\"demo\")\nwith model.trace(\"The capital of France is\"):\n"
        "    t = model.logits.argmax(-1).save()\nprint(t)\n";
    runner.run(good, "good.py");
    const std::string printed = runner.result().printed;
    runner.run(good, "good.py");
    QCOMPARE(runner.result().printed, printed);
  }

  // Every way a block can look a name up is in the set: names read or assigned at any depth (nested
  // statements, defs and their defaults, lambdas, f-strings, subscripts, calls' keywords), and
  // what `import` and `from ... import` read; a name the block never mentions is not.
  void namesMentionedCoverEveryLookup() {
    const auto program = trace::parseProgram(
        "with m.trace(p) as tr:\n"
        "    a = b[c:d] + e.f(g, k=h)\n"
        "    def fn(x=i):\n"
        "        return x + j\n"
        "    lam = lambda y=l2: y * n\n"
        "    s = f\"{o!r} {q:.2f}\"\n"
        "    for r in range(t):\n"
        "        if u:\n"
        "            v += {w: z}[w]\n"
        "        else:\n"
        "            assert aa, bb\n"
        "    import torch\n"
        "    from vllm import TokensPrompt\n",
        "names.py");
    std::set<std::string> names;
    trace::addNamesMentioned(program->body[0]->body, names);
    for (const char* n : {"a", "b",   "c",  "d", "e", "g",  "h",  "fn",    "i",           "x",
                          "j", "lam", "l2", "y", "n", "s",  "o",  "q",     "r",           "range",
                          "t", "u",   "v",  "w", "z", "aa", "bb", "torch", "TokensPrompt"}) {
      QVERIFY2(names.count(n), n);
    }
    for (const char* n : {"m", "p", "tr", "f", "k", "vllm", "unused"}) QVERIFY2(!names.count(n), n);
  }

  // The ranks get only the driver names a trace's blocks mention; what a block reaches without
  // naming it still works: a driver function reading a driver global through its closure, imports
  // inside the block, names the driver set before an invoke, and every invoke of a trace.
  void tracesGetOnlyTheDriverNamesTheyMention() {
    std::string printed;
    trace::ScriptRunner runner(demoOptions(&printed));
    runner.run(
        "import torch\n"
        "model = VLLM(\"demo\")\n"
        "big = torch.zeros(524288)\n"
        "y = 3\n"
        "def f():\n"
        "    return y + 1\n"
        "with model.trace(\"The capital of France is\"):\n"
        "    import torch\n"
        "    from vllm import TokensPrompt\n"
        "    made = torch.ones(262144)\n"
        "    twice = made.clone()\n"
        "    r = (f() + twice.shape[0]).save()\n"
        "    t = TokensPrompt(prompt_token_ids=[1, 2])[\"prompt_token_ids\"].save()\n"
        "print(r, t)\n"
        "with model.trace() as tracer:\n"
        "    k = y + 1\n"
        "    with tracer.invoke(\"Hello\"):\n"
        "        q = big.shape[0] + y\n"
        "        q2 = q.save()\n"
        "    with tracer.invoke(\"World\"):\n"
        "        u = (k * 2).save()\n"
        "print(q2, u)\n",
        "names.py");
    QCOMPARE(printed, std::string("262148 [1, 2]\n524291 8\n"));
  }

  // Nothing of one trace is visible in the next: a name assigned but not saved stays unreadable
  // after it, a value a block changed in place is the driver's own again in the next trace, and a
  // trace that failed part-way leaves the next one correct.
  void aTraceLeavesNothingForTheNext() {
    std::string printed;
    trace::ScriptRunner runner(demoOptions(&printed));
    const std::string first =
        "import torch\n"
        "model = VLLM(\"demo\")\n"
        "w = torch.zeros(3)\n"
        "with model.trace(\"Hi\"):\n"
        "    w += 1\n"
        "    hidden = 5\n"
        "    kept = (w.sum() * 1).save()\n"
        "print(w.sum().item(), kept.item())\n";
    runner.run(first, "first.py");
    QCOMPARE(printed, std::string("0.0 3.0\n"));
    const std::string unsaved =
        errorOf(runner, first + "with model.trace(\"Hi\"):\n    z = hidden\n", "second.py");
    QVERIFY2(
        unsaved.find("'hidden' was assigned inside the trace but not saved") != std::string::npos,
        unsaved.c_str());
    const std::string failing =
        "model = VLLM(\"demo\")\n"
        "with model.trace(\"Hi\"):\n"
        "    a = 1\n"
        "    h = model.model.layers[0].output\n"
        "    b = model.model.layers[9].output\n";
    const std::string failed = errorOf(runner, failing, "failing.py");
    QVERIFY2(failed.find("failing.py:5:") != std::string::npos, failed.c_str());
    printed.clear();
    runner.run(
        "model = VLLM(\"demo\")\n"
        "with model.trace(\"Hi\"):\n"
        "    c = model.logits.argmax(-1).save()\n"
        "    n = 0\n"
        "    for k in [1, 2, 3]:\n"
        "        n = n + k\n"
        "    n = n.save()\n"
        "print(n, c.shape)\n",
        "after.py");
    QCOMPARE(printed, std::string("6 torch.Size([1])\n"));
    const std::string leaked = errorOf(
        runner, "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    z = a\n", "leak.py");
    QVERIFY2(holdsAll(leaked, {"leak.py:3:", "name 'a' is not defined"}), leaked.c_str());
  }

  // The runner's own names (print, VLLM, nnsight, vllm, TokensPrompt) are made once per runner: a
  // script that rebinds one changes its own run only, and VLLM(...) fails at the statement of the
  // script that is running.
  void theRunnersNamesAreTheSameInEveryRun() {
    std::string printed;
    trace::ScriptRunner runner(demoOptions(&printed));
    runner.run("print = 5\nVLLM = 6\nTokensPrompt = 7\n", "rebind.py");
    runner.run(
        "print(TokensPrompt(prompt_token_ids=[3])[\"prompt_token_ids\"], nnsight.__name__)\n",
        "again.py");
    QCOMPARE(printed, std::string("[3] nnsight\n"));
    const std::string e = errorOf(runner, "x = 1\n\nm = VLLM()\n", "late.py");
    QVERIFY2(holdsAll(e, {"late.py:3:", "VLLM(...) needs the model name"}), e.c_str());
  }

  // Ports are no longer tracked once every block has ended; while one has not, the order check
  // still holds for it even when the other invokes ended at the start.
  void portsAreTrackedWhileABlockCanStillAsk() {
    std::string printed;
    trace::ScriptRunner runner(demoOptions(&printed));
    const std::string head =
        "model = VLLM(\"demo\")\n"
        "with model.trace() as tracer:\n"
        "    with tracer.invoke(\"Hello\"):\n"
        "        pass\n"
        "    with tracer.invoke(\"World\"):\n"
        "        a = model.model.layers[2].output[0].save()\n";
    const std::string e =
        errorOf(runner, head + "        b = model.model.layers[0].output\n", "order.py");
    QVERIFY2(holdsAll(e, {"order.py:7:", "already ran past"}), e.c_str());
    runner.run(
        head + "        b = model.model.layers[3].output[0].save()\nprint(a.shape, b.shape)\n",
        "fine.py");
    QCOMPARE(printed, std::string("torch.Size([1, 32]) torch.Size([1, 32])\n"));
  }

  // A block's print() is the rank's: at tp=2 a line is printed once (rank 0 reports it), not once
  // per rank from the rank threads; a script that rebinds print gets its own in the block too.
  void aBlockPrintsOnceAtAnyTensorParallelism() {
    std::string printed;
    trace::RunOptions o = demoOptions(&printed);
    o.tp = 2;
    trace::ScriptRunner runner(o);
    runner.run(
        "model = VLLM(\"demo\")\n"
        "with model.trace(\"Hi\"):\n"
        "    print(\"inside\", model.model.layers[0].output[0].shape)\n"
        "print(\"after\")\n",
        "print.py");
    QCOMPARE(printed, std::string("inside torch.Size([1, 32])\nafter\n"));
    printed.clear();
    const std::string e = errorOf(runner,
                                  "model = VLLM(\"demo\")\nprint = 5\n"
                                  "with model.trace(\"Hi\"):\n    print(1)\n",
                                  "rebound.py");
    QVERIFY2(e.find("rebound.py:4:") != std::string::npos, e.c_str());
  }

  void promptsAreCachedPerTokenizer() {
    auto tok = Tokenizer::fromFile(qwen3TokenizerAsset());
    const std::string text = "The capital of France is";
    const auto ids = tok->encode(text);
    QCOMPARE(trace::encodePromptCached(tok, text), ids);
    QCOMPARE(trace::encodePromptCached(tok, text), ids);
    QVERIFY_THROWS_EXCEPTION(Error, trace::encodePromptCached(tok, std::string("\xff")));
    // A tokenizer made after another is freed (possibly at its address) is asked itself, not
    // served the freed one's ids for the same text.
    auto first = Tokenizer::fromJson(tinyTokenizer(kFirstVocab), "first");
    QCOMPARE(trace::encodePromptCached(first, "ab ab"), (std::vector<int64_t>{2, 4}));
    first.reset();
    auto second = Tokenizer::fromJson(tinyTokenizer(kSecondVocab), "second");
    QCOMPARE(trace::encodePromptCached(second, "ab ab"), (std::vector<int64_t>{1, 2}));
  }

  void theDefaultMemoryBudgetIsReadOnlyWhenNeeded() {
    int reads = 0;
    trace::MemoryBudget budget([&reads] {
      ++reads;
      return int64_t(3) << 20;  // 3 MiB
    });
    int64_t held = 0;
    const auto heldNow = [&held] { return held; };
    for (int i = 0; i < 100; ++i) QCOMPARE(budget.charge(1000, heldNow), std::string());
    QCOMPARE(budget.request(4096, heldNow), std::string());
    QCOMPARE(reads, 0);  // a small block never reads the free memory
    held = int64_t(4) << 20;
    const std::string e = budget.charge(int64_t(2) << 20, heldNow);
    QCOMPARE(reads, 1);
    QVERIFY2(e.find("memory budget of 3.0 MiB exceeded") != std::string::npos, e.c_str());
    trace::MemoryBudget asking([&reads] {
      ++reads;
      return int64_t(3) << 20;
    });
    const std::string r = asking.request(int64_t(8) << 20, [] { return int64_t(0); });
    QCOMPARE(reads, 2);
    QVERIFY2(r.find("would create 8.0 MiB") != std::string::npos, r.c_str());
  }
};

QTEST_GUILESS_MAIN(TestTraceCaches)
#include "tst_trace_caches.moc"
