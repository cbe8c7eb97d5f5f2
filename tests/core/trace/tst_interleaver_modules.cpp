// The interleaver with modules the trace layer has never heard of, driven by hand on the ranks of
// a local group (no model forward): a port whose ranks hold partial sums is summed on read and a
// write is divided back; a module declares methods and a whole-tensor call through its own
// interface; and what a graph replayer cutting a layer at its ports asks of the interleaver.
// Split from tst_trace.
#include <QtTest>

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/engine/rank_context.h"
#include "core/model/module_call.h"
#include "core/model/port_observer.h"
#include "core/trace/interleaver.h"
#include "core/trace/script_runner.h"

using namespace shardscope;

namespace {

// The demo model's engine at `tp`, f32, a local group on the test device; the tests drive its
// ranks by hand through Engine::submit.
EngineOptions engineOptions(int tp) {
  EngineOptions o;
  o.tp = tp;
  o.dtype = DType::F32;
  o.backend = GroupBackend::Local;
  o.device = test::deviceKind();
  return o;
}

}  // namespace

class TestInterleaverModules : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void syntheticPartialSumPortDividesWrites();
  void moduleUnknownToTheTraceLayerDeclaresMethodsAndCalls();
  void segmentedReplayAsksForThePortsItWaitsOn();
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

void TestInterleaverModules::syntheticPartialSumPortDividesWrites() {
  Engine engine(engineOptions(4));
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

void TestInterleaverModules::moduleUnknownToTheTraceLayerDeclaresMethodsAndCalls() {
  Engine engine(engineOptions(2));
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
void TestInterleaverModules::segmentedReplayAsksForThePortsItWaitsOn() {
  Engine engine(engineOptions(1));
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

QTEST_GUILESS_MAIN(TestInterleaverModules)
#include "tst_interleaver_modules.moc"
