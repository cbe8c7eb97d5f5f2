// The engine on the random test model (ensureDemoModel(): Qwen3 architecture, real Qwen3 tokenizer,
// whose LM head has rows past the tokenizer's ids): identical greedy and
// seeded sampled text at tp=1, 2 and 4; sampling over every row, ids past the tokenizer included;
// batching; stop tokens; progress and cancellation; a job that fails on one rank, then jobs that
// succeed. How many intra-op threads a rank takes, and that core's CPU loops run on them. Steps
// launched ahead of the host and what observers see of them: tst_decode_ahead.
#include <ATen/Parallel.h>
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

#include "common/demo_engine.h"
#include "common/golden_engine.h"
#include "common/scoped_switch.h"
#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/build_info.h"
#include "core/engine/decode_state.h"
#include "core/engine/engine.h"
#include "core/engine/generation.h"
#include "core/engine/intra_op_threads.h"
#include "core/engine/rank_context.h"
#include "core/error.h"
#include "core/host_tensor_conversion.h"
#include "core/model/model_source.h"
#include "core/model/tokenizer.h"
#include "core/parallel/local_group.h"

using namespace shardscope;

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
      auto engine = test::demoEngine(tp);
      const auto r = test::demoRequest(
          *engine, {"The capital of France is", "Tensor parallelism shards"}, 12, temperature, 42);
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
    o.device = DeviceKind::Cuda;
    o.dtype = DType::F32;
    Engine graphs(o);
    o.cudaGraphs = false;
    Engine eager(o);
    auto r = test::demoRequest(
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
    o.device = DeviceKind::Cuda;
    o.dtype = parseDType(dtype.toStdString());
    o.cudaGraphs = graphs;
    const auto run = [&](bool fused) {
      const test::ScopedSwitch fusedDecode("SHARDSCOPE_FUSED_DECODE", fused ? "1" : "0");
      Engine engine(o);
      auto r = test::demoRequest(
          engine, {"The capital of France is", "Hi", "Tensor parallelism shards"}, 8);
      r.returnLogits = true;
      return Engine::generateResult(engine.generate(r));
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
  // single request's experts take the one-token kernels (SHARDSCOPE_MOE_ONE_TOKEN). Each switch is
  // on when unset.
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
    o.device = DeviceKind::Cuda;
    o.dtype = parseDType(dtype.toStdString());
    o.backend = GroupBackend::Local;
    o.cudaGraphs = true;
    const auto run = [&](bool fused) {
      const test::ScopedSwitch setting(variable.toStdString(), fused ? nullptr : "0");
      Engine engine(o);
      GenerateRequest r;
      r.prompts = {{1, 5, 9, 3}, {7, 2}, {4, 4, 8, 1, 6, 2}};
      r.prompts.resize(size_t(requests));
      r.sampling.maxTokens = 8;
      r.sampling.ignoreEos = true;
      r.returnLogits = true;
      return Engine::generateResult(engine.generate(r));
    };
    const GenerateResult apart = run(false), fusedRun = run(true);
    for (size_t i = 0; i < size_t(requests); ++i) {
      QCOMPARE(fusedRun.outputs[i].tokenIds, apart.outputs[i].tokenIds);
      QVERIFY2(at::equal(fromHostFloat(fusedRun.outputs[i].logits),
                         fromHostFloat(apart.outputs[i].logits)),
               qPrintable(variable + "=0 changes the logits"));
    }
  }

  // ModelInfo names each module's decoder layer (the GUI's routing view and attention pattern take
  // it from there, not from the path): the layer and everything in it, -1 outside the layers.
  void modulesNameTheirDecoderLayer() {
    if (test::device() != "cpu") QSKIP("one engine on the CPU covers it");
    EngineOptions o;
    o.model = ensureDemoModel().string();
    const ModelInfo info = Engine(o).info();
    std::map<std::string, int> layerOf;
    for (const ModuleInfo& m : info.modules) layerOf[m.path] = m.layer;
    QCOMPARE(layerOf.at("model.model.layers[1]"), 1);
    QCOMPARE(layerOf.at("model.model.layers[1].self_attn.o_proj"), 1);
    QCOMPARE(layerOf.at("model.model.layers[0].mlp"), 0);
    QCOMPARE(layerOf.at("model.model.embed_tokens"), -1);
    QCOMPARE(layerOf.at("model.model.norm"), -1);
    QCOMPARE(layerOf.at("model"), -1);
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
    o.device = DeviceKind::Cpu;
    QCOMPARE(Engine(o).info().intraOpThreads, 1);  // the demo model: about 3M parameters
    o.threadsPerRank = 2;
    QCOMPARE(Engine(o).info().intraOpThreads, 2);
  }

  // Core's CPU loops (at::parallel_for, an OpenMP pragma in LibTorch's header) run on the intra-op
  // threads: compiled without -fopenmp, core ran them on one thread whatever at::set_num_threads
  // said (core/CMakeLists.txt); a GCC build must have it.
  void cpuLoopsRunOnTheIntraOpThreads() {
    for (const char* limit : {"OMP_THREAD_LIMIT", "OMP_DYNAMIC"}) {  // they may give fewer threads
      if (qEnvironmentVariableIsSet(limit))
        QSKIP(
            qPrintable(QString("%1 is set: OpenMP may run the loop on fewer threads").arg(limit)));
    }
    const BuildInfo b = buildInfo();
    const int before = at::get_num_threads();
    at::set_num_threads(2);
    const int seen = parallelForThreads();
    at::set_num_threads(before);
    QCOMPARE(seen, b.openmp ? 2 : 1);
#if defined(__GNUC__) && !defined(__clang__)
    QVERIFY2(b.openmp, "a GCC build of core without OpenMP: at::parallel_for runs on one thread");
#endif
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
    auto engine = test::demoEngine(1);
    const auto a =
        Engine::generateResult(engine->generate(test::demoRequest(*engine, {"Hello"}, 16, 1.0, 1)));
    const auto b =
        Engine::generateResult(engine->generate(test::demoRequest(*engine, {"Hello"}, 16, 1.0, 1)));
    const auto c =
        Engine::generateResult(engine->generate(test::demoRequest(*engine, {"Hello"}, 16, 1.0, 2)));
    QCOMPARE(a.outputs[0].tokenIds, b.outputs[0].tokenIds);
    QVERIFY(a.outputs[0].tokenIds != c.outputs[0].tokenIds);
  }

  // Sampling keeps its distribution over all 151936 rows, 267 more than the tokenizer's ids, which
  // the random demo model picks now and then. Every run completes, its ids are reproducible from
  // its seed, and the ids past the tokenizer decode (as no text) without error.
  void samplingOverEveryRowCompletes() {
    auto engine = test::demoEngine(2);
    auto fresh = test::demoEngine(2);  // reruns: the ids come from the seed, not from earlier jobs
    const auto tok = engine->tokenizer();
    QCOMPARE(tok->vocabSize(), int64_t(151669));
    QCOMPARE(engine->info().vocabSize, int64_t(151936));
    // Issue 22's case (it samples 151691 at step 8), then many seeds at a high temperature.
    std::vector<std::pair<double, uint64_t>> cases = {{0.8, 3}};
    for (uint64_t seed = 0; seed < 24; ++seed) cases.emplace_back(1.5, seed);
    int64_t withoutToken = 0;
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto [temperature, seed] = cases[c];
      auto r = test::demoRequest(*engine, {"Once upon a time"}, 12, temperature, seed);
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
    auto engine = test::demoEngine(2);
    auto both = test::demoRequest(
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
    auto engine = test::demoEngine(1);
    auto r = test::demoRequest(*engine, {"The capital of France is"}, 10);
    const auto free = Engine::generateResult(engine->generate(r));
    r.sampling.stopTokenIds = {free.outputs[0].tokenIds[2]};
    const auto stopped = Engine::generateResult(engine->generate(r));
    const auto& ids = stopped.outputs[0].tokenIds;
    QCOMPARE(stopped.outputs[0].finishReason, std::string("stop"));
    QVERIFY(ids.size() <= 3);
    QCOMPARE(ids.back(), free.outputs[0].tokenIds[2]);
    QCOMPARE(free.outputs[0].finishReason, std::string("length"));
  }

  void progressAndCancellation() {
    auto engine = test::demoEngine(2);
    JobHandle job = engine->generate(test::demoRequest(*engine, {"Counting steps"}, 3000));
    while (job.progress().step < 3 && !job.done())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    QCOMPARE(job.progress().total, int64_t(3000));
    job.cancel();
    const auto result = Engine::generateResult(job);
    QCOMPARE(result.outputs[0].finishReason, std::string("cancelled"));
    QVERIFY(result.steps < 3000);
    QCOMPARE(int64_t(result.outputs[0].tokenIds.size()), result.steps);
    // The engine serves the next job.
    const auto next =
        Engine::generateResult(engine->generate(test::demoRequest(*engine, {"again"}, 4)));
    QCOMPARE(next.outputs[0].tokenIds.size(), size_t(4));
  }

  // Destroying the engine right after a job failed: the dispatcher still runs the failed job's
  // cleanup on every rank, so no rank may leave before it. A rank that left on the shutdown flag
  // alone made the destructor wait forever (seen in tst_script_safety's hostile replays).
  void destroyingTheEngineAfterAFailedJobReturns() {
    for (int i = 0; i < 40; ++i) {
      auto engine = test::demoEngine(2);
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

  // rankInJob: true while a rank runs a job's code, false once every rank has left it (a script
  // runner frees its last run's values only then).
  void rankInJobIsTrueOnlyInsideAJob() {
    auto engine = test::demoEngine(2);
    QVERIFY(!engine->rankInJob());
    std::atomic<bool> release{false};
    std::atomic<int> inside{0};
    JobHandle job = engine->submit([&](RankContext&) {
      ++inside;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    while (inside < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    QVERIFY(engine->rankInJob());
    release = true;
    job.wait();
    QVERIFY(!engine->rankInJob());
  }

  void failureOnOneRankFailsTheJobOnceThenTheEngineServesTheNext() {
    auto engine = test::demoEngine(4);
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
          Engine::generateResult(engine->generate(test::demoRequest(*engine, {"still alive"}, 5)));
      QCOMPARE(ok.outputs[0].tokenIds.size(), size_t(5));
    }
  }

  void invalidRequestsAreRefusedClearly() {
    auto engine = test::demoEngine(1);
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
    // The names a user types are checked where they are read, naming the ones there are.
    try {
      parseDeviceKind("tpu");
      QFAIL("device tpu should be refused");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("use cpu or cuda") != std::string::npos, e.what());
    }
    QVERIFY_THROWS_EXCEPTION(Error, parseGroupBackend("gloo"));
    QVERIFY_THROWS_EXCEPTION(Error, parseModelDtype("int8"));
    QVERIFY(!parseModelDtype("auto") && !parseModelDtype(""));
    QVERIFY(parseModelDtype("bfloat16") == DType::BF16);
    for (DType d : {DType::BF16, DType::F16, DType::F32})
      QVERIFY(parseModelDtype(modelDtypeName(d)) == d);
    EngineOptions o;
    o.tp = 3;  // 8 heads, 4 KV heads
    try {
      Engine e(o);
      QFAIL("tp=3 should be refused");
    } catch (const Error& e) {
      QVERIFY(std::string(e.what()).find("does not divide") != std::string::npos);
    }
    // A switch set to a value it does not take fails the start, naming the values it takes.
    o.tp = 1;
    qputenv("SHARDSCOPE_PDL", "off");
    struct Unset {
      ~Unset() { qunsetenv("SHARDSCOPE_PDL"); }
    } unset;
    try {
      Engine e(o);
      QFAIL("SHARDSCOPE_PDL=off should be refused");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("SHARDSCOPE_PDL=off") != std::string::npos &&
                   std::string(e.what()).find("takes 0, 1") != std::string::npos,
               e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestEngine)
#include "tst_engine.moc"
