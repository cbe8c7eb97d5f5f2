// Row-wise module calls held and run batched (DeferredCalls, issue 15's logit lens): calls of one
// module with alike arguments run as one call over their stacked rows, across port waits, and each
// gets its own rows back; a call's arguments are copied when it is held; ops on a held value made
// before an in-place edit do not see the edit; a failing call names its line; the block's end
// computes what was saved. On the demo model a logit lens gives what it gives with calls run one
// at a time (SHARDSCOPE_BATCH_CALLS=0), at tp=1, 2 and 4, and written with nnsight's
// `for layer in model.model.layers` (len() and iteration over a list of modules).
#include <QtTest>

#include <ATen/ATen.h>

#include <atomic>

#include "common/scoped_switch.h"
#include "common/script_run.h"
#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/engine/rank_context.h"
#include "core/model/model_source.h"
#include "core/model/module_call.h"
#include "core/parallel/shard_spec.h"
#include "core/trace/deferred_calls.h"
#include "core/trace/driver_values.h"
#include "core/trace/interleaver.h"
#include "core/trace/interpreter.h"
#include "core/trace/script_runner.h"

using namespace shardscope;

namespace {

// The demo model in fp32 on the test's device; tp > 0 overrides the script's tensor parallelism.
trace::RunOptions demoInF32(int tp = 0) {
  trace::RunOptions o;
  o.modelDirs["demo"] = ensureDemoModel().string();
  o.tp = tp;
  o.device = test::deviceKind();
  o.dtype = DType::F32;
  return o;
}

// A row-wise module: probe(x, shift) = x * 2 + shift, summed over the group (so a call pairs a
// collective across ranks, as the logits processor's all-gather does). It counts its calls.
class RowProbe : public Module {
 public:
  explicit RowProbe(std::string name) : Module(std::move(name), nullptr) {
    setPorts(ShardSpec::whole(), ShardSpec::whole());
  }
  const char* kind() const override { return "RowProbe"; }
  bool callableWithWhole() const override { return true; }
  bool callRowWise() const override { return true; }
  std::vector<at::Tensor> callWhole(const ModuleCall& c) const override {
    const int64_t shift = c.integer(1, "shift");
    if (shift == 7) throw ModuleCallError(c.callee() + "(): shift 7 is refused");
    ++calls;
    rows += c.tensor(0, "x").size(0);
    at::Tensor t = c.tensor(0, "x") * 2 + double(shift);
    c.batch().group.allReduceSum(t);
    return {t};
  }
  mutable std::atomic<int> calls{0}, rows{0};
};

struct Outcome {
  std::string error;
  std::map<std::string, at::Tensor> saved;
  std::map<std::string, at::Tensor> onDevice;  // as the interleaver hands them over (CPU: as is)
  int calls = 0, rows = 0;
};

// Runs `source` on rank threads with `probe`'s output port visited first, then `later`'s
// (x = arange(6) as [2, 3] at both); rank 0's saved values and calls are returned.
// `kept` is captured as the driver's `kept`; with `driverScope` each rank gets its copy of it, as a
// trace does (rankCopies), else `kept` itself.
Outcome runProbe(int tp, const std::string& source, const trace::Value& kept = nullptr,
                 const trace::Environment* driverScope = nullptr) {
  EngineOptions o;
  o.tp = tp;
  o.dtype = DType::F32;
  o.backend = test::groupBackend();
  o.device = test::deviceKind();
  Engine engine(o);
  auto program = trace::parseProgram(source, "held.py");
  std::vector<trace::InvokeSpec> invokes{
      {program->body,
       {{"probe", trace::moduleProxy("probe")}, {"later", trace::moduleProxy("later")}},
       ""}};
  if (kept) invokes[0].captured["kept"] = kept;
  invokes[0].driverScope = driverScope;
  Outcome out;
  engine
      .submit([&](RankContext& ctx) {
        RowProbe probe("probe"), later("later");
        trace::Interleaver il(ctx, program, driverScope ? trace::rankCopies(invokes) : invokes,
                              nullptr, 1000000);
        il.registerModule(probe);
        il.registerModule(later);
        il.start();
        ForwardBatch batch{ctx.group, at::arange(2, at::kLong), {{0, 2, 0, nullptr, 0}}, &il, 0, {},
                           {}};
        const at::Tensor x = at::arange(6, at::kFloat).view({2, 3}).to(ctx.device);
        try {
          PortValue a = PortValue::single(x.clone());
          batch.visit(probe, PortRole::Output, a);
          PortValue b = PortValue::single(x.clone());
          batch.visit(later, PortRole::Output, b);
        } catch (const std::exception& e) {
          if (ctx.rank == 0) out.error = e.what();
          return;
        }
        if (ctx.rank != 0) return;
        for (const auto& [name, value] : il.output().saved) {
          out.saved[name] = value->tensor.to(at::kCPU);
          out.onDevice[name] = value->tensor;
        }
        out.calls = probe.calls;
        out.rows = probe.rows;
      })
      .wait();
  return out;
}

// Two ranks where the backend allows (NCCL needs a GPU a rank), else one.
int probeTp() {
  return test::backend() == "nccl" && at::getNumGPUs() < 2 ? 1 : 2;
}

// Sets SHARDSCOPE_BATCH_CALLS for its lifetime.
class BatchCalls {
 public:
  explicit BatchCalls(bool on) : switch_("SHARDSCOPE_BATCH_CALLS", on ? "1" : "0") {}

 private:
  test::ScopedSwitch switch_;
};

const char* kHeld =
    "a = probe(probe.output, 1)\n"  // held
    "a_top = a[-1].argmax()\n"      // an op on a held value, deferred too
    "b_in = probe.output * 1\n"
    "c = probe(b_in, 1)\n"                 // the same group
    "b_in[:] = 100\n"                      // the held call copied its argument
    "d = probe(probe.output[:, :2], 1)\n"  // other rows: a group of its own
    "y = later.output\n"                   // held calls wait with the block
    "e = probe(y, 1)\n"                    // joins a's group
    "outs = torch.stack([a, c, e]).save()\n"
    "top = a_top.save()\n"
    "dd = d.save()\n";  // computed at the block's end

// A lens over the demo model's layers, the nnsight way.
std::string lensScript() {
  return "with model.trace(\"The Eiffel Tower is in the city of\"):\n"
         "    tops = []\n"
         "    rows = []\n"
         "    for i in range(4):\n"
         "        o = model.model.layers[i].output\n"
         "        logits = model.logits_processor(model.lm_head, model.model.norm(o[0] + o[1]))\n"
         "        tops.append(logits[-1].argmax())\n"
         "        rows.append(logits[-1:])\n"
         "    lens = torch.stack(tops).save()\n"
         "    last = torch.cat(rows).save()\n"
         "    mlp = model.model.layers[3].mlp(o[0]).save()\n"
         "    top = model.logits.argmax(-1).save()\n";
}

}  // namespace

class TestDeferredCalls : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void alikeCallsRunAsOne_data() {
    QTest::addColumn<int>("tp");
    QTest::addColumn<bool>("batched");
    QTest::newRow("tp1 batched") << 1 << true;
    QTest::newRow("tp2 batched") << 2 << true;
    QTest::newRow("tp1 one at a time") << 1 << false;
    QTest::newRow("tp2 one at a time") << 2 << false;
  }
  void alikeCallsRunAsOne() {
    QFETCH(int, tp);
    QFETCH(bool, batched);
    if (test::backend() == "nccl" && int(at::getNumGPUs()) < tp)
      QSKIP("NCCL needs one GPU per rank");
    const BatchCalls mode(batched);
    const Outcome r = runProbe(tp, kHeld);
    QVERIFY2(r.error.empty(), r.error.c_str());
    const at::Tensor x = at::arange(6, at::kFloat).view({2, 3});
    const at::Tensor y = (x * 2 + 1) * tp;
    QVERIFY(at::equal(r.saved.at("outs"), at::stack({y, y, y})));
    QVERIFY(at::equal(r.saved.at("top"), y[-1].argmax()));
    QVERIFY(at::equal(r.saved.at("dd"), (x.narrow(1, 0, 2) * 2 + 1) * tp));
    // Four calls of 2 rows: batched, a, c and e as one call of 6 rows and d alone.
    QCOMPARE(r.calls, batched ? 2 : 4);
    QCOMPARE(r.rows, 8);
  }

  void opsBeforeAnEditDoNotSeeIt() {
    const Outcome r = runProbe(probeTp(),
                               "l = probe(probe.output, 0)\n"
                               "m = l.argmax(-1)\n"
                               "l[:, 0] = 1000\n"
                               "top = m.save()\n"
                               "edited = l.save()\n");
    QVERIFY2(r.error.empty(), r.error.c_str());
    QVERIFY(at::equal(r.saved.at("top"), at::full({2}, 2, at::kLong)));
    QCOMPARE(r.saved.at("edited")[0][0].item<float>(), 1000.f);
  }

  void argumentsAreCopiedUnlessOnlyTheCallHasThem() {
    // `src.contiguous()` is a temporary that holds src's own tensor: the call must copy it. A
    // temporary nobody else holds is passed as it is; both see the values of the call's line.
    const Outcome r = runProbe(probeTp(),
                               "src = probe.output * 1\n"
                               "shared = probe(src.contiguous(), 1)\n"
                               "fresh = probe(probe.output * 1, 1)\n"
                               "src[:] = 100\n"
                               "a = shared.save()\n"
                               "b = fresh.save()\n");
    QVERIFY2(r.error.empty(), r.error.c_str());
    const at::Tensor y = (at::arange(6, at::kFloat).view({2, 3}) * 2 + 1) * probeTp();
    QVERIFY(at::equal(r.saved.at("a"), y));
    QVERIFY(at::equal(r.saved.at("b"), y));
  }

  void alikeOpsOnBatchedOutputsRunOnceAsViews() {
    // a and b ran as one call: `[-1]` and `.argmax(-1)` on each run once on the stacked output.
    // The subscripts stay views of each call's own output (an edit through one reaches it), and
    // the arg-maxes were taken before that edit.
    const Outcome r = runProbe(probeTp(),
                               "a = probe(probe.output, 1)\n"
                               "b = probe(probe.output * 1, 1)\n"
                               "ra = a[-1]\n"
                               "rb = b[-1]\n"
                               "ma = a.argmax(dim=1)\n"
                               "mb = b.argmax(dim=1)\n"
                               "lens_a = a[0].argmax().save()\n"  // the lens's form: no dim
                               "lens_b = b[0].argmax().save()\n"
                               "ra[:] = 0\n"
                               "ta = a.save()\n"
                               "tb = b.save()\n"
                               "top_a = ma.save()\n"
                               "top_b = mb.save()\n"
                               "last_b = rb.float().save()\n"
                               "total = b.sum().save()\n");
    QVERIFY2(r.error.empty(), r.error.c_str());
    const at::Tensor y = (at::arange(6, at::kFloat).view({2, 3}) * 2 + 1) * probeTp();
    at::Tensor edited = y.clone();
    edited[-1].zero_();
    QVERIFY(at::equal(r.saved.at("ta"), edited));
    QVERIFY(at::equal(r.saved.at("tb"), y));
    QVERIFY(at::equal(r.saved.at("top_a"), at::full({2}, 2, at::kLong)));
    QVERIFY(at::equal(r.saved.at("top_b"), at::full({2}, 2, at::kLong)));
    QVERIFY(at::equal(r.saved.at("last_b"), y[-1]));

    QCOMPARE(r.saved.at("lens_a").item<int64_t>(), 2);
    QCOMPARE(r.saved.at("lens_b").item<int64_t>(), 2);
    // One arg-max for both: their results share a storage (a stack of two). Only on the CPU: the
    // interleaver hands CUDA values over as host copies.
    if (test::device() == "cpu") {
      const auto shared = [&](const char* a, const char* b) {
        return r.onDevice.at(a).storage().is_alias_of(r.onDevice.at(b).storage());
      };
      QVERIFY(shared("top_a", "top_b"));
      QVERIFY(shared("ta", "tb"));
      QVERIFY(shared("lens_a", "lens_b"));
    }
    QCOMPARE(r.saved.at("total").item<float>(), y.sum().item<float>());
  }

  // Ops on held values with keywords (run alone: only ops without arguments or with one int dim
  // are stacked) mean what they mean on a tensor, and softmax and cumsum name their dim. A
  // negative dim before each output's first dimension fails as it does alone, where on the stack
  // it reduced across the calls.
  void heldOpsMeanWhatTheyMeanAlone() {
    const Outcome r = runProbe(probeTp(),
                               "a = probe(probe.output, 1)\n"
                               "b = probe(probe.output * 1, 1)\n"
                               "na = a.argmax(dim=None).save()\n"
                               "nb = b.argmax(dim=None).save()\n"
                               "sa = a.sum(dtype=torch.float64).save()\n"
                               "sb = b.sum(dtype=torch.float64).save()\n"
                               "ca = a.cumsum(dim=0).save()\n"
                               "cb = b.cumsum(dim=0).save()\n"
                               "pa = a.softmax(-1).save()\n"
                               "pb = b.softmax(-1).save()\n");
    QVERIFY2(r.error.empty(), r.error.c_str());
    const at::Tensor y = (at::arange(6, at::kFloat).view({2, 3}) * 2 + 1) * probeTp();
    for (const char* n : {"na", "nb"}) QCOMPARE(r.saved.at(n).item<int64_t>(), int64_t(5));
    for (const char* n : {"sa", "sb"}) {
      QCOMPARE(r.saved.at(n).scalar_type(), at::kDouble);
      QCOMPARE(r.saved.at(n).item<double>(), y.sum().item<double>());
    }
    for (const char* n : {"ca", "cb"}) QVERIFY(at::equal(r.saved.at(n), y.cumsum(0)));
    for (const char* n : {"pa", "pb"}) QVERIFY(at::allclose(r.saved.at(n), y.softmax(-1)));
    const Outcome missing = runProbe(1, "a = probe(probe.output, 1)\nc = a.cumsum()\n");
    QVERIFY2(missing.error.find("Tensor.cumsum() is missing its 'dim'") != std::string::npos,
             missing.error.c_str());
    const Outcome across = runProbe(1,
                                    "a = probe(probe.output, 1)\n"
                                    "b = probe(probe.output * 1, 1)\n"
                                    "x = a.sum(-3)\ny = b.sum(-3)\n"
                                    "s = x.save()\n");
    QVERIFY2(across.error.find("Dimension out of range") != std::string::npos,
             across.error.c_str());
    const Outcome last = runProbe(1,
                                  "a = probe(probe.output, 1)\n"
                                  "b = probe(probe.output * 1, 1)\n"
                                  "x = a.sum(-2).save()\ny = b.sum(-2).save()\n");
    QVERIFY2(last.error.empty(), last.error.c_str());
    const at::Tensor one = at::arange(6, at::kFloat).view({2, 3}) * 2 + 1;
    for (const char* n : {"x", "y"}) QVERIFY(at::equal(last.saved.at(n), one.sum(-2)));
  }

  // A function defined in a block holds the block's scope, which holds the function: the scope is
  // emptied when the block ends, so both are freed with what the block captured.
  void aBlocksScopeIsFreedWithTheFunctionsInIt() {
    const trace::Value kept = trace::list({trace::integer(1)});
    const Outcome r = runProbe(1,
                               "def twice(x):\n    return x * len(kept)\n"
                               "y = twice(probe.output).save()\n",
                               kept);
    QVERIFY2(r.error.empty(), r.error.c_str());
    QVERIFY(r.saved.count("y"));
    QCOMPARE(kept.use_count(), 1L);
  }

  // A list made in a block that holds itself is freed when the block ends, with what it holds (two
  // dicts holding each other too, and a list that held itself in a call now over, which no scope
  // reaches); a container the block was given, held outside it as well, is left whole, the cycle
  // the block made in it included.
  void aBlocksCyclesAreFreedAndWhatItWasGivenIsKept() {
    const trace::Value item = trace::list({trace::integer(7)});
    const trace::Value kept = trace::list({item});
    const Outcome r = runProbe(1,
                               "a = [kept[0]]\na.append(a)\n"
                               "d = {'k': kept[0]}\ne = {'d': d}\nd['e'] = e\n"
                               "def made(v):\n    x = [v]\n    x.append(x)\n    return 0\n"
                               "made(kept[0])\n"
                               "kept.append(kept)\n"
                               "y = (probe.output * 2).save()\n",
                               kept);
    QVERIFY2(r.error.empty(), r.error.c_str());
    QVERIFY(r.saved.count("y"));
    QCOMPARE(item.use_count(), 2L);  // here and in `kept`
    QCOMPARE(kept->items.size(), size_t(2));
    QVERIFY(kept->items[0] == item && kept->items[1] == kept);
    kept->items.clear();  // the cycle the block left in the test's own list
  }

  // A function called in a block that defines an inner function leaves a cycle (the call's scope
  // holds the inner function, which closes over it): freed when the block ends, with what it held;
  // an inner function the block handed to a list held outside it stays whole and still works.
  void aCallsInnerFunctionsAreFreedUnlessHeldOutside() {
    const trace::Value kept = trace::list({trace::integer(7)});
    const Outcome r = runProbe(1,
                               "def make(k, spare=[0]):\n"
                               "    def get(d=[k]):\n        return k\n    return get\n"
                               "for i in range(5):\n    make(kept)\n"
                               "kept.append(make(kept[0]))\n"
                               "y = (probe.output * 2).save()\n",
                               kept);
    QVERIFY2(r.error.empty(), r.error.c_str());
    QVERIFY(r.saved.count("y"));
    QCOMPARE(kept.use_count(), 1L);  // the five calls' scopes held it
    QCOMPARE(kept->items.size(), size_t(2));
    const trace::Value get = kept->items[1];
    QCOMPARE(get->type, trace::Type::Function);
    const trace::Value* k = get->function->closure->find("k");
    QVERIFY(k && (*k)->intValue == 7);
    kept->items.pop_back();
  }

  // A function the driver made in a call is copied to each rank with the call's scope, which holds
  // the copy that closes over it: the copies are freed when the block ends (the driver's marker
  // string, shared by the copied scopes, is held by the driver's scope and the test alone after).
  void aDriverCallsScopeCopiedToEachRankIsFreed() {
    auto driver = std::make_shared<trace::Environment>(trace::builtinScope());
    auto call = std::make_shared<trace::Environment>(driver);
    const auto def = trace::parseProgram("def get():\n    return len(marker)\n", "driver.py");
    auto f = std::make_shared<trace::FunctionDef>();
    f->name = "get";
    f->body = def->body.at(0)->body;
    f->closure = call;
    const trace::Value get = std::make_shared<trace::Object>();
    get->type = trace::Type::Function;
    get->function = f;
    const trace::Value marker = trace::string("four");
    call->set("marker", marker);
    call->set("get", get);
    const Outcome r =
        runProbe(probeTp(), "y = (probe.output * kept()).save()\n", get, driver.get());
    QVERIFY2(r.error.empty(), r.error.c_str());
    QVERIFY(at::equal(r.saved.at("y"), at::arange(6, at::kFloat).view({2, 3}) * 4));
    QCOMPARE(marker.use_count(), 2L);
    QCOMPARE(get.use_count(), 2L);
    call->vars().clear();  // the test's own cycle
  }

  void aStackedOpThatFailsFailsAsAlone() {
    // Run on the stack, `[5]` would index the second dimension's 3 columns; alone it is out of
    // range for the 2 rows of each output, and that is what the script is told.
    const Outcome r = runProbe(1,
                               "a = probe(probe.output, 1)\n"
                               "b = probe(probe.output * 1, 1)\n"
                               "x = a[2]\n"
                               "y = b[2]\n"
                               "z = (x + 1).save()\n");
    QVERIFY2(
        r.error.find("index 2 is out of bounds for dimension 0 with size 2") != std::string::npos,
        r.error.c_str());
    QVERIFY2(r.error.find("in a subscript on line 3") != std::string::npos, r.error.c_str());
  }

  void aFailingCallNamesItsLine() {
    const Outcome r = runProbe(probeTp(),
                               "ok = probe(probe.output, 1)\n"
                               "bad = probe(probe.output, 7)\n"
                               "y = later.output\n"
                               "total = (bad + 1).save()\n");
    QVERIFY2(r.error.find("shift 7 is refused") != std::string::npos, r.error.c_str());
    QVERIFY2(r.error.find("the call probe(...) on line 2") != std::string::npos, r.error.c_str());
    QVERIFY2(r.error.find(":4:") != std::string::npos, r.error.c_str());  // where it was needed
  }

  void theBlockEndRunsWhatWasSaved() {
    const Outcome r = runProbe(1, "s = probe(probe.output, 2)[0].sum().save()\n");
    QVERIFY2(r.error.empty(), r.error.c_str());
    QCOMPARE(r.saved.at("s").item<float>(), float((0 + 1 + 2) * 2 + 3 * 2));
    QCOMPARE(r.calls, 1);
  }

  void heldOnlyWhenRowWiseWithRows() {
    RowProbe probe("probe");
    std::vector<CallArg> rows(2), vector(2), ragged(3);
    rows[0].tensor = at::zeros({2, 3});
    rows[1].integer = 1;
    vector[0].tensor = at::zeros({3});
    vector[1].integer = 1;
    ragged[0].tensor = at::zeros({2, 3});
    ragged[1].tensor = at::zeros({3, 3});
    ragged[2].integer = 1;
    QVERIFY(trace::DeferredCalls::holdable(probe, rows));
    QVERIFY(!trace::DeferredCalls::holdable(probe, vector));
    QVERIFY(!trace::DeferredCalls::holdable(probe, ragged));
  }

  void aCallHeldPastItsBlockSaysSo() {
    RowProbe probe("probe");
    std::function<trace::StackedRow()> output;
    {
      trace::DeferredCalls calls(
          [](const Module&, std::vector<CallArg> args, int64_t) { return args[0].tensor; });
      std::vector<CallArg> args(2);
      args[0].tensor = at::zeros({2, 3});
      args[1].integer = 1;
      output = calls.hold(probe, std::move(args), 0);
    }
    try {
      output();
      QFAIL("a call held past its block ran");
    } catch (const std::exception& e) {
      QVERIFY2(std::string(e.what()).find("ended before this call ran") != std::string::npos,
               e.what());
    }
  }

  void aSavedListWithAPortViewKeepsItsHeldValues() {
    // Saving a list that views model memory copies it (a snapshot) in the block; its held values
    // must stay the objects the block's end computes, or the driver finds them uncomputed.
    const trace::RunOptions o = demoInF32();
    const auto held = [&](bool batched) {
      const BatchCalls mode(batched);
      return test::runBody(o, "demo",
                           "with model.trace(\"Hello\", max_tokens=2) as tracer:\n"
                           "    with tracer.invoke(\"Hello\"):\n"
                           "        held = []\n"
                           "        for i in tracer.iter[:]:\n"
                           "            o = model.model.layers[0].output[0]\n"
                           "            held.append(o)\n"
                           "            held.append(model.model.layers[0].mlp(o))\n"
                           "        held = held.save()\n"
                           "view, called = held[2:]\n",
                           "held.py");
    };
    const test::ScriptRun batched = held(true), single = held(false);
    QVERIFY2(batched.lines.empty(), batched.lines.empty() ? "" : batched.lines.back().c_str());
    for (const char* name : {"view", "called"})
      QVERIFY2(test::closeToScale(batched.tensor(name), single.tensor(name)), name);
  }

  // A list's items computed later (held module calls) are computed when a search compares them:
  // `in`, count and index saw the held item, not its value, and found nothing.
  void aListSearchComputesItsHeldItems() {
    const trace::RunOptions o = demoInF32();
    const test::ScriptRun r =
        test::runBody(o, "demo",
                      "with model.trace(\"Hello\"):\n"
                      "    o = model.model.layers[1].output\n"
                      "    h = model.model.norm(o[0] + o[1])\n"
                      "    tops = []\n"
                      "    tops.append(model.logits_processor(model.lm_head, h)[-1].argmax())\n"
                      "    tops.append(model.logits_processor(model.lm_head, h)[-1].argmax())\n"
                      "    top = model.logits_processor(model.lm_head, h)[-1].argmax().item()\n"
                      "    print(top in tops, tops.count(top), tops.index(torch.tensor(top)), "
                      "[top] == tops[:1])\n",
                      "search.py");
    QCOMPARE(r.lines.size(), size_t(1));
    QCOMPARE(r.lines[0], std::string("True 2 0 True"));
  }

  void layersHaveALengthAndIterate() {
    // nnsight's idioms: `len(model.model.layers)` and `for layer in model.model.layers`, in the
    // driver and in a block; a module that is not a list has no len().
    const trace::RunOptions o = demoInF32();
    const test::ScriptRun r =
        test::runBody(o, "demo",
                      "for layer in model.model.layers:\n"
                      "    last = str(layer)\n"
                      "print(len(model.model.layers), last)\n"
                      "with model.trace(\"Hello\"):\n"
                      "    tops = []\n"
                      "    for layer in model.model.layers:\n"
                      "        o = layer.output\n"
                      "        h = model.model.norm(o[0] + o[1])\n"
                      "        tops.append(model.logits_processor(model.lm_head, h)[-1].argmax())\n"
                      "    print(len(model.model.layers), len(tops))\n"
                      "    lens = torch.stack(tops).save()\n"
                      "    top = model.logits.argmax(-1).save()\n"
                      "print(len(model.model))\n",
                      "layers.py");
    QCOMPARE(r.lines.size(), size_t(3));
    QCOMPARE(r.lines[0], std::string("4 <module model.model.layers[3]>"));
    QCOMPARE(r.lines[1], std::string("4 4"));
    QVERIFY2(r.lines[2].find("model.model is not a list of modules, so it has no len()") !=
                 std::string::npos,
             r.lines[2].c_str());
    QCOMPARE(r.tensor("lens")[3].item<int64_t>(), r.tensor("top")[-1].item<int64_t>());
  }

  void logitLensEqualsOneCallAtATime_data() {
    QTest::addColumn<int>("tp");
    QTest::newRow("tp1") << 1;
    QTest::newRow("tp2") << 2;
    QTest::newRow("tp4") << 4;
  }
  void logitLensEqualsOneCallAtATime() {
    QFETCH(int, tp);
    if (test::backend() == "nccl" && int(at::getNumGPUs()) < tp)
      QSKIP("NCCL needs one GPU per rank");
    trace::RunOptions o = demoInF32(tp);
    o.backend = test::groupBackend();
    const auto lens = [&](bool batched) {
      const BatchCalls mode(batched);
      return test::runBody(o, "demo", lensScript(), "lens.py");
    };
    const test::ScriptRun batched = lens(true), single = lens(false);
    for (const auto* r : {&batched, &single}) {
      QVERIFY2(r->lines.empty(), r->lines.empty() ? "" : r->lines.back().c_str());
    }
    QVERIFY(at::equal(batched.tensor("lens"), single.tensor("lens")));
    for (const char* name : {"last", "mlp"})
      QVERIFY2(test::closeToScale(batched.tensor(name), single.tensor(name)), name);
    // The last layer's lens is the model's own head.
    QCOMPARE(batched.tensor("lens")[3].item<int64_t>(), batched.tensor("top")[-1].item<int64_t>());
  }
};

QTEST_GUILESS_MAIN(TestDeferredCalls)
#include "tst_deferred_calls.moc"
