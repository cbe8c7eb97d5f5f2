// Steps launched ahead of the host and what a PortObserver sees of them, on the random demo
// model: greedy steps nobody watches launched before the host read the step before, traced steps
// run ahead exactly as one at a time, an observer that stops watching, and model.samples visited
// only where a trace waits on it. Split from tst_engine.
#include <QtTest>

#include <cstring>
#include <memory>
#include <vector>

#include "common/demo_engine.h"
#include "common/scoped_switch.h"
#include "common/test_support.h"
#include "common/tp_rows.h"
#include "core/engine/engine.h"
#include "core/engine/generation.h"
#include "core/engine/rank_context.h"
#include "core/error.h"
#include "core/host_tensor_conversion.h"
#include "core/model/port_observer.h"

using namespace shardscope;

namespace {

// Counts what the engine asks of an observer; it watches the forwards of steps before
// `watchedSteps` only.
class CountingObserver : public PortObserver {
 public:
  explicit CountingObserver(int64_t watchedSteps) : watchedSteps_(watchedSteps) {}
  void visit(const Module&, PortRole, PortValue&, const ForwardBatch& batch) override {
    visitsByStep[batch.step] += 1;
  }
  bool watchesForward() const override { return int64_t(endedSteps.size()) < watchedSteps_; }
  void endStep(const ForwardBatch& batch, const std::vector<bool>&) override {
    endedSteps.push_back(batch.step);
  }
  void finish(const std::vector<std::vector<int64_t>>& generated) override {
    finished += 1;
    this->generated = generated;
  }
  std::map<int64_t, int> visitsByStep;
  std::vector<int64_t> endedSteps;
  int finished = 0;
  std::vector<std::vector<int64_t>> generated;

 private:
  int64_t watchedSteps_;
};

// What a trace sees of a generation: layers[1].mlp's output at every step (halved in place at
// step 2), the sampled ids (model.samples), and each step's end with the requests it finished; it
// stops request 1 after step 4 (asked at the end of step 3, as tracer.stop() in that step's code).
class RecordingObserver : public PortObserver {
 public:
  std::vector<at::Tensor> reads, samples;
  std::vector<std::pair<int64_t, std::vector<bool>>> ends;

  void visit(const Module& m, PortRole role, PortValue& v, const ForwardBatch& b) override {
    if (role != PortRole::Output) return;
    if (m.path() == "model.samples") {
      samples.push_back(v.items[0].to(at::kCPU).clone());
      return;
    }
    if (m.path() != "model.model.layers[1].mlp") return;
    reads.push_back(v.items[0].to(at::kCPU).clone());
    if (b.step != 2) return;
    v.items[0].mul_(0.5);
    v.written = true;
  }
  void endStep(const ForwardBatch& b, const std::vector<bool>& finished) override {
    ends.emplace_back(b.step, finished);
    if (b.step == 3) stopped_ = true;
  }
  bool stopRequested(int64_t request) const override { return stopped_ && request == 1; }

 private:
  bool stopped_ = false;
};

// Waits on model.samples at step 1 only and says so, as the trace interleaver does: counts that
// port's visits and passes per step and keeps the ids step 1 showed.
class SamplesWaiter : public PortObserver {
 public:
  std::map<int64_t, int> visits, passes;
  std::vector<int64_t> seen;

  void visit(const Module& m, PortRole role, PortValue& v, const ForwardBatch& b) override {
    if (m.path() != "model.samples") return;
    ++visits[b.step];
    if (b.step != 1) return;
    const at::Tensor ids = v.items[0].to(at::kCPU).contiguous();
    seen.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  }
  bool tellsPortWaits() const override { return true; }
  bool waitsOn(const Module& m, PortRole, int64_t step) const override {
    return step == 1 && m.path() == "model.samples";
  }
  void portPassed(const Module& m, PortRole, const ForwardBatch& b) override {
    if (m.path() == "model.samples") ++passes[b.step];
  }
};

}  // namespace

class TestDecodeAhead : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Greedy steps nobody watches are launched before the host has read the step before, with the
  // chosen ids still on the device (SHARDSCOPE_DECODE_AHEAD=0: one step at a time). Both give the
  // same ids, finish reasons and step counts, also when one request of a batch stops early (its
  // row of the step launched ahead is dropped), at its first token or later.
  void decodeAheadEqualsStepByStep_data() {
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("stopFrom");  // the earliest token a request stops at; -1: none stops
    QTest::newRow("tp=1") << 1 << -1;
    QTest::newRow("tp=1, a request stops at its 1st token") << 1 << 0;
    QTest::newRow("tp=1, a request stops midway") << 1 << 1;
    QTest::newRow("tp=2, a request stops midway") << 2 << 1;
  }
  void decodeAheadEqualsStepByStep() {
    QFETCH(int, tp);
    QFETCH(int, stopFrom);
    auto engine = test::demoEngine(tp);
    auto r = test::demoRequest(*engine,
                               {"The capital of France is", "Hi", "Tensor parallelism shards"}, 7);
    const auto run = [&](bool ahead) {
      const test::ScopedSwitch decodeAhead("SHARDSCOPE_DECODE_AHEAD", ahead ? "1" : "0");
      return Engine::generateResult(engine->generate(r));
    };
    // The stopping request and token: an id it first generates there, at stopFrom or later
    // (before its last token), that no other request generates.
    size_t stopper = 0, stopIndex = 0;
    if (stopFrom >= 0) {
      const GenerateResult free = run(false);
      const auto unique = [&](size_t q, size_t k) {
        const auto& ids = free.outputs[q].tokenIds;
        if (size_t(std::find(ids.begin(), ids.end(), ids[k]) - ids.begin()) != k) return false;
        for (size_t i = 0; i < 3; ++i) {
          const auto& other = free.outputs[i].tokenIds;
          if (i != q && std::find(other.begin(), other.end(), ids[k]) != other.end()) return false;
        }
        return true;
      };
      const auto find = [&] {
        for (stopper = 0; stopper < 3; ++stopper) {
          for (stopIndex = size_t(stopFrom); stopIndex + 1 < 7; ++stopIndex) {
            if (unique(stopper, stopIndex)) return true;
          }
        }
        return false;
      };
      QVERIFY2(find(), "no request generates an id that can stop it early");
      r.sampling.stopTokenIds = {free.outputs[stopper].tokenIds[stopIndex]};
    }
    const GenerateResult stepByStep = run(false), ahead = run(true);
    QCOMPARE(stepByStep.aheadSteps, int64_t(0));
    QVERIFY2(ahead.aheadSteps > 0, "no step was launched ahead: the case is not what it claims");
    QCOMPARE(ahead.steps, stepByStep.steps);
    QCOMPARE(ahead.steps, int64_t(7));
    for (size_t i = 0; i < 3; ++i) {
      QCOMPARE(ahead.outputs[i].tokenIds, stepByStep.outputs[i].tokenIds);
      QCOMPARE(ahead.outputs[i].finishReason, stepByStep.outputs[i].finishReason);
      const bool stops = stopFrom >= 0 && i == stopper;
      QCOMPARE(ahead.outputs[i].tokenIds.size(), stops ? stopIndex + 1 : size_t(7));
      QCOMPARE(ahead.outputs[i].finishReason, std::string(stops ? "stop" : "length"));
    }
    if (stopFrom < 0) return;
    // Alone, the stopping request leaves the step launched after its last one with no row.
    r.prompts = {r.prompts[stopper]};
    const GenerateResult aloneStepByStep = run(false), alone = run(true);
    QCOMPARE(alone.steps, int64_t(stopIndex + 1));
    QCOMPARE(alone.steps, aloneStepByStep.steps);
    QCOMPARE(alone.outputs[0].tokenIds, aloneStepByStep.outputs[0].tokenIds);
    QCOMPARE(alone.outputs[0].finishReason, std::string("stop"));
  }

  // A trace whose requests end only at max_tokens or at its own stop runs its steps ahead of the
  // host too, and sees exactly what it sees one step at a time: the same values at its ports,
  // the same samples, the same step ends with the same finished requests, the same tokens.
  void tracedDecodeAheadEqualsStepByStep_data() { test::addTpRows(); }
  void tracedDecodeAheadEqualsStepByStep() {
    QFETCH(int, tp);
    auto engine = test::demoEngine(tp);
    const auto r =
        test::demoRequest(*engine, {"The capital of France is", "Hi", "Tensor parallelism"}, 7);
    struct Seen {
      GenerateResult result;
      RecordingObserver trace;  // rank 0's
    };
    const auto run = [&](bool ahead) {
      const test::ScopedSwitch decodeAhead("SHARDSCOPE_DECODE_AHEAD", ahead ? "1" : "0");
      std::vector<std::unique_ptr<RecordingObserver>> observers;
      for (int i = 0; i < tp; ++i) observers.push_back(std::make_unique<RecordingObserver>());
      Seen seen;
      engine
          ->submit([&](RankContext& ctx) {
            runGeneration(ctx, r, ctx.fillsResult() ? &seen.result : nullptr,
                          observers[size_t(ctx.rank)].get());
          })
          .wait();
      seen.trace = *observers[0];
      return seen;
    };
    const Seen stepByStep = run(false), ahead = run(true);
    QCOMPARE(stepByStep.result.aheadSteps, int64_t(0));
    QVERIFY2(ahead.result.aheadSteps > 0, "no traced step was launched ahead");
    QCOMPARE(ahead.result.steps, stepByStep.result.steps);
    QCOMPARE(ahead.result.steps, int64_t(7));
    for (size_t q = 0; q < 3; ++q) {
      QCOMPARE(ahead.result.outputs[q].tokenIds, stepByStep.result.outputs[q].tokenIds);
      QCOMPARE(ahead.result.outputs[q].finishReason, stepByStep.result.outputs[q].finishReason);
    }
    QCOMPARE(ahead.result.outputs[1].finishReason, std::string("stop"));
    QCOMPARE(ahead.result.outputs[1].tokenIds.size(), size_t(5));  // steps 0 to 4
    QCOMPARE(ahead.result.outputs[0].finishReason, std::string("length"));
    QCOMPARE(ahead.trace.ends, stepByStep.trace.ends);
    QCOMPARE(ahead.trace.ends.size(), size_t(7));
    QCOMPARE(ahead.trace.reads.size(), stepByStep.trace.reads.size());
    for (size_t i = 0; i < ahead.trace.reads.size(); ++i)
      QVERIFY(at::equal(ahead.trace.reads[i], stepByStep.trace.reads[i]));
    QCOMPARE(ahead.trace.samples.size(), size_t(7));
    QCOMPARE(ahead.trace.samples.size(), stepByStep.trace.samples.size());
    for (size_t i = 0; i < ahead.trace.samples.size(); ++i)
      QVERIFY(at::equal(ahead.trace.samples[i], stepByStep.trace.samples[i]));
  }

  // An observer that stops watching (a trace whose blocks have all ended) gets no more port
  // visits, yet every step's end and the finish, and the ids stay those of a plain generation.
  void unwatchedStepsRunPlain_data() {
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("watchedSteps");
    QTest::newRow("tp=1, none watched") << 1 << 0;
    QTest::newRow("tp=1, the first two watched") << 1 << 2;
    QTest::newRow("tp=2, the first watched") << 2 << 1;
  }
  void unwatchedStepsRunPlain() {
    QFETCH(int, tp);
    QFETCH(int, watchedSteps);
    auto engine = test::demoEngine(tp);
    const auto r = test::demoRequest(*engine, {"The capital of France is", "Hi"}, 5);
    const GenerateResult plain = Engine::generateResult(engine->generate(r));
    std::vector<std::unique_ptr<CountingObserver>> observers;
    for (int i = 0; i < tp; ++i)
      observers.push_back(std::make_unique<CountingObserver>(watchedSteps));
    GenerateResult observed;
    engine
        ->submit([&](RankContext& ctx) {
          runGeneration(ctx, r, ctx.fillsResult() ? &observed : nullptr,
                        observers[size_t(ctx.rank)].get());
        })
        .wait();
    for (size_t q = 0; q < 2; ++q)
      QCOMPARE(observed.outputs[q].tokenIds, plain.outputs[q].tokenIds);
    for (const auto& o : observers) {
      QCOMPARE(o->endedSteps, (std::vector<int64_t>{0, 1, 2, 3, 4}));
      QCOMPARE(o->finished, 1);
      QCOMPARE(o->generated.size(), size_t(2));
      QCOMPARE(o->generated[0], plain.outputs[0].tokenIds);
      for (int64_t step = 0; step < 5; ++step) {
        const int visits = o->visitsByStep.count(step) ? o->visitsByStep.at(step) : 0;
        // A watched step visits every port of the demo model's modules: dozens.
        if (step < watchedSteps) {
          QVERIFY2(visits > 20, ("step " + std::to_string(step) + " was watched but visited " +
                                 std::to_string(visits) + " ports")
                                    .c_str());
        } else {
          QCOMPARE(visits, 0);
        }
      }
    }
  }

  // A sampled step at tp=1 keeps its ids on the host unless the trace waits on model.samples:
  // the port is reported passed (no device round trip), and visited where it is waited on.
  void samplesVisitedOnlyWhereWaitedOn() {
    auto engine = test::demoEngine(1);
    const auto r = test::demoRequest(*engine, {"The capital of France is", "Hi"}, 4, 0.8, 7);
    const GenerateResult plain = Engine::generateResult(engine->generate(r));
    SamplesWaiter observer;
    GenerateResult observed;
    engine->submit([&](RankContext& ctx) { runGeneration(ctx, r, &observed, &observer); }).wait();
    for (size_t q = 0; q < 2; ++q)
      QCOMPARE(observed.outputs[q].tokenIds, plain.outputs[q].tokenIds);
    for (int64_t step = 0; step < 4; ++step) {
      const int visits = observer.visits.count(step) ? observer.visits.at(step) : 0;
      const int passes = observer.passes.count(step) ? observer.passes.at(step) : 0;
      QCOMPARE(visits, step == 1 ? 1 : 0);
      QCOMPARE(passes, step == 1 ? 0 : 1);
    }
    // Step 1 samples each request's second generated token.
    const std::vector<int64_t> second{plain.outputs[0].tokenIds[1], plain.outputs[1].tokenIds[1]};
    QCOMPARE(observer.seen, second);
  }
};

QTEST_GUILESS_MAIN(TestDecodeAhead)
#include "tst_decode_ahead.moc"
