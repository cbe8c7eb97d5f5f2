// The engine on the random test model (ensureDemoModel(): Qwen3 architecture, real Qwen3 tokenizer,
// whose LM head has rows past the tokenizer's ids): identical greedy and
// seeded sampled text at tp=1, 2 and 4; sampling over every row, ids past the tokenizer included;
// batching; stop tokens; progress and cancellation; a job that fails on one rank, then jobs that
// succeed.
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

#include "common/golden_engine.h"
#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/engine/decode_state.h"
#include "core/engine/engine.h"
#include "core/engine/generation.h"
#include "core/engine/intra_op_threads.h"
#include "core/engine/rank_context.h"
#include "core/error.h"
#include "core/host_tensor_conversion.h"
#include "core/model/model_source.h"
#include "core/model/port_observer.h"
#include "core/model/tokenizer.h"
#include "core/parallel/local_group.h"

using namespace shardscope;

namespace {

std::unique_ptr<Engine> demoEngine(int tp) {
  EngineOptions o;
  o.model = ensureDemoModel().string();
  o.tp = tp;
  o.device = test::device();
  o.dtype = "f32";
  o.backend = "local";
  return std::make_unique<Engine>(o);
}

GenerateRequest request(const Engine& e, std::vector<std::string> prompts, int64_t maxTokens,
                        double temperature = 0.0, uint64_t seed = 0) {
  GenerateRequest r;
  for (const auto& p : prompts) r.prompts.push_back(e.tokenizer()->encode(p));
  r.sampling.maxTokens = maxTokens;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.sampling.topK = temperature > 0 ? 50 : 0;
  r.sampling.topP = temperature > 0 ? 0.95 : 1.0;
  r.sampling.ignoreEos = true;
  return r;
}

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

class TestEngine : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void sameTextAtEveryTp_data() {
    QTest::addColumn<double>("temperature");
    QTest::newRow("greedy") << 0.0;
    QTest::newRow("seeded sampling") << 0.8;
  }
  void sameTextAtEveryTp() {
    QFETCH(double, temperature);
    std::vector<std::vector<int64_t>> outputs;
    for (int tp : {1, 2, 4}) {
      auto engine = demoEngine(tp);
      const auto r = request(*engine, {"The capital of France is", "Tensor parallelism shards"}, 12,
                             temperature, 42);
      const GenerateResult result = Engine::generateResult(engine->generate(r));
      QCOMPARE(result.outputs.size(), size_t(2));
      outputs.push_back(result.outputs[0].tokenIds);
      outputs.push_back(result.outputs[1].tokenIds);
      QCOMPARE(result.outputs[0].tokenIds.size(), size_t(12));
    }
    QCOMPARE(outputs[2], outputs[0]);
    QCOMPARE(outputs[3], outputs[1]);
    QCOMPARE(outputs[4], outputs[0]);
    QCOMPARE(outputs[5], outputs[1]);
  }

  // On the GPU every step (the 3-prompt prefill and 23 decode steps) replays CUDA graphs, kept
  // across generations: the same ids and logits as eager steps, for prompts of different lengths.
  void cudaGraphsMatchEagerSteps() {
    if (test::device() != "cuda") QSKIP("CUDA graphs need the GPU (SHARDSCOPE_TEST_DEVICE=cuda)");
    EngineOptions o;
    o.device = "cuda";
    o.dtype = "f32";
    Engine graphs(o);
    o.cudaGraphs = false;
    Engine eager(o);
    auto r = request(
        graphs, {"The capital of France is", "Hi", "A much longer third prompt with more tokens"},
        24);
    r.returnLogits = true;
    const auto a = Engine::generateResult(graphs.generate(r));
    const auto again = Engine::generateResult(graphs.generate(r));
    const auto b = Engine::generateResult(eager.generate(r));
    QVERIFY2(a.graphLayers == 24 * graphs.info().numLayers,
             qPrintable(QString::number(a.graphLayers)));
    QCOMPARE(b.graphLayers, int64_t(0));
    for (size_t i = 0; i < 3; ++i) {
      QCOMPARE(a.outputs[i].tokenIds, b.outputs[i].tokenIds);
      QCOMPARE(again.outputs[i].tokenIds, a.outputs[i].tokenIds);
      const at::Tensor x = fromHostFloat(a.outputs[i].logits),
                       y = fromHostFloat(b.outputs[i].logits);
      QVERIFY2(test::closeToScale(x, y), test::closeToScaleMessage(x, y).c_str());
      QVERIFY(at::equal(fromHostFloat(again.outputs[i].logits), x));
    }
  }

  // Unobserved steps of a few rows fold each layer's norms and SwiGLU into its GEMVs; with
  // SHARDSCOPE_FUSED_DECODE=0 the modules run one by one. Both give the same ids and bit-identical
  // logits, eagerly and from CUDA graphs (recorded under each setting), in fp32 and bf16.
  void fusedLayersEqualModulesOneByOne_data() {
    QTest::addColumn<QString>("dtype");
    QTest::addColumn<bool>("graphs");
    QTest::newRow("f32 eager") << "f32" << false;
    QTest::newRow("f32 graphs") << "f32" << true;
    QTest::newRow("bf16 graphs") << "bf16" << true;
  }
  void fusedLayersEqualModulesOneByOne() {
    if (test::device() != "cuda") QSKIP("the fused kernels run on the GPU only");
    QFETCH(QString, dtype);
    QFETCH(bool, graphs);
    EngineOptions o;
    o.device = "cuda";
    o.dtype = dtype.toStdString();
    o.cudaGraphs = graphs;
    const auto run = [&](bool fused) {
      if (fused) {
        qunsetenv("SHARDSCOPE_FUSED_DECODE");
      } else {
        qputenv("SHARDSCOPE_FUSED_DECODE", "0");
      }
      Engine engine(o);
      auto r = request(engine, {"The capital of France is", "Hi", "Tensor parallelism shards"}, 8);
      r.returnLogits = true;
      GenerateResult result = Engine::generateResult(engine.generate(r));
      qunsetenv("SHARDSCOPE_FUSED_DECODE");
      return result;
    };
    const GenerateResult modules = run(false), fusedRun = run(true);
    for (size_t i = 0; i < 3; ++i) {
      QCOMPARE(fusedRun.outputs[i].tokenIds, modules.outputs[i].tokenIds);
      QVERIFY(at::equal(fromHostFloat(fusedRun.outputs[i].logits),
                        fromHostFloat(modules.outputs[i].logits)));
    }
  }

  // Each of the decode step's kernel fusions that a switch turns off gives the same ids and
  // logits bit for bit with it on, from CUDA graphs: attention with the cache write
  // (SHARDSCOPE_FUSED_ATTENTION) on the demo model and on the tiny Qwen3-MoE, whose
  // post-attention norm also runs inside the router's kernel (SHARDSCOPE_FUSED_MOE_NORM) and whose
  // single request's experts take the one-token kernels (SHARDSCOPE_MOE_ONE_TOKEN).
  void decodeFusionsKeepTheBits_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("dtype");
    QTest::addColumn<QString>("variable");
    QTest::addColumn<int>("requests");
    for (const char* dtype : {"f32", "bf16"}) {
      QTest::addRow("demo %s attention", dtype)
          << "demo" << dtype << "SHARDSCOPE_FUSED_ATTENTION" << 3;
      QTest::addRow("moe %s attention", dtype)
          << "qwen3-moe-tiny" << dtype << "SHARDSCOPE_FUSED_ATTENTION" << 3;
      QTest::addRow("moe %s norm in router", dtype)
          << "qwen3-moe-tiny" << dtype << "SHARDSCOPE_FUSED_MOE_NORM" << 3;
      QTest::addRow("moe %s one-token experts", dtype)
          << "qwen3-moe-tiny" << dtype << "SHARDSCOPE_MOE_ONE_TOKEN" << 1;
    }
  }
  void decodeFusionsKeepTheBits() {
    if (test::device() != "cuda") QSKIP("the fused kernels run on the GPU only");
    QFETCH(QString, model);
    QFETCH(QString, dtype);
    QFETCH(QString, variable);
    QFETCH(int, requests);
    EngineOptions o =
        model == "demo" ? EngineOptions{} : test::goldenEngineOptions(model.toStdString(), 1);
    if (model == "demo") o.model = ensureDemoModel().string();
    o.device = "cuda";
    o.dtype = dtype.toStdString();
    o.backend = "local";
    o.cudaGraphs = true;
    const QByteArray name = variable.toUtf8();
    const auto run = [&](bool fused) {
      if (fused) {
        qunsetenv(name.constData());
      } else {
        qputenv(name.constData(), "0");
      }
      Engine engine(o);
      GenerateRequest r;
      r.prompts = {{1, 5, 9, 3}, {7, 2}, {4, 4, 8, 1, 6, 2}};
      r.prompts.resize(size_t(requests));
      r.sampling.maxTokens = 8;
      r.sampling.ignoreEos = true;
      r.returnLogits = true;
      GenerateResult result = Engine::generateResult(engine.generate(r));
      qunsetenv(name.constData());
      return result;
    };
    const GenerateResult apart = run(false), fusedRun = run(true);
    for (size_t i = 0; i < size_t(requests); ++i) {
      QCOMPARE(fusedRun.outputs[i].tokenIds, apart.outputs[i].tokenIds);
      QVERIFY2(at::equal(fromHostFloat(fusedRun.outputs[i].logits),
                         fromHostFloat(apart.outputs[i].logits)),
               qPrintable(variable + "=0 changes the logits"));
    }
  }

  // A small model's CPU ranks run with one intra-op thread unless --threads says otherwise; larger
  // ranks and GPU ranks take the machine's cores divided by the ranks.
  void intraOpThreadsFollowTheRanksSize() {
    QCOMPARE(intraOpThreads(3, true, 1'000'000'000, 8, 2), 3);
    QCOMPARE(intraOpThreads(0, true, kSmallRankParameters, 8, 2), 1);
    QCOMPARE(intraOpThreads(0, true, kSmallRankParameters + 1, 8, 2), 4);
    QCOMPARE(intraOpThreads(0, false, 1000, 8, 2), 4);
    QCOMPARE(intraOpThreads(0, true, 1'000'000'000, 1, 2), 1);
    if (test::device() != "cpu") return;
    EngineOptions o;
    o.model = ensureDemoModel().string();
    o.device = "cpu";
    QCOMPARE(Engine(o).info().intraOpThreads, 1);  // the demo model: about 3M parameters
    o.threadsPerRank = 2;
    QCOMPARE(Engine(o).info().intraOpThreads, 2);
  }

  // A rank keeps its KV cache across generations: reused while it fits, cleared over its whole
  // capacity (a stale NaN must not reach masked attention), grown when a request needs more.
  void kvCacheIsKeptClearedAndGrown() {
    const StageRank c{PipelineStages(2, 1), 0};  // two layers, one stage
    DecodeState state(false);
    const auto options = at::TensorOptions().dtype(at::kFloat);
    KvCache& first = state.cache(c, KvCacheLayout{2, 4}, 3, 10, options);
    QVERIFY(at::equal(first.allKeys(1), at::zeros({3, 10, 2, 4})));
    first.allKeys(0).fill_(NAN);
    first.allValues(1).fill_(NAN);
    KvCache& again = state.cache(c, KvCacheLayout{2, 4}, 2, 6, options);
    QCOMPARE(&again, &first);
    QCOMPARE(again.capacity(), int64_t(10));
    QVERIFY(at::equal(again.allKeys(0).narrow(0, 0, 2), at::zeros({2, 10, 2, 4})));
    QVERIFY(at::equal(again.allValues(1).narrow(0, 0, 2), at::zeros({2, 10, 2, 4})));
    QVERIFY(at::isnan(again.allKeys(0)[2]).all().item<bool>());  // rows not asked for: untouched
    KvCache& grown = state.cache(c, KvCacheLayout{2, 4}, 4, 8, options);
    QCOMPARE(grown.requests(), int64_t(4));
    QCOMPARE(grown.capacity(), int64_t(10));  // never shrinks
    QVERIFY(at::equal(grown.allKeys(0), at::zeros({4, 10, 2, 4})));
    QVERIFY(state.replayer(*LocalGroup::create(1)[0], at::Device(at::kCPU)) == nullptr);
  }

  // An MLA latent cache: one part per token, and under decode-context parallelism a rank holds
  // every dcp-th token, so its capacity and its bytes per token are divided by dcp.
  void latentCacheIsSplitAlongTokens() {
    const StageRank c{PipelineStages(2, 1), 0};
    DecodeState state(false);
    const KvCacheLayout latent{1, 6, 1, 2};
    KvCache& cache = state.cache(c, latent, 1, 9, at::TensorOptions().dtype(at::kFloat));
    QCOMPARE(cache.capacity(), int64_t(5));
    QCOMPARE(cache.parts(), int64_t(1));
    QCOMPARE(cache.allKeys(1).sizes().vec(), (std::vector<int64_t>{1, 5, 1, 6}));
    QCOMPARE(latent.bytesPerToken(2, 4), 2.0 * 6 * 4 / 2);
    QCOMPARE(cache.bytes(), int64_t(2 * 5 * 6 * 4));
  }

  // A pipeline stage keeps the tokens of its own layers only (5 layers in 2 stages: 0-2, 3-4);
  // asking it for another stage's layer is an error that names both, not a silent wrong buffer.
  void stageCacheHoldsItsOwnLayers() {
    DecodeState state(false);
    const StageRank second{PipelineStages(5, 2), 1};
    KvCache& cache =
        state.cache(second, KvCacheLayout{2, 4}, 1, 8, at::TensorOptions().dtype(at::kFloat));
    QCOMPARE(cache.firstLayer(), int64_t(3));
    QCOMPARE(cache.layers(), int64_t(2));
    QCOMPARE(cache.bytes(), int64_t(2 * 2 * 8 * 2 * 4 * 4));
    QCOMPARE(cache.allKeys(4).sizes().vec(), (std::vector<int64_t>{1, 8, 2, 4}));
    try {
      cache.allKeys(2);
      QFAIL("layer 2 of stage 0 was found in stage 1's cache");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("holds layers 3 to 4, not layer 2") != std::string::npos,
               e.what());
    }
    // Kept for the stage's next generation (its first layer is 3: nothing may look for layer 0).
    KvCache& again =
        state.cache(second, KvCacheLayout{2, 4}, 1, 8, at::TensorOptions().dtype(at::kFloat));
    QCOMPARE(&again, &cache);
    // Another stage's cache is a new one, not stage 1's buffers.
    KvCache& first = state.cache(StageRank{PipelineStages(5, 2), 0}, KvCacheLayout{2, 4}, 1, 8,
                                 at::TensorOptions().dtype(at::kFloat));
    QCOMPARE(first.firstLayer(), int64_t(0));
    QCOMPARE(first.layers(), int64_t(3));
  }

  void seedsDecideSampledText() {
    auto engine = demoEngine(1);
    const auto a =
        Engine::generateResult(engine->generate(request(*engine, {"Hello"}, 16, 1.0, 1)));
    const auto b =
        Engine::generateResult(engine->generate(request(*engine, {"Hello"}, 16, 1.0, 1)));
    const auto c =
        Engine::generateResult(engine->generate(request(*engine, {"Hello"}, 16, 1.0, 2)));
    QCOMPARE(a.outputs[0].tokenIds, b.outputs[0].tokenIds);
    QVERIFY(a.outputs[0].tokenIds != c.outputs[0].tokenIds);
  }

  // Sampling keeps its distribution over all 151936 rows, 267 more than the tokenizer's ids, which
  // the random demo model picks now and then. Every run completes, its ids are reproducible from
  // its seed, and the ids past the tokenizer decode (as no text) without error.
  void samplingOverEveryRowCompletes() {
    auto engine = demoEngine(2);
    auto fresh = demoEngine(2);  // reruns: the ids come from the seed, not from earlier jobs
    const auto tok = engine->tokenizer();
    QCOMPARE(tok->vocabSize(), int64_t(151669));
    QCOMPARE(engine->info().vocabSize, int64_t(151936));
    // Issue 22's case (it samples 151691 at step 8), then many seeds at a high temperature.
    std::vector<std::pair<double, uint64_t>> cases = {{0.8, 3}};
    for (uint64_t seed = 0; seed < 24; ++seed) cases.emplace_back(1.5, seed);
    int64_t withoutToken = 0;
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto [temperature, seed] = cases[c];
      auto r = request(*engine, {"Once upon a time"}, 12, temperature, seed);
      r.sampling.topK = 0;  // no filters: the command line's defaults
      r.sampling.topP = 1.0;
      const auto a = Engine::generateResult(engine->generate(r));
      const auto& ids = a.outputs[0].tokenIds;
      QCOMPARE(ids.size(), size_t(12));
      const std::string text = tok->decode(ids, /*skipSpecialTokens=*/true);
      const std::string shown = tok->displayText(ids, /*skipSpecialTokens=*/true);
      QVERIFY(text.find("<|id ") == std::string::npos);
      for (int64_t id : ids) {
        QVERIFY(id >= 0 && id < 151936);
        if (tok->hasToken(id)) continue;
        ++withoutToken;
        QVERIFY2(shown.find(Tokenizer::unknownIdMarker(id)) != std::string::npos, shown.c_str());
      }
      if (c % 3 == 0) {
        const auto again = Engine::generateResult(fresh->generate(r));
        QCOMPARE(again.outputs[0].tokenIds, ids);
      }
    }
    QVERIFY2(withoutToken > 0, "no sampled id fell past the tokenizer: the test proves nothing");
  }

  void batchedRequestsEqualEachAlone() {
    auto engine = demoEngine(2);
    auto both = request(
        *engine, {"The capital of France is", "A much longer second prompt with more tokens in it"},
        8);
    both.returnLogits = true;
    const auto batched = Engine::generateResult(engine->generate(both));
    for (size_t i = 0; i < 2; ++i) {
      GenerateRequest alone = both;
      alone.prompts = {both.prompts[i]};
      const auto single = Engine::generateResult(engine->generate(alone));
      QCOMPARE(batched.outputs[i].tokenIds, single.outputs[0].tokenIds);
      const at::Tensor x = fromHostFloat(batched.outputs[i].logits),
                       y = fromHostFloat(single.outputs[0].logits);
      QVERIFY2(test::closeToScale(x, y, 1e-4), test::closeToScaleMessage(x, y).c_str());
    }
  }

  void stopTokenEndsTheRequest() {
    auto engine = demoEngine(1);
    auto r = request(*engine, {"The capital of France is"}, 10);
    const auto free = Engine::generateResult(engine->generate(r));
    r.sampling.stopTokenIds = {free.outputs[0].tokenIds[2]};
    const auto stopped = Engine::generateResult(engine->generate(r));
    const auto& ids = stopped.outputs[0].tokenIds;
    QCOMPARE(stopped.outputs[0].finishReason, std::string("stop"));
    QVERIFY(ids.size() <= 3);
    QCOMPARE(ids.back(), free.outputs[0].tokenIds[2]);
    QCOMPARE(free.outputs[0].finishReason, std::string("length"));
  }

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
    auto engine = demoEngine(tp);
    auto r = request(*engine, {"The capital of France is", "Hi", "Tensor parallelism shards"}, 7);
    const auto run = [&](bool ahead) {
      if (ahead) {
        qunsetenv("SHARDSCOPE_DECODE_AHEAD");
      } else {
        qputenv("SHARDSCOPE_DECODE_AHEAD", "0");
      }
      GenerateResult result = Engine::generateResult(engine->generate(r));
      qunsetenv("SHARDSCOPE_DECODE_AHEAD");
      return result;
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
  void tracedDecodeAheadEqualsStepByStep_data() {
    QTest::addColumn<int>("tp");
    QTest::newRow("tp=1") << 1;
    QTest::newRow("tp=2") << 2;
  }
  void tracedDecodeAheadEqualsStepByStep() {
    QFETCH(int, tp);
    auto engine = demoEngine(tp);
    const auto r = request(*engine, {"The capital of France is", "Hi", "Tensor parallelism"}, 7);
    struct Seen {
      GenerateResult result;
      RecordingObserver trace;  // rank 0's
    };
    const auto run = [&](bool ahead) {
      if (!ahead) qputenv("SHARDSCOPE_DECODE_AHEAD", "0");
      std::vector<std::unique_ptr<RecordingObserver>> observers;
      for (int i = 0; i < tp; ++i) observers.push_back(std::make_unique<RecordingObserver>());
      Seen seen;
      engine
          ->submit([&](RankContext& ctx) {
            runGeneration(ctx, r, ctx.fillsResult() ? &seen.result : nullptr,
                          observers[size_t(ctx.rank)].get());
          })
          .wait();
      qunsetenv("SHARDSCOPE_DECODE_AHEAD");
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
    auto engine = demoEngine(tp);
    const auto r = request(*engine, {"The capital of France is", "Hi"}, 5);
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
    auto engine = demoEngine(1);
    const auto r = request(*engine, {"The capital of France is", "Hi"}, 4, 0.8, 7);
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

  void progressAndCancellation() {
    auto engine = demoEngine(2);
    JobHandle job = engine->generate(request(*engine, {"Counting steps"}, 3000));
    while (job.progress().step < 3 && !job.done())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    QCOMPARE(job.progress().total, int64_t(3000));
    job.cancel();
    const auto result = Engine::generateResult(job);
    QCOMPARE(result.outputs[0].finishReason, std::string("cancelled"));
    QVERIFY(result.steps < 3000);
    QCOMPARE(int64_t(result.outputs[0].tokenIds.size()), result.steps);
    // The engine serves the next job.
    const auto next = Engine::generateResult(engine->generate(request(*engine, {"again"}, 4)));
    QCOMPARE(next.outputs[0].tokenIds.size(), size_t(4));
  }

  // Destroying the engine right after a job failed: the dispatcher still runs the failed job's
  // cleanup on every rank, so no rank may leave before it. A rank that left on the shutdown flag
  // alone made the destructor wait forever (seen in tst_script_safety's hostile replays).
  void destroyingTheEngineAfterAFailedJobReturns() {
    for (int i = 0; i < 40; ++i) {
      auto engine = demoEngine(2);
      JobHandle job = engine->submit([](RankContext& ctx) {
        throw Error("planned failure on rank " + std::to_string(ctx.rank));
      });
      QVERIFY_THROWS_EXCEPTION(Error, job.wait());
      std::atomic<bool> destroyed{false};
      std::thread destroyer([&] {
        engine.reset();
        destroyed = true;
      });
      for (int ms = 0; ms < 30000 && !destroyed; ms += 10)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!destroyed) {
        qCritical("iteration %d: the engine's destructor did not return within 30 s", i);
        std::_Exit(1);  // the destroyer thread is stuck: nothing can clean up
      }
      destroyer.join();
    }
  }

  void failureOnOneRankFailsTheJobOnceThenTheEngineServesTheNext() {
    auto engine = demoEngine(4);
    JobHandle bad = engine->submit([](RankContext& ctx) {
      at::Tensor t = at::ones({4}).to(ctx.device);
      ctx.group.allReduceSum(t);  // all ranks meet once
      if (ctx.rank == 2) throw Error("injected failure on rank 2");
      ctx.group.allReduceSum(t);  // ranks 0, 1, 3 wait here for rank 2
    });
    try {
      bad.wait();
      QFAIL("the job should have failed");
    } catch (const Error& e) {
      QCOMPARE(std::string(e.what()), std::string("injected failure on rank 2"));
    }
    for (int i = 0; i < 2; ++i) {
      const auto ok =
          Engine::generateResult(engine->generate(request(*engine, {"still alive"}, 5)));
      QCOMPARE(ok.outputs[0].tokenIds.size(), size_t(5));
    }
  }

  void invalidRequestsAreRefusedClearly() {
    auto engine = demoEngine(1);
    GenerateRequest r;
    r.prompts = {{1, 2, 999999999}};
    try {
      engine->generate(r);
      QFAIL("expected an error");
    } catch (const Error& e) {
      QVERIFY(std::string(e.what()).find("outside the vocabulary [0, 151936)") !=
              std::string::npos);
    }
    r.prompts = {{}};
    QVERIFY_THROWS_EXCEPTION(Error, engine->generate(r));
    r.prompts = {{1}};
    r.sampling.maxTokens = 5000;
    QVERIFY_THROWS_EXCEPTION(Error, engine->generate(r));
  }

  void badEngineOptions() {
    EngineOptions o;
    o.device = "tpu";
    QVERIFY_THROWS_EXCEPTION(Error, Engine{o});
    o.device = "cpu";
    o.tp = 3;  // 8 heads, 4 KV heads
    try {
      Engine e(o);
      QFAIL("tp=3 should be refused");
    } catch (const Error& e) {
      QVERIFY(std::string(e.what()).find("does not divide") != std::string::npos);
    }
  }
};

QTEST_GUILESS_MAIN(TestEngine)
#include "tst_engine.moc"
