// The trace language and interleaver on the demo model (8 query heads, 4 KV heads, head_dim 8,
// hidden 32) at tp=1, 2 and 4 through local process groups: reads at every port kind equal
// tp=1's, writes are re-sharded, read-only traces leave the model bit-identical, steps and
// invokes behave as TRACE.md says, and every script error names its line and is followed by a
// job that works. Modules the trace layer has never heard of: tst_interleaver_modules.
#include <QtTest>

#include <ATen/ATen.h>

#include <cstring>

#include "common/script_checks.h"
#include "common/script_run.h"
#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/engine/rank_context.h"
#include "core/host_tensor_conversion.h"
#include "core/model/model_source.h"
#include "core/model/module_call.h"
#include "core/model/port_observer.h"
#include "core/trace/interleaver.h"
#include "core/trace/script_runner.h"
#include "core/trace/source_location.h"

using namespace shardscope;

namespace {

using Run = test::ScriptRun;

// A demo-model runner with the default budgets (the trace suites run whole generations).
std::unique_ptr<trace::ScriptRunner> makeRunner(int tp, std::vector<std::string>* lines) {
  return std::make_unique<trace::ScriptRunner>(test::demoRunOptions(lines, tp));
}

Run run(const std::string& body, int tp = 1) {
  Run r;
  r.runner = makeRunner(tp, &r.lines);
  try {
    r.runner->run("model = VLLM(\"demo\")\n" + body, "test.py");
  } catch (const std::exception& e) {
    qWarning("script failed: %s", e.what());
    r.lines.push_back(std::string("ERROR: ") + e.what());
  }
  return r;
}

// The error a script run as bad.py ends with ("no error" when it ran to the end).
std::string errorOf(trace::ScriptRunner& runner, const std::string& script) {
  return test::errorOf(runner, script, "bad.py");
}

bool close(const at::Tensor& a, const at::Tensor& b) {
  return test::closeToScale(a, b);
}

// Reads of every port kind of layer 1, in the order the model runs them.
const char* kReads =
    "l = model.model.layers[1]\n"
    "with model.trace(\"The capital of France is\"):\n"
    "    qkv = l.self_attn.qkv_proj.output[0]\n"
    "    q3 = l.self_attn.qkv_proj.q_head(qkv, 3).clone().save()\n"
    "    k1 = l.self_attn.qkv_proj.k_head(qkv, 1).clone().save()\n"
    "    v2 = l.self_attn.qkv_proj.v_head(qkv, 2).clone().save()\n"
    "    qn = l.self_attn.q_norm.output.clone().save()\n"
    "    a = l.self_attn.attn.output.clone().save()\n"
    "    z = l.self_attn.o_proj.input.clone().save()\n"
    "    z5 = l.self_attn.o_proj.head(z, 5).clone().save()\n"
    "    o = l.self_attn.o_proj.output[0].clone().save()\n"
    "    col = l.mlp.act_fn.output.clone().save()\n"
    "    h = sum(l.output).save()\n"
    "    logits = model.logits.save()\n";

const char* kSteps =
    "with model.trace(\"The capital of France is\", max_tokens=5) as tracer:\n"
    "    zeros = list().save()\n"
    "    for i in tracer.iter[:5]:\n"
    "        if i == 2:\n"
    "            model.logits[:] = 0\n"
    "        zeros.append(bool((model.logits == 0).all()))\n"
    "print(zeros)\n";

// Scripts live outside the test class: moc cannot parse raw strings inside class bodies.
const char* kScript0 =
    "with model.trace(\"The capital of France is\"):\n"
    "    qkv = model.model.layers[0].self_attn.qkv_proj.output[0].clone().save()\n";
const char* kScript1 =
    "with model.trace(\"Hi\", max_tokens=6, ignore_eos=True) as tracer:\n"
    "    steps = list().save()\n"
    "    for i in tracer.iter[:]:\n"
    "        steps.append(i)\n"
    "        x = model.logits\n"
    "print(steps)\n";
const char* kScript2 =
    "with model.trace(\"Hi\", max_tokens=10, ignore_eos=True) as tracer:\n"
    "    for i in tracer.iter[:]:\n"
    "        if i == 1:\n"
    "            tracer.stop()\n"
    "        x = model.logits\n"
    "    out = tracer.result.save()\n"
    "print(len(out.outputs[0].token_ids))\n";
const char* kScript3 =
    "with model.trace(\"Hi\", max_tokens=10, ignore_eos=True) as tracer:\n"
    "    ls = list().save()\n"
    "    for _ in tracer.iter[:]:\n"
    "        ls.append(model.logits)\n"
    "print(torch.cat(ls).shape)\n";
const char* kScript4 =
    "with model.trace(\"Hi\", max_tokens=3, ignore_eos=True) as tracer:\n"
    "    for _ in tracer.iter[:3]:\n"
    "        model.samples[:] = 9625\n"
    "    out = tracer.result.save()\n"
    "print(out.outputs[0].token_ids, repr(out.outputs[0].text))\n";
// An id past the tokenizer (Qwen3: 151669 ids, 151936 rows) in the generated ids: as in vLLM it
// stays in token_ids and gives no text; the run's record shows it as a marker.
const char* kPastTokenizer =
    "with model.trace(\"Hi\", max_tokens=3, ignore_eos=True) as tracer:\n"
    "    for i in tracer.iter[:3]:\n"
    "        model.samples[:] = 151691 if i == 1 else 9625\n"
    "    out = tracer.result.save()\n"
    "print(out.outputs[0].token_ids, repr(out.outputs[0].text))\n"
    "print(repr(model.tokenizer.decode([9625, 151691])))\n";
const char* kScript5 =
    "with model.trace(max_tokens=1) as tracer:\n"
    "    with tracer.invoke(\"The capital of France is\"):\n"
    "        a = model.model.layers[1].output[0].clone().save()\n"
    "        model.model.layers[2].mlp.output[:] = 0\n"
    "        la = model.logits.save()\n"
    "    with tracer.invoke(\"Hello\"):\n"
    "        b = model.model.layers[1].output[0].clone().save()\n"
    "        lb = model.logits.save()\n";
const char* kScript6 =
    "with model.trace(\"Hello\"):\n"
    "    b = model.model.layers[1].output[0].clone().save()\n"
    "    lb = model.logits.save()\n";
const char* kScript7 =
    "with model.trace(max_tokens=1) as tracer:\n"
    "    with tracer.invoke(\"The capital of France is\"):\n"
    "        h = model.model.layers[1].output[0][-1:].clone()\n"
    "        la = model.logits.save()\n"
    "    with tracer.invoke(\"Hello\"):\n"
    "        model.model.layers[1].output[0][-1:] = h\n"
    "        lb = model.logits.save()\n";
const char* kScript8 =
    "with model.trace(\"The capital of France is\"):\n"
    "    h = sum(model.model.layers[-1].output)\n"
    "    lens = model.logits_processor(model.lm_head, model.model.norm(h))[-1:].save()\n"
    "    logits = model.logits.save()\n";
const char* kScript9 =
    "def f(a, b=2):\n"
    "    return a * b\n"
    "g = lambda x: x + 1\n"
    "xs = [1, 2, 3]\n"
    "xs.append(4)\n"
    "d = {\"a\": 1}\n"
    "d[\"b\"] = 2\n"
    "s = 0\n"
    "for i in range(10):\n"
    "    if i % 2 == 0:\n"
    "        continue\n"
    "    if i > 7:\n"
    "        break\n"
    "    s += i\n"
    "print(f(3), f(3, b=4), g(1), xs[-1], xs[1:3], len(d), s, 7 // 2, -7 // 2, 2 ** 10, 1e-5)\n"
    "print(f\"{s:.2f} {xs!r}\", 1 < 2 < 3, \"a\" in d, divmod(-7, 2), max(3, 9, 1), abs(-2.5))\n"
    "print(repr(\"it's\"), (1,), None, True and 0, not [], tuple([1, 2]), str(3.0), int(\"12\") + "
    "1)\n"
    // The list, tuple, dict and str methods; each line's output is Python 3's.
    "ys = [5, 6, 7]\n"
    "ys.extend(ys)\n"
    "p = ys.pop()\n"
    "q = ys.pop(0)\n"
    "d2 = {\"k\": 1, \"j\": 2}\n"
    "t = (\"a\", \"b\", \"a\")\n"
    "print(ys, p, q, ys.index(7), ys.count(6), t.count(\"a\"), t.index(\"b\"), list(d2.keys()),\n"
    "      list(d2.values()), list(d2.items()), d2.get(\"j\"), d2.get(\"z\", 0), d2.get(\"z\"))\n"
    "print(\"-\".join([\"x\", \"y\"]), \"Ab\".upper(), \"Ab\".lower(), repr(\"  s \\n\".strip()),\n"
    "      \"abc\".startswith(\"ab\"), \"abc\".endswith(\"bc\"), \"abc\".startswith(\"b\"),\n"
    "      \"a.b.c\".replace(\".\", \"::\"))\n"
    // Brackets that span lines, in a block: the line that closes them ends its statement.
    "if True:\n"
    "    zs = [1,\n"
    "          2]\n"
    "    print(zs, {\"a\": (1,\n"
    "  2)})\n";

// Reads and writes at changing layers every step: on the GPU the layers between them replay
// CUDA graphs, and the segments change with the step (layer 3 is read at step 2 only).
const char* kSegments =
    "with model.trace(\"The capital of France is\", max_tokens=6, ignore_eos=True) as tracer:\n"
    "    zs = list().save()\n"
    "    rows = list().save()\n"
    "    for i in tracer.iter[:]:\n"
    "        zs.append(model.model.layers[1].self_attn.o_proj.input.clone())\n"
    "        model.model.layers[2].self_attn.o_proj.input[:, 8:16] = 0\n"
    "        if i == 2:\n"
    "            late = model.model.layers[3].output[0].clone().save()\n"
    "        rows.append(model.logits.clone())\n"
    "    out = tracer.result.save()\n"
    "z = torch.cat(zs)\n"
    "logits = torch.cat(rows)\n";

}  // namespace

class TestTrace : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void readsAtEveryPortKindEqualTp1_data() {
    QTest::addColumn<int>("tp");
    QTest::newRow("tp2") << 2;
    QTest::newRow("tp4") << 4;
  }
  void readsAtEveryPortKindEqualTp1() {
    QFETCH(int, tp);
    if (test::backend() == "nccl" && int(at::getNumGPUs()) < tp)
      QSKIP("NCCL needs one GPU per rank");
    const Run one = run(kReads, 1), many = run(kReads, tp);
    for (const char* name : {"q3", "k1", "v2", "qn", "a", "z", "z5", "o", "col", "h", "logits"}) {
      QVERIFY2(close(one.tensor(name), many.tensor(name)), name);
    }
    QCOMPARE(many.tensor("qn").sizes().vec(),
             (std::vector<int64_t>{5, 8, 8}));  // gathered along heads
    QCOMPARE(many.tensor("z").sizes().vec(), (std::vector<int64_t>{5, 64}));
    QVERIFY(at::equal(many.tensor("z5"), many.tensor("z").narrow(1, 40, 8)));
  }

  void fusedLayoutIsRankOrder() {
    const char* script = kScript0;
    const at::Tensor one = run(script, 1).tensor("qkv"), two = run(script, 2).tensor("qkv");
    // tp=1: [q(64) k(32) v(32)]; tp=2: [q0(32) k0(16) v0(16) | q1(32) k1(16) v1(16)].
    QVERIFY(close(two.narrow(1, 0, 32), one.narrow(1, 0, 32)));
    QVERIFY(close(two.narrow(1, 32, 16), one.narrow(1, 64, 16)));
    QVERIFY(close(two.narrow(1, 64, 32), one.narrow(1, 32, 32)));
  }

  void writesMatchTp1_data() {
    QTest::addColumn<QString>("write");
    QTest::newRow("zero a head of o_proj.input over 4 steps")
        << "        model.model.layers[1].self_attn.o_proj.input[:, 3 * 8:4 * 8] = 0\n";
    QTest::newRow("zero a column output")
        << "        model.model.layers[2].mlp.act_fn.output[:] = 0\n";
    QTest::newRow("scale a fused output in place")
        << "        model.model.layers[0].mlp.gate_up_proj.output[0] *= 0.5\n";
  }
  void writesMatchTp1() {
    QFETCH(QString, write);
    const std::string script =
        "with model.trace(\"The capital of France is\", max_tokens=4) as tracer:\n"
        "    rows = list().save()\n"
        "    for _ in tracer.iter[:4]:\n" +
        write.toStdString() +
        "        rows.append(model.logits.clone())\n"
        "    out = tracer.result.save()\n"
        "logits = torch.cat(rows)\n";
    const std::string plain =
        "with model.trace(\"The capital of France is\", max_tokens=4) as tracer:\n"
        "    rows = list().save()\n"
        "    for _ in tracer.iter[:4]:\n"
        "        rows.append(model.logits.clone())\n"
        "logits = torch.cat(rows)\n";
    const Run base = run(plain, 1);
    const Run one = run(script, 1);
    QVERIFY(!close(base.tensor("logits"), one.tensor("logits")));  // the write had an effect
    for (int tp : {2, 4}) {
      if (test::backend() == "nccl" && int(at::getNumGPUs()) < tp) continue;  // a GPU per rank
      const Run many = run(script, tp);
      QVERIFY2(close(one.tensor("logits"), many.tensor("logits")),
               ("tp=" + std::to_string(tp)).c_str());
      QCOMPARE(many.runner->reprOf("out"), one.runner->reprOf("out"));
    }
  }

  void graphSegmentsMatchEagerSteps() {
    const Run graphs = run(kSegments);
    // Appended, not `std::string(...) + kSegments`: g++ 12 reports a false -Warray-bounds there.
    std::string eagerScript = "model = VLLM(\"demo\", enforce_eager=True)\n";
    eagerScript += kSegments;
    const Run eager = run(eagerScript);
    QCOMPARE(graphs.tensor("z").sizes().vec(), (std::vector<int64_t>{10, 64}));  // 5 + 5 steps
    for (const char* name : {"z", "late", "logits"})
      QVERIFY2(close(graphs.tensor(name), eager.tensor(name)), name);
    QCOMPARE(graphs.runner->reprOf("out"), eager.runner->reprOf("out"));
  }

  void readOnlyTraceIsBitIdentical() {
    const Run reads = run(kReads, 2);
    const Run plain = run(
        "with model.trace(\"The capital of France is\"):\n    logits = model.logits.save()\n", 2);
    QVERIFY(at::equal(reads.tensor("logits"), plain.tensor("logits")));
  }

  void stepSelection() {
    QCOMPARE(run(kSteps).lines, (std::vector<std::string>{"[False, False, True, False, False]"}));
    const Run unbounded = run(kScript1);
    QCOMPARE(unbounded.lines, (std::vector<std::string>{"[0, 1, 2, 3, 4, 5]"}));
    const Run stopped = run(kScript2);
    QCOMPARE(stopped.lines, (std::vector<std::string>{"2"}));
    const Run rows = run(kScript3);
    QCOMPARE(rows.lines, (std::vector<std::string>{"torch.Size([10, 151936])"}));
    const Run forced = run(kScript4, 2);
    QCOMPARE(forced.lines,
             (std::vector<std::string>{"[9625, 9625, 9625] ' France France France'"}));
  }

  void idsPastTheTokenizerHaveNoText() {
    const Run r = run(kPastTokenizer, 2);
    QCOMPARE(r.lines,
             (std::vector<std::string>{"[9625, 151691, 9625] ' France France'", "' France'"}));
    const auto& invoke = r.runner->result().traces.at(0).invokes.at(0);
    QCOMPARE(invoke.tokenIds, (std::vector<int64_t>{9625, 151691, 9625}));
    QCOMPARE(invoke.text, std::string(" France<|id 151691|> France"));
  }

  void invokesHaveTheirOwnRows() {
    const Run r = run(kScript5, 2);
    QCOMPARE(r.tensor("a").size(0), 5);
    QCOMPARE(r.tensor("b").size(0), 1);
    const Run alone = run(kScript6, 2);
    QVERIFY(close(r.tensor("b"), alone.tensor("b")));
    QVERIFY(close(r.tensor("lb"), alone.tensor("lb")));  // invoke 1's write left invoke 2 alone
  }

  void patchingAcrossInvokes() {
    const Run r = run(kScript7, 2);
    // Patching the last token's layer-1 hidden state changes invoke 2's logits.
    const Run alone = run("with model.trace(\"Hello\"):\n    lb = model.logits.save()\n", 2);
    QVERIFY(!close(r.tensor("lb"), alone.tensor("lb")));
  }

  void logitLensEqualsModelLogits() {
    const Run r = run(kScript8, 2);
    QVERIFY(close(r.tensor("lens"), r.tensor("logits")));
  }

  void errorsNameTheLineAndTheNextJobWorks_data() {
    QTest::addColumn<QString>("script");
    QTest::addColumn<QString>("message");
    QTest::newRow("syntax") << "model = VLLM(\"demo\")\nx = (1 +\n"
                            << "bad.py:3:1: syntax error";
    // Keywords that would quietly change a result if ignored are refused.
    QTest::newRow("unknown keyword") << "model = VLLM(\"demo\")\nx = sorted([2, 1], cmp=None)\n"
                                     << "sorted() got an unexpected keyword argument 'cmp'";
    QTest::newRow("int base") << "model = VLLM(\"demo\")\nx = int(\"ff\", base=16)\n"
                              << "int() got an unexpected keyword argument 'base'";
    QTest::newRow("int base positional") << "model = VLLM(\"demo\")\nx = int(\"10\", 2)\n"
                                         << "int() takes at most 1 positional argument (2 given)";
    // So do torch functions and tensor methods (x.sum(dims=1) summed everything).
    QTest::newRow("torch function keyword")
        << "model = VLLM(\"demo\")\nx = torch.zeros(3, dtyp=torch.float16)\n"
        << "bad.py:2:1: torch.zeros() got an unexpected keyword argument 'dtyp'; it takes size, "
           "dtype, device";
    QTest::newRow("torch function positional")
        << "model = VLLM(\"demo\")\nx = torch.softmax(torch.ones(3), 0, torch.float32, 1)\n"
        << "bad.py:2:1: torch.softmax() takes at most 3 positional arguments (4 given)";
    QTest::newRow("torch function keyword of another function")
        << "model = VLLM(\"demo\")\nx = torch.cat([torch.ones(2)], keepdim=True)\n"
        << "torch.cat() got an unexpected keyword argument 'keepdim'; it takes tensors, dim";
    QTest::newRow("tensor method keyword")
        << "model = VLLM(\"demo\")\nx = torch.ones(2, 3).sum(dims=1)\n"
        << "bad.py:2:1: Tensor.sum() got an unexpected keyword argument 'dims'; it takes dim, "
           "keepdim, dtype";
    QTest::newRow("tensor method positional")
        << "model = VLLM(\"demo\")\nx = torch.ones(2, 3).topk(1, 0, True, True, 5)\n"
        << "bad.py:2:1: Tensor.topk() takes at most 4 positional arguments (5 given)";
    QTest::newRow("tensor method without keywords")
        << "model = VLLM(\"demo\")\nx = torch.ones(2, 3).t(dtype=torch.float16)\n"
        << "Tensor.t() got an unexpected keyword argument 'dtype'; it takes no keyword "
           "arguments";
    QTest::newRow("tensor method with another keyword")
        << "model = VLLM(\"demo\")\nx = torch.ones(2, 3).view(3, 2, dtype=torch.float16)\n"
        << "Tensor.view() got an unexpected keyword argument 'dtype'; it takes size";
    QTest::newRow("keyword also given by position")
        << "model = VLLM(\"demo\")\nx = torch.ones(2, 3).sum(1, dim=0)\n"
        << "bad.py:2:1: Tensor.sum() got multiple values for argument 'dim'";
    // On a held value (a batched module call's output) the refusal is at its own line, not where
    // the value is first needed.
    QTest::newRow("tensor method of a held value")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    h = "
           "sum(model.model.layers[-1].output)\n    y = model.logits_processor(model.lm_head, "
           "model.model.norm(h))\n    i = y.argmax(dims=-1)\n    i.save()\n"
        << "bad.py:5:5: Tensor.argmax() got an unexpected keyword argument 'dims'; it takes dim, "
           "keepdim";
    // A device other than the CPU or the rank's own is refused with the ones that work; the
    // driver's is the CPU.
    QTest::newRow("device elsewhere")
        << "model = VLLM(\"demo\")\nx = torch.zeros(2, device='cuda:7')\n"
        << "bad.py:2:1: torch.zeros(): device='cuda:7' is not where this script's tensors live: "
           "device= takes 'cpu'";
    QTest::newRow("device not a device")
        << "model = VLLM(\"demo\")\nx = torch.ones(2, device='cuda:x')\n"
        << "torch.ones(): device='cuda:x' is not where this "
           "script's tensors live";
    QTest::newRow("to device elsewhere")
        << "model = VLLM(\"demo\")\nx = torch.zeros(2).to(device='meta')\n"
        << "Tensor.to(): device='meta' is not where this script's tensors live";
    // softmax and cumsum name their dim, as in torch: a default of ours could differ from theirs.
    QTest::newRow("softmax without dim")
        << "model = VLLM(\"demo\")\nx = torch.ones(2, 3).softmax()\n"
        << "bad.py:2:1: Tensor.softmax() is missing its 'dim' (argument 1)";
    QTest::newRow("functional softmax without dim")
        << "model = VLLM(\"demo\")\nx = torch.nn.functional.softmax(torch.ones(3))\n"
        << "torch.nn.functional.softmax() is missing its 'dim' (argument 2)";
    QTest::newRow("cumsum without dim")
        << "model = VLLM(\"demo\")\nx = torch.cumsum(torch.ones(3))\n"
        << "torch.cumsum() is missing its 'dim' (argument 2)";
    QTest::newRow("max of a tensor with a dim")
        << "model = VLLM(\"demo\")\nx = torch.ones(2).max(torch.ones(2), 0)\n"
        << "bad.py:2:1: Tensor.max(other) is elementwise and takes no dim or keepdim";
    QTest::newRow("min of other= with a dim")  // the 0 was once dropped without a word
        << "model = VLLM(\"demo\")\nx = torch.ones(2).min(0, other=torch.ones(2))\n"
        << "bad.py:2:1: Tensor.min(other) is elementwise and takes no dim or keepdim";
    // A function made in a block closes over the block's values, which end with the block.
    QTest::newRow("saved function")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    k = 2\n"
           "    def f(x):\n        return x * k\n    g = f.save()\n"
        << "bad.py:6:5: a function cannot be saved";
    QTest::newRow("saved list of a function")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n"
           "    def f(x):\n        return x\n    fs = [f, print].save()\n"
        << "the saved value 'fs' holds a function, which cannot leave its block";
    // As a dict's key (a function is hashable): a module's .whole and tracer.stop hold the block's
    // mediator, which the driver once called after the trace had freed it.
    QTest::newRow("saved dict keyed by a function")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\") as tracer:\n"
           "    w = model.model.layers[0].mlp.down_proj.whole\n"
           "    x = {w: 1, (tracer.stop,): 2}.save()\n"
        << "the saved value 'x' holds a function, which cannot leave its block";
    QTest::newRow("saved keys view of a function key")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\") as tracer:\n"
           "    ks = {1: 2, tracer.stop: 3}.keys().save()\n"
        << "the saved value 'ks' holds a function, which cannot leave its block";
    QTest::newRow("unbiased and correction")
        << "model = VLLM(\"demo\")\nx = torch.ones(3).var(unbiased=True, correction=0)\n"
        << "bad.py:2:1: Tensor.var() takes unbiased= or correction=, not both: unbiased=False is "
           "correction=0";
    QTest::newRow("print end") << "model = VLLM(\"demo\")\nprint(1, end=\"\")\n"
                               << "print(end=...) other than a newline is not supported";
    QTest::newRow("unknown module") << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    x = "
                                       "model.model.layers[0].self_atn.output.save()\n"
                                    << "bad.py:3:";
    QTest::newRow("nearest names") << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    x = "
                                      "model.model.layers[0].mlp.down_prj.output.save()\n"
                                   << "nearest: down_proj";
    QTest::newRow("already ran past")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    a = "
           "model.model.layers[2].output\n    b = model.model.layers[1].output\n"
        << "bad.py:4:5: already ran past model.model.layers[1].output at step 0";
    QTest::newRow("never comes")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    x = "
           "model.lm_head.output.save()\n"
        << "bad.py:3:5: waited on model.lm_head.output at step 0, but the model never reached it";
    QTest::newRow("step never comes")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\", max_tokens=2) as tracer:\n    for _ "
           "in tracer.iter[:5]:\n        x = model.logits\n"
        << "but the request ended after step 1";
    QTest::newRow("unsaved")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    x = model.logits\nprint(x)\n"
        << "bad.py:4:7: 'x' was assigned inside the trace but not saved";
    QTest::newRow("shape mismatch")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    "
           "model.model.layers[0].mlp.output = torch.zeros(3, 3)\n"
        << "cannot write a value of shape torch.Size([3, 3]) into model.model.layers[0].mlp.output";
    QTest::newRow("unsupported method")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    x = model.logits.frobnicate()\n"
        << "tensors have no attribute 'frobnicate' in trace scripts; supported:";
    QTest::newRow("unsupported statement") << "class A:\n    pass\n"
                                           << "bad.py:1:1: 'class': not supported in trace scripts";
    QTest::newRow("budget")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    while True:\n        pass\n"
        << "instruction budget";
    // 4,000 nested brackets overflowed the parser's stack (fuzz/regressions/trace_parse).
    QTest::newRow("nested too deeply")
        << "x = " + QString(300, '(') + "1" + QString(300, ')') + "\n"
        << "syntax error: expressions and blocks nest more than 200 levels deep here";
    QTest::newRow("import") << "import os\n"
                            << "cannot import 'os'";
    QTest::newRow("unknown VLLM keyword")
        << "model = VLLM(\"demo\", frobnicate=1)\n"
        << "VLLM() got an unknown keyword 'frobnicate'; accepted: "
           "decode_context_parallel_size, device, dispatch, dtype, enable_expert_parallel, "
           "enforce_eager, pipeline_parallel_size, tensor_parallel_size";
    QTest::newRow("unknown trace keyword")
        << "model = VLLM(\"demo\")\nwith model.trace(\"Hi\", beam_width=2):\n    pass\n"
        << "model.trace() got an unknown keyword 'beam_width'";
  }
  void errorsNameTheLineAndTheNextJobWorks() {
    QFETCH(QString, script);
    QFETCH(QString, message);
    std::vector<std::string> lines;
    auto runner = makeRunner(2, &lines);
    const std::string e = errorOf(*runner, script.toStdString());
    QVERIFY2(e.find(message.toStdString()) != std::string::npos, e.c_str());
    runner->run(
        "model = VLLM(\"demo\")\nwith model.trace(\"Hi\"):\n    l = "
        "model.logits.save()\nprint(l.shape)\n",
        "good.py");
    QCOMPARE(lines.back(), std::string("torch.Size([1, 151936])"));
  }

  void ignoredVllmKnobsAreReportedOnce() {
    std::vector<std::string> notes, lines;
    trace::RunOptions o;
    o.modelDirs["demo"] = ensureDemoModel().string();
    o.dtype = DType::F32;
    o.device = test::deviceKind();
    o.out = [&lines](const std::string& l) { lines.push_back(l); };
    o.note = [&notes](const std::string& n) { notes.push_back(n); };
    trace::ScriptRunner runner(o);
    runner.run(
        "model = VLLM(\"demo\", gpu_memory_utilization=0.9, swap_space=4)\n"
        "model = VLLM(\"demo\", gpu_memory_utilization=0.9)\nprint(1)\n",
        "knobs.py");
    QCOMPARE(notes.size(), size_t(2));
    QCOMPARE(notes[0],
             std::string("gpu_memory_utilization has no meaning in ShardScope and is ignored"));
    QCOMPARE(lines, (std::vector<std::string>{"1"}));
  }

  void languageBasics() {
    const Run r = run(kScript9);
    QCOMPARE(r.lines, (std::vector<std::string>{"6 12 2 4 [2, 3] 2 16 3 -4 1024 1e-05",
                                                "16.00 [1, 2, 3, 4] True True (-4, 1) 9 2.5",
                                                "\"it's\" (1,) None 0 True (1, 2) 3.0 13",
                                                "[6, 7, 5, 6] 7 5 1 2 2 1 ['k', 'j'] [1, 2] "
                                                "[('k', 1), ('j', 2)] 2 0 None",
                                                "x-y AB ab 's' True True False a::b::c",
                                                "[1, 2] {'a': (1, 2)}"}));
  }
};

QTEST_GUILESS_MAIN(TestTrace)
#include "tst_trace.moc"
