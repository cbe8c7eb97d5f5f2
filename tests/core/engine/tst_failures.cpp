// Failures end jobs, never the engine (SPEC section 5, issue 14): a rank that throws, a rank whose
// collective never arrives and a NaN in one rank's shard, injected at one layer of one step
// (FailureInjection), each end the job with one clear error on every rank within 2 s (the stuck
// rank within the watchdog time, set short here), and the next job gives the same text as a
// generation that never failed. On the demo model at tp=2, over the local group in CI and over
// NCCL with one GPU per rank on the GPU machine (SHARDSCOPE_TEST_DEVICE=cuda
// SHARDSCOPE_TEST_BACKEND=nccl), where the steps replay CUDA graphs.
#include <QtTest>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "common/tp_rows.h"
#include "core/engine/engine.h"
#include "core/engine/generation.h"
#include "core/engine/rank_context.h"
#include "core/error.h"
#include "core/host_tensor_conversion.h"
#include "core/model/model_source.h"
#include "core/model/port_observer.h"
#include "core/model/tokenizer.h"
#include "core/parallel/collective_board.h"

using namespace shardscope;

Q_DECLARE_METATYPE(FailureInjection::Kind)

namespace {

constexpr double kWatchdogSeconds = 1.0;

std::unique_ptr<Engine> engine(int tp) {
  EngineOptions o;
  o.tp = tp;
  o.device = test::deviceKind();
  o.dtype = DType::F32;
  o.backend = test::groupBackend();
  o.collectiveTimeoutSeconds = kWatchdogSeconds;
  return std::make_unique<Engine>(o);
}

bool enoughDevices(int tp) {
  return test::backend() != "nccl" || int(at::getNumGPUs()) >= tp;
}

GenerateRequest request(const Engine& e, int64_t maxTokens) {
  GenerateRequest r;
  r.prompts = {e.tokenizer()->encode("The capital of France is"),
               e.tokenizer()->encode("Tensor parallelism shards")};
  r.sampling.maxTokens = maxTokens;
  r.sampling.ignoreEos = true;
  return r;
}

// Every rank's outcome of one generation job: "" or the rank's error.
struct RankOutcomes {
  std::mutex mutex;
  std::vector<std::string> errors;
};

JobHandle generateRecordingRanks(Engine& e, const GenerateRequest& r,
                                 std::shared_ptr<RankOutcomes> outcomes, int tp) {
  outcomes->errors.assign(size_t(tp), "did not run");
  return e.submit([r, outcomes](RankContext& ctx) {
    try {
      runGeneration(ctx, r, nullptr);
      std::lock_guard lock(outcomes->mutex);
      outcomes->errors[size_t(ctx.rank)].clear();
    } catch (const std::exception& ex) {
      std::lock_guard lock(outcomes->mutex);
      outcomes->errors[size_t(ctx.rank)] = ex.what();
      throw;
    }
  });
}

// Qwen2.5-1.5B's attention widths (12 query heads, 2 KV heads, head_dim 128, qkv bias) in four
// layers: bf16 prefill attention of this shape goes to cuDNN on an H100/H200.
constexpr const char* kQwen25Config = R"({"architectures": ["Qwen2ForCausalLM"],
  "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 512,
  "num_hidden_layers": 4, "num_attention_heads": 12, "num_key_value_heads": 2,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";

// What a trace touching model.model.layers[1] asks of a step: layer 1 runs eagerly, so the
// layers before and after it replay graphs of their own (layer 0 alone, then 2..3).
class NeedsLayer1 : public PortObserver {
 public:
  void visit(const Module&, PortRole, PortValue&, const ForwardBatch&) override {}
  int64_t firstLayerNeeded(int64_t step, int64_t numLayers) const override {
    if (step != step_) {
      step_ = step;
      passedLayer1_ = false;
    }
    return passedLayer1_ ? numLayers : 1;
  }
  void layersReplayed(int64_t begin, int64_t end, const ForwardBatch&) override {
    if (end == 1) passedLayer1_ = true;  // layer 1 runs next, eagerly
  }

 private:
  mutable int64_t step_ = -1;
  mutable bool passedLayer1_ = false;
};

std::vector<std::vector<int64_t>> ids(const GenerateResult& r) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& o : r.outputs) out.push_back(o.tokenIds);
  return out;
}

}  // namespace

class TestFailures : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  // Issue 14, defect 1: the first graphs of an engine are a one-layer segment (layer 0), then
  // layer 1 eagerly, then layers 2..3 (bf16, CUDA graphs on): same ids and logits as eager
  // steps. (This engine-level form passed on two H200s even with one warm-up,
  // SHARDSCOPE_GRAPH_WARMUPS=1; the trace below is the repro's own script.)
  void firstGraphsAroundLayer1InBf16_data() { test::addTpRows(); }
  void firstGraphsAroundLayer1InBf16() {
    QFETCH(int, tp);
    if (test::device() != "cuda") QSKIP("CUDA graphs need the GPU (SHARDSCOPE_TEST_DEVICE=cuda)");
    if (tp > 1 && test::backend() != "nccl")
      QSKIP("graphs at tp > 1 need NCCL (SHARDSCOPE_TEST_BACKEND=nccl)");
    if (!enoughDevices(tp)) QSKIP("NCCL needs one GPU per rank");
    test::TempDir dir;
    std::ofstream(dir.path() / "config.json") << kQwen25Config;
    EngineOptions o;
    o.model = "random:" + (dir.path() / "config.json").string() + "@1";
    o.tp = tp;
    o.device = DeviceKind::Cuda;
    o.dtype = DType::BF16;
    o.backend = test::groupBackend();
    o.collectiveTimeoutSeconds = 20;  // a failure here once hung forever
    GenerateRequest r;
    r.prompts = {{785, 6722, 315, 9625, 374, 279, 1156, 6364, 4128, 315}};
    r.sampling.maxTokens = 3;
    r.sampling.ignoreEos = true;
    r.returnLogits = true;
    const auto runOn = [&r](Engine& e) {
      auto result = std::make_shared<GenerateResult>();
      JobHandle h = e.submit([&r, result](RankContext& ctx) {
        NeedsLayer1 observer;
        runGeneration(ctx, r, ctx.rank == 0 ? result.get() : nullptr, &observer);
      });
      h.wait();
      return *result;
    };
    Engine graphs(o);
    const GenerateResult a = runOn(graphs);
    o.cudaGraphs = false;
    Engine eager(o);
    const GenerateResult b = runOn(eager);
    QVERIFY2(a.graphLayers == 3 * 3, qPrintable(QString::number(a.graphLayers)));  // 0, 2..3
    QCOMPARE(a.outputs[0].tokenIds, b.outputs[0].tokenIds);
    const at::Tensor x = fromHostFloat(a.outputs[0].logits), y = fromHostFloat(b.outputs[0].logits);
    QVERIFY2(test::closeToScale(x, y, 2e-2), test::closeToScaleMessage(x, y).c_str());
  }

  void injectedFailureEndsTheJobOnEveryRank_data() {
    QTest::addColumn<FailureInjection::Kind>("kind");
    QTest::addColumn<int>("rank");
    QTest::addColumn<int>("layer");
    QTest::addColumn<int>("step");
    QTest::addColumn<QString>("expected");
    using K = FailureInjection::Kind;
    QTest::newRow("rank 1 throws at layer 1 of the prefill")
        << K::Throw << 1 << 1 << 0 << "injected failure (throw on rank 1 at layer 1 of step 0)";
    QTest::newRow("rank 0 throws at layer 0 of a decode step")
        << K::Throw << 0 << 0 << 2 << "injected failure (throw on rank 0 at layer 0 of step 2)";
    QTest::newRow("rank 1 throws at the last layer")
        << K::Throw << 1 << 3 << 1 << "injected failure (throw on rank 1";
    QTest::newRow("NaN in rank 1's shard at layer 2")
        << K::NaN << 1 << 2 << 1 << "the logits of step 1 hold NaN for request(s) 0:";
    QTest::newRow("rank 1's collective never arrives")
        << K::Stuck << 1 << 1 << 0
        << "(model.model.layers[1].self_attn.o_proj at step 0) timed out after 1000 ms on rank 0";
    QTest::newRow("rank 0 stuck in a decode step")
        << K::Stuck << 0 << 2 << 3
        << "(model.model.layers[2].self_attn.o_proj at step 3) timed out after 1000 ms on rank 1";
  }
  void injectedFailureEndsTheJobOnEveryRank() {
    QFETCH(FailureInjection::Kind, kind);
    QFETCH(int, rank);
    QFETCH(int, layer);
    QFETCH(int, step);
    QFETCH(QString, expected);
    const int tp = 2;
    if (!enoughDevices(tp)) QSKIP("NCCL needs one GPU per rank");
    auto e = engine(tp);
    const GenerateRequest r = request(*e, 5);
    const auto reference = ids(Engine::generateResult(e->generate(r)));

    e->injectFailure({kind, rank, layer, step});
    auto outcomes = std::make_shared<RankOutcomes>();
    const auto started = std::chrono::steady_clock::now();
    JobHandle bad = generateRecordingRanks(*e, r, outcomes, tp);
    std::string error;
    try {
      bad.wait();
    } catch (const Error& ex) {
      error = ex.what();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    QVERIFY2(!error.empty(), "the job should have failed");
    QVERIFY2(error.find(expected.toStdString()) != std::string::npos, error.c_str());
    const double limit = (kind == FailureInjection::Kind::Stuck ? kWatchdogSeconds : 0.0) + 2.0;
    QVERIFY2(seconds < limit, qPrintable(QString("ended after %1 s").arg(seconds)));
    // Every rank left the job with an error: the cause, or the abort it caused.
    for (int k = 0; k < tp; ++k) {
      const std::string& mine = outcomes->errors[size_t(k)];
      QVERIFY2(!mine.empty() && mine != "did not run",
               qPrintable(QString("rank %1: '%2'").arg(k).arg(mine.c_str())));
      QVERIFY2(mine.find(expected.toStdString()) != std::string::npos,
               qPrintable(QString("rank %1: %2").arg(k).arg(mine.c_str())));
    }
    if (kind == FailureInjection::Kind::Stuck) {
      // The watchdog's message says what every rank was doing.
      QVERIFY2(
          error.find("rank " + std::to_string(rank) + ": not in a collective") != std::string::npos,
          error.c_str());
      QVERIFY2(error.find("rank " + std::to_string(1 - rank) + ": waiting in allReduceSum") !=
                   std::string::npos,
               error.c_str());
    }
    // The engine serves the next jobs as if nothing had happened.
    for (int i = 0; i < 2; ++i) QCOMPARE(ids(Engine::generateResult(e->generate(r))), reference);
  }

  // A collective that one rank skips (a rank-order mismatch) is caught by the watchdog on the
  // rank left waiting, with the collective's site in the message; the next job works.
  void watchdogEndsACollectiveThatNeverCompletes() {
    const int tp = 2;
    if (!enoughDevices(tp)) QSKIP("NCCL needs one GPU per rank");
    auto e = engine(tp);
    const auto started = std::chrono::steady_clock::now();
    JobHandle bad = e->submit([](RankContext& ctx) {
      at::Tensor t = at::ones({4}).to(ctx.device);
      ctx.group.allReduceSum(t);
      if (ctx.rank == 0) {
        static const std::string where = "a test's second all-reduce";
        CollectiveSite site(where);
        ctx.group.allReduceSum(t);  // rank 1 never comes
      } else {
        while (!ctx.group.aborted()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ctx.group.throwIfAborted();
      }
    });
    try {
      bad.wait();
      QFAIL("the job should have failed");
    } catch (const CollectiveTimeout& ex) {
      const std::string m = ex.what();
      QVERIFY2(m.find("allReduceSum #") != std::string::npos, m.c_str());
      QVERIFY2(m.find("(a test's second all-reduce) timed out") != std::string::npos, m.c_str());
      QVERIFY2(m.find("rank 1: not in a collective") != std::string::npos, m.c_str());
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    QVERIFY2(seconds < kWatchdogSeconds + 2.0, qPrintable(QString::number(seconds)));
    const auto ok = Engine::generateResult(e->generate(request(*e, 3)));
    QCOMPARE(ok.outputs[0].tokenIds.size(), size_t(3));
  }

  void badInjectionsAreRefused() {
    auto e = engine(1);
    const FailureInjection noSuchRank{FailureInjection::Kind::Throw, 1, 0, 0};
    const FailureInjection aloneStuck{FailureInjection::Kind::Stuck, 0, 0, 0};
    QVERIFY_THROWS_EXCEPTION(Error, e->injectFailure(noSuchRank));
    QVERIFY_THROWS_EXCEPTION(Error, e->injectFailure(aloneStuck));
    const FailureInjection f = FailureInjection::parse("nan:1:3:0");
    QCOMPARE(int(f.kind), int(FailureInjection::Kind::NaN));
    QCOMPARE(f.rank, 1);
    QCOMPARE(f.layer, int64_t(3));
    for (const char* bad : {"", "nan", "boom:1:3:0", "nan:1:3", "nan:x:3:0", "throw:-1:0:0"})
      QVERIFY_THROWS_EXCEPTION(Error, FailureInjection::parse(bad));
  }
};

QTEST_GUILESS_MAIN(TestFailures)
#include "tst_failures.moc"
