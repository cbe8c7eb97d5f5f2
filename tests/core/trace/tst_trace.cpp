// The trace language and interleaver on the demo model (8 query heads, 4 KV heads, head_dim 8,
// hidden 32) at tp=1, 2 and 4 through local process groups: reads at every port kind equal
// tp=1's, writes are re-sharded, read-only traces leave the model bit-identical, steps and
// invokes behave as TRACE.md says, and every script error names its line and is followed by a
// job that works.
#include <QtTest>

#include <ATen/ATen.h>

#include <cstring>

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

std::unique_ptr<trace::ScriptRunner> makeRunner(int tp, std::vector<std::string>* lines) {
  trace::RunOptions o;
  o.modelDirs["demo"] = ensureDemoModel().string();
  o.tp = tp;
  o.device = test::device();
  o.dtype = "f32";
  o.backend = test::backend();
  o.out = [lines](const std::string& l) { lines->push_back(l); };
  o.note = [](const std::string&) {};
  return std::make_unique<trace::ScriptRunner>(o);
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

std::string errorOf(trace::ScriptRunner& runner, const std::string& script) {
  try {
    runner.run(script, "bad.py");
  } catch (const trace::ScriptError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a ScriptError: ") + e.what();
  }
  return "no error";
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
    "1)\n";

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
    const Run eager = run(std::string("model = VLLM(\"demo\", enforce_eager=True)\n") + kSegments);
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

  void syntheticPartialSumPortDividesWrites();
  void moduleUnknownToTheTraceLayerDeclaresMethodsAndCalls();
  void segmentedReplayAsksForThePortsItWaitsOn();

  void errorsNameTheLineAndTheNextJobWorks_data() {
    QTest::addColumn<QString>("script");
    QTest::addColumn<QString>("message");
    QTest::newRow("syntax") << "model = VLLM(\"demo\")\nx = (1 +\n"
                            << "bad.py:3:1: syntax error";
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
    o.dtype = "f32";
    o.device = test::device();
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
                                                "\"it's\" (1,) None 0 True (1, 2) 3.0 13"}));
  }
};

namespace {

// A port whose ranks hold partial sums, as vLLM leaves fused MoE experts.
class PartialSumProbe : public Module {
 public:
  PartialSumProbe() : Module("probe", nullptr) {
    setPorts({"", ShardKind::PartialSum}, {"", ShardKind::PartialSum});
  }
  const char* kind() const override { return "PartialSumProbe"; }
};

}  // namespace

void TestTrace::syntheticPartialSumPortDividesWrites() {
  EngineOptions o;
  o.tp = 4;
  o.dtype = "f32";
  o.backend = "local";
  o.device = test::device();
  Engine engine(o);
  for (bool write : {false, true}) {
    const std::string source =
        write ? "seen = probe.output.clone().save()\nprobe.output[:] = seen * 3\n"
              : "seen = probe.output.clone().save()\n";
    auto program = trace::parseProgram(source, "partial.py");
    std::vector<trace::InvokeSpec> invokes{
        {program->body, {{"probe", trace::moduleProxy("probe")}}, ""}};
    auto seen = std::make_shared<at::Tensor>();
    auto locals = std::make_shared<std::vector<at::Tensor>>(4);
    auto reduced = std::make_shared<at::Tensor>();
    engine
        .submit([=](RankContext& ctx) {
          PartialSumProbe probe;
          trace::Interleaver il(ctx, program, invokes, nullptr, 1000000);
          il.registerModule(probe);
          il.start();
          ForwardBatch batch{
              ctx.group, at::arange(2, at::kLong), {{0, 2, 0, nullptr, 0}}, &il, 0, {}, {}};
          const at::Tensor partial =
              (at::arange(6, at::kFloat).view({2, 3}) * (ctx.rank + 1)).to(ctx.device);
          PortValue v = PortValue::single(partial.clone());
          batch.visit(probe, PortRole::Output, v);
          (*locals)[ctx.rank] = v.items[0].to(at::kCPU);
          at::Tensor sum = v.items[0].clone();
          ctx.group.allReduceSum(sum);  // the block's own reduce
          if (ctx.rank == 0) {
            *reduced = sum.to(at::kCPU);
            *seen = il.output().saved.at("seen")->tensor;
          }
        })
        .wait();
    const at::Tensor whole = at::arange(6, at::kFloat).view({2, 3}) * 10;  // 1 + 2 + 3 + 4
    QVERIFY(at::equal(*seen, whole));
    if (write) {
      QVERIFY(test::closeToScale(*reduced, whole * 3));  // summed exactly once
      QVERIFY(test::closeToScale((*locals)[2], whole * 3 / 4));
    } else {
      QVERIFY(at::equal((*locals)[2], at::arange(6, at::kFloat).view({2, 3}) * 3));  // untouched
    }
  }
}

namespace {

// A module the trace layer has never heard of: it declares a method returning two tensors, a
// method returning a view, and a call with a whole tensor, the way an MoE block would.
class ScaleProbe : public Module {
 public:
  ScaleProbe() : Module("scaler", nullptr) {
    setPorts(ShardSpec::whole(), ShardSpec::whole());
    addMethod({"top", "top(x, k)", [](const ModuleCall& c) {
                 auto [values, ids] = c.tensor(0, "x").topk(c.integer(1, "k"), -1);
                 return std::vector<at::Tensor>{values, ids};
               }});
    addMethod({"column", "column(x, i)", [](const ModuleCall& c) {
                 return std::vector<at::Tensor>{c.tensor(0, "x").narrow(-1, c.integer(1, "i"), 1)};
               }});
  }
  const char* kind() const override { return "ScaleProbe"; }
  bool callableWithWhole() const override { return true; }
  std::vector<at::Tensor> callWhole(const ModuleCall& c) const override {
    // Sums over the group so that the call's batch is seen to carry the rank's process group.
    at::Tensor t = c.tensor(0, "x") * 2 + double(c.integer(1, "shift"));
    c.batch().group.allReduceSum(t);
    return {t};
  }
};

}  // namespace

void TestTrace::moduleUnknownToTheTraceLayerDeclaresMethodsAndCalls() {
  EngineOptions o;
  o.tp = 2;
  o.dtype = "f32";
  o.backend = "local";
  o.device = test::device();
  Engine engine(o);
  const auto runScript = [&](const std::string& source, at::Tensor* after,
                             std::map<std::string, at::Tensor>* saved) {
    auto program = trace::parseProgram(source, "probe.py");
    std::vector<trace::InvokeSpec> invokes{
        {program->body, {{"scaler", trace::moduleProxy("scaler")}}, ""}};
    std::string error;
    engine
        .submit([&](RankContext& ctx) {
          ScaleProbe probe;
          trace::Interleaver il(ctx, program, invokes, nullptr, 1000000);
          il.registerModule(probe);
          il.start();
          ForwardBatch batch{
              ctx.group, at::arange(2, at::kLong), {{0, 2, 0, nullptr, 0}}, &il, 0, {}, {}};
          PortValue v = PortValue::single(at::arange(6, at::kFloat).view({2, 3}).to(ctx.device));
          try {
            batch.visit(probe, PortRole::Output, v);
          } catch (const std::exception& e) {
            if (ctx.rank == 0) error = e.what();
            return;
          }
          if (ctx.rank != 0) return;
          *after = v.items[0].to(at::kCPU);
          for (const auto& [name, value] : il.output().saved) (*saved)[name] = value->tensor;
        })
        .wait();
    return error;
  };
  at::Tensor after;
  std::map<std::string, at::Tensor> saved;
  const std::string error = runScript(
      "x = scaler.output\n"
      "w, ids = scaler.top(x, 2)\n"
      "top_w = w.save()\n"
      "top_ids = ids.save()\n"
      "called = scaler(x, 1).clone().save()\n"
      "scaler.column(x, 1)[:] = 0\n",
      &after, &saved);
  QVERIFY2(error.empty(), error.c_str());
  const at::Tensor x = at::arange(6, at::kFloat).view({2, 3});
  QVERIFY(at::equal(saved.at("top_w"), at::tensor({2.0f, 1.0f, 5.0f, 4.0f}).view({2, 2})));
  QVERIFY(at::equal(saved.at("top_ids"), at::tensor({2, 1, 2, 1}, at::kLong).view({2, 2})));
  QVERIFY(at::equal(saved.at("called"), (x * 2 + 1) * 2));  // summed over both ranks
  at::Tensor zeroed = x.clone();
  zeroed.select(1, 1).zero_();
  QVERIFY(at::equal(after, zeroed));  // the method's view wrote into the port

  const std::string missing = runScript("w = scaler.top(scaler.output)\n", &after, &saved);
  QVERIFY2(missing.find("scaler.top(): argument 2 (k) must be an int") != std::string::npos,
           missing.c_str());
  const std::string keyword = runScript("w = scaler(scaler.output, shift=1)\n", &after, &saved);
  QVERIFY2(keyword.find("positional arguments only") != std::string::npos, keyword.c_str());
}

QTEST_GUILESS_MAIN(TestTrace)
#include "tst_trace.moc"

namespace {

// Two whole-valued ports in model order: `first`, then `second`.
class OrderedProbe : public Module {
 public:
  explicit OrderedProbe(std::string name) : Module(std::move(name), nullptr) {
    setPorts(ShardSpec::whole(), ShardSpec::whole());
  }
  const char* kind() const override { return "OrderedProbe"; }
};

}  // namespace

// What a graph replayer that cuts a layer at its ports asks of the interleaver (SegmentedLayer on
// the GPU; here on the CPU, as the replayer would call it): which ports a block waits on now, that
// a read leaves PortValue::written unset and a write sets it, and that a port the replay passed
// unvisited counts as run past, so a later read of it fails as it does in an eager layer.
void TestTrace::segmentedReplayAsksForThePortsItWaitsOn() {
  EngineOptions o;
  o.dtype = "f32";
  o.backend = "local";
  o.device = test::device();
  Engine engine(o);
  const auto runScript = [&](const std::string& source, bool passFirst) {
    auto program = trace::parseProgram(source, "cuts.py");
    std::vector<trace::InvokeSpec> invokes{
        {program->body,
         {{"first", trace::moduleProxy("first")}, {"second", trace::moduleProxy("second")}},
         ""}};
    std::vector<std::string> notes;
    engine
        .submit([&](RankContext& ctx) {
          OrderedProbe first("first"), second("second");
          trace::Interleaver il(ctx, program, invokes, nullptr, 1000000);
          il.registerModule(first);
          il.registerModule(second);
          il.start();
          ForwardBatch batch{
              ctx.group, at::arange(2, at::kLong), {{0, 2, 0, nullptr, 0}}, &il, 0, {}, {}};
          const auto waits = [&](const Module& m) {
            return std::string(m.name()) + (il.waitsOn(m, PortRole::Output, 0) ? "+" : "-");
          };
          if (!il.tellsPortWaits()) notes.push_back("cannot tell its port waits");
          notes.push_back(waits(first) + waits(second));
          PortValue a = PortValue::single(at::ones({2, 3}).to(ctx.device));
          if (passFirst) {
            il.portPassed(first, PortRole::Output, batch);
          } else {
            il.visit(first, PortRole::Output, a, batch);
            notes.push_back(std::string("first written ") + (a.written ? "yes" : "no"));
          }
          notes.push_back(waits(first) + waits(second));
          PortValue b = PortValue::single(at::ones({2, 3}).to(ctx.device));
          try {
            il.visit(second, PortRole::Output, b, batch);
          } catch (const std::exception& e) {
            notes.push_back(e.what());
            return;
          }
          notes.push_back(std::string("second written ") + (b.written ? "yes" : "no") + " sum " +
                          std::to_string(b.items[0].sum().item<double>()));
        })
        .wait();
    return notes;
  };
  const auto inOrder = runScript("a = first.output.clone().save()\nsecond.output[:] = 0\n", false);
  QCOMPARE(inOrder, (std::vector<std::string>{"first+second-", "first written no", "first-second+",
                                              "second written yes sum 0.000000"}));
  const auto late = runScript("b = second.output.save()\na = first.output.save()\n", true);
  QCOMPARE(late.size(), size_t(3));
  QCOMPARE(late[0], std::string("first-second+"));
  QVERIFY2(late[2].find("already ran past first.output at step 0") != std::string::npos,
           late[2].c_str());
}
