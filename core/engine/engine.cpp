// The engine: loading a model onto its ranks, what it says about the model (ModelInfo), and the
// public calls that queue jobs. The rank threads and the dispatcher: engine_ranks.cpp.
#include "engine.h"

#include <cstdlib>

#include "../error.h"
#include "../host_tensor_conversion.h"
#include "../model/tokenizer.h"
#include "../model/weight_source.h"
#include "../parallel/pipeline_stages.h"
#include "../parallel/rank_process.h"
#include "../runtime_switches.h"
#include "engine_impl.h"
#include "generation.h"

namespace shardscope {

bool Engine::Impl::wantsNccl(const EngineOptions& o) {
  if (o.process) return false;  // rank processes: the RankProcess builds the group
  if (o.backend == GroupBackend::Local) return false;
  if (o.backend == GroupBackend::Nccl) return true;
  // auto: NCCL when every rank can have its own GPU, else ranks share one GPU (local group).
  const int ranks = o.tp * o.pp;
  return o.device == DeviceKind::Cuda && ranks > 1 && int(at::getNumGPUs()) >= ranks;
}

void Engine::Impl::checkStages() const {
  if (options.pp == 1) return;
  const std::string pp = "pp=" + std::to_string(options.pp);
  if (options.process) {
    throw Error(pp +
                ": pipeline stages run as rank threads; rank processes support tensor "
                "parallelism only (use --pp 1 with --mpi, or --pp without --mpi)");
  }
  if (options.dcp > 1) {
    throw Error(pp + " with dcp=" + std::to_string(options.dcp) +
                ": decode-context parallelism runs on one pipeline stage; use --pp with --tp, "
                "or --dcp with --tp and --pp 1");
  }
}

void Engine::Impl::validateFailure(const FailureInjection& f) const {
  if (!f.armed()) return;
  if (f.rank >= ranks())
    throw Error("failure injection (" + f.describe() +
                ") names a rank the engine does not have (tp=" + std::to_string(options.tp) +
                ", pp=" + std::to_string(options.pp) + ")");
  if (f.kind == FailureInjection::Kind::Stuck && ranks() == 1)
    throw Error("failure injection (" + f.describe() +
                "): a single rank has no collective to miss; use tp >= 2");
}

void Engine::Impl::buildInfo() {
  const ModelConfig& c = source.config;
  info.spec = source.spec.empty() ? "demo" : source.spec;
  info.family = familyName(c.family);
  info.configSha256 = source.configSha256;
  info.dtype = dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
  info.path = source.dir.string();
  info.device = toString(options.device);
  info.backend = options.process      ? options.process->backendName(devices[localRanks[0]])
                 : wantsNccl(options) ? "nccl"
                                      : "local";
  if (options.process) info.rankHosts = options.process->hosts();
  info.tp = options.tp;
  info.pp = options.pp;
  info.intraOpThreads = threadsOf(localRanks[0]);
  info.expertParallel = options.expertParallel;
  info.dcp = options.dcp;
  // This process's first rank: every rank of rank threads, or the one rank of a rank process.
  const CausalLM& root = *models[size_t(localRanks[0])];
  info.kvCacheBytesPerToken =
      root.kvCacheLayout().bytesPerToken(root.stage().layers(), int64_t(at::elementSize(dtype)));
  info.vocabSize = c.vocabSize;
  info.numLayers = c.numLayers;
  info.numHeads = c.numHeads;
  info.numKvHeads = c.numKvHeads;
  info.headDim = c.headDim;
  info.hiddenSize = c.hiddenSize;
  info.numExperts = c.moe.numExperts;
  info.expertsPerToken = c.moe.numExpertsPerTok;
  info.eosTokenIds = source.eosTokenIds;
  std::function<void(const Module&, int)> walk = [&](const Module& m, int depth) {
    ModuleInfo mi;
    mi.path = m.path();
    mi.name = m.index() ? "[" + std::to_string(*m.index()) + "]" : m.name();
    mi.kind = m.kind();
    mi.depth = depth;
    mi.stage = root.moduleStage(m);
    mi.layer = m.layer() ? int(*m.layer()) : -1;
    for (PortRole r : {PortRole::Input, PortRole::Output}) {
      mi.ports.push_back({m.port(r).name, m.port(r).shard.name()});
    }
    // Parameters as the stage holding the module loaded them (its tensor-parallel rank 0).
    const Module* holder = &m;
    if (mi.stage > 0) holder = models[size_t(mi.stage * options.tp)]->modulesByPath().at(m.path());
    for (const Parameter& p : holder->parameters())
      mi.parameters.push_back({p.name, p.shard.sizes().vec(), p.fullShape});
    info.modules.push_back(std::move(mi));
    for (const Module* c : m.children()) walk(*c, depth + 1);
  };
  walk(root, 0);
}

void Engine::Impl::checkOptions() const {
  if (options.tp < 1) throw Error("tp must be at least 1, got " + std::to_string(options.tp));
  if (options.pp < 1)
    throw Error("pipeline_parallel_size (pp) must be at least 1, got " +
                std::to_string(options.pp));
  if (options.device == DeviceKind::Cuda && !at::hasCUDA()) {
    throw Error(
        "device cuda was asked for, but this LibTorch has no CUDA or no GPU is visible; use "
        "--device cpu");
  }
  if (options.process && options.process->size() != options.tp) {
    throw Error("tp=" + std::to_string(options.tp) + " needs as many rank processes, but " +
                std::to_string(options.process->size()) + " were started; launch with mpirun -np " +
                std::to_string(options.tp));
  }
}

void Engine::Impl::resolveDtype() {
  if (options.dtype) {
    dtype = scalarTypeOf(*options.dtype);
  } else if (options.device == DeviceKind::Cuda) {  // the checkpoint's (on the CPU: fp32)
    dtype = source.config.torchDtype == "float32"   ? at::kFloat
            : source.config.torchDtype == "float16" ? at::kHalf
                                                    : at::kBFloat16;
  }
}

void Engine::Impl::resolveCollectiveTimeout() {
  if (options.collectiveTimeoutSeconds > 0) {
    collectiveTimeout = std::chrono::milliseconds(
        std::max<int64_t>(1, int64_t(options.collectiveTimeoutSeconds * 1000)));
    return;
  }
  const double seconds = RuntimeSwitches::current().collectiveTimeoutSeconds;
  if (seconds == 0) return;
  collectiveTimeout = std::chrono::milliseconds(std::max<int64_t>(1, int64_t(seconds * 1000)));
}

void Engine::Impl::armFailureInjection() {
  if (!options.failure.armed()) {
    if (const char* f = std::getenv("SHARDSCOPE_INJECT_FAILURE"); f && *f)
      options.failure = FailureInjection::parse(f);
  }
  validateFailure(options.failure);
  armedFailure = options.failure;
}

void Engine::Impl::placeRanks() {
  const bool nccl = wantsNccl(options);
  for (int r = 0; r < ranks(); ++r) {
    const int gpu = options.process ? options.process->localDevice() : nccl ? r : 0;
    devices.push_back(options.device == DeviceKind::Cpu
                          ? at::Device(at::kCPU)
                          : at::Device(at::kCUDA, c10::DeviceIndex(gpu)));
    if (!options.process || options.process->rank() == r) localRanks.push_back(r);
  }
}

std::exception_ptr Engine::Impl::loadRanks(const PipelineStages& stages,
                                           const LoadProgress& progress) {
  models.resize(size_t(ranks()));
  running = int(localRanks.size());
  std::atomic<int> loaded{0};
  for (int r : localRanks) {
    rankThreads.emplace_back([this, r, &loaded, &progress, stages] {
      rankMain(r, [this, r, &loaded, &progress, stages] {
        const int tp = options.tp;
        LoadContext ctx{*source.weights,
                        {r % tp, tp, options.expertParallel, options.dcp},
                        dtype,
                        devices[size_t(r)],
                        {stages, r / tp}};
        models[size_t(r)] = buildCausalLM(source.config, ctx);
        const int done = ++loaded;
        if (progress) progress("loaded rank " + std::to_string(r), done, ranks());
      });
    });
  }
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return running == 0; });
    error = firstError;
  }
  if (options.process) {
    // Every process fails the load together (a rank that loaded waits for no collective).
    try {
      std::exception_ptr agreed = agreeOnOutcome(error);
      if (agreed) error = agreed;
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) return error;
  try {
    // An expert-parallel rank process reads only its own experts' tensors.
    if (!(options.process && options.expertParallel)) source.weights->checkAllUsed();
    buildInfo();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

void Engine::Impl::stopRanksAfterFailedLoad() {
  {
    std::lock_guard lock(mutex);
    stopping = true;
    ranksExit = true;  // no dispatcher was started
  }
  cv.notify_all();
  for (auto& t : rankThreads) t.join();
}

Engine::Engine(EngineOptions options, LoadProgress progress) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  // The SHARDSCOPE_* switches as this engine starts: a value a switch does not take fails here.
  RuntimeSwitches::reload();
  s.checkOptions();
  if (progress)
    progress("reading " + (s.options.model.empty() ? std::string("demo model") : s.options.model),
             0, s.ranks());
  s.source = openModelSource(s.options.model);
  s.source.config.checkTensorParallel(s.options.tp, s.options.expertParallel, s.options.dcp);
  s.checkStages();
  const PipelineStages stages(s.source.config.numLayers, s.options.pp);
  if (!s.source.tokenizerJson.empty()) s.tokenizer = Tokenizer::fromFile(s.source.tokenizerJson);
  s.resolveDtype();
  s.resolveCollectiveTimeout();
  s.armFailureInjection();
  s.placeRanks();
  s.makeGroups();
  if (std::exception_ptr error = s.loadRanks(stages, progress)) {
    s.stopRanksAfterFailedLoad();
    std::rethrow_exception(error);
  }
  s.dispatcher = std::thread([this] { impl_->dispatchMain(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
    if (impl_->current) impl_->current->cancelRequested = true;
  }
  impl_->cv.notify_all();
  if (impl_->dispatcher.joinable()) impl_->dispatcher.join();
  {
    std::lock_guard lock(impl_->mutex);
    impl_->ranksExit = true;
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->rankThreads) {
    if (t.joinable()) t.join();
  }
}

const ModelInfo& Engine::info() const {
  return impl_->info;
}

std::shared_ptr<const Tokenizer> Engine::tokenizer() const {
  return impl_->tokenizer;
}

JobHandle Engine::submit(std::function<void(RankContext&)> fn, int64_t totalSteps) {
  auto job = std::make_shared<JobState>();
  job->run = std::move(fn);
  job->total = totalSteps;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) throw Error("the engine is shutting down");
    impl_->queue.push_back(job);
  }
  impl_->cv.notify_all();
  return JobHandle(job);
}

bool Engine::rankInJob() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->running > 0;
}

void Engine::injectFailure(const FailureInjection& failure) {
  impl_->validateFailure(failure);
  std::lock_guard lock(impl_->mutex);
  impl_->armedFailure = failure;
}

JobHandle Engine::generate(GenerateRequest request) {
  validateRequest(request, impl_->source.config);  // refuse early, in the caller's thread
  auto result = std::make_shared<GenerateResult>();
  auto req = std::make_shared<GenerateRequest>(std::move(request));
  JobHandle h = submit(
      [req, result](RankContext& ctx) {
        runGeneration(ctx, *req, ctx.fillsResult() ? result.get() : nullptr);
      },
      req->sampling.maxTokens);
  h.state()->result = result;
  return h;
}

GenerateResult Engine::generateResult(const JobHandle& h) {
  h.wait();
  SS_ASSERT(h.state()->result, "generateResult on a job that is not a generation");
  return *static_cast<const GenerateResult*>(h.state()->result.get());
}

}  // namespace shardscope
