#include "engine.h"

#include <ATen/Parallel.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>

#include <cstdlib>
#include <deque>
#include <thread>

#include "../error.h"
#include "../host_tensor_conversion.h"
#include "../model/tokenizer.h"
#include "../model/weight_source.h"
#include "../parallel/local_group.h"
#include "../parallel/pipeline_stages.h"
#include "../parallel/rank_process.h"
#include "../parallel/stage_channel.h"
#include "generation.h"
#include "intra_op_threads.h"
#include "rank_context.h"
#ifdef SHARDSCOPE_WITH_NCCL
#include "../parallel/nccl_group.h"
#endif

namespace shardscope {

struct Engine::Impl {
  EngineOptions options;
  ModelSource source;
  ModelInfo info;
  std::shared_ptr<const Tokenizer> tokenizer;
  at::ScalarType dtype = at::kFloat;
  std::vector<at::Device> devices;
  std::vector<int> localRanks;  // the ranks this process runs: every rank, or one (rank processes)
  // By world rank (stage * tp + tensor-parallel rank): the rank's stage group (null for other
  // processes' ranks); with several stages also the world group and the channel between stages.
  std::vector<std::unique_ptr<ProcessGroup>> groups;
  std::vector<std::unique_ptr<ProcessGroup>> worlds;
  std::vector<std::unique_ptr<StageChannel>> channels;
  std::vector<std::unique_ptr<CausalLM>> models;
  std::vector<std::thread> rankThreads;
  std::thread dispatcher;

  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::shared_ptr<JobState>> queue;
  std::shared_ptr<JobState> current;
  uint64_t epoch = 0;
  uint64_t groupsBuilt = 0;  // bumped by makeGroups: graphs recorded with older groups are dropped
  int running = 0;
  bool stopping = false;  // the dispatcher takes no further job
  // The rank threads leave. Set only once the dispatcher has ended: a job it is still finishing
  // (a cancelled one's cleanup) needs every rank, and a rank that left on `stopping` alone hung it.
  bool ranksExit = false;
  std::exception_ptr firstError;
  bool firstErrorIsAbort = false;
  std::chrono::milliseconds collectiveTimeout{std::chrono::seconds(60)};
  FailureInjection armedFailure;  // for the next job
  std::exception_ptr broken;      // the group could not be rebuilt: every later job fails with it

  int ranks() const { return options.tp * options.pp; }
  void makeGroups();
  void abortAll(const std::string& reason);
  void rankMain(int rank, std::function<void()> load);
  // The intra-op threads rank `rank` runs its forwards with (after its model is loaded).
  int threadsOf(int rank) const;
  void dispatchMain();
  // Runs `job` on every rank; returns its first error once every rank has left it, or, when a
  // rank has not left within the watchdog time after the first error, reports the job failed
  // through `report` and then waits for that rank.
  std::exception_ptr runOnRanks(const std::shared_ptr<JobState>& job,
                                const std::function<void(std::exception_ptr)>& report);
  void validateFailure(const FailureInjection& f) const;
  // Refuses pipeline stages combined with what they do not run with.
  void checkStages() const;
  void recordError(int rank, std::exception_ptr e);
  // Rank processes: every process learns how the job ended on the others and fails with the root
  // cause when any rank failed (so that all of them rebuild their groups together).
  std::exception_ptr agreeOnOutcome(std::exception_ptr local);
  void buildInfo();
};

namespace {

bool wantsNccl(const EngineOptions& o) {
  if (o.process) return false;  // rank processes: the RankProcess builds the group
  if (o.backend == "local") return false;
  if (o.backend == "nccl") return true;
  // auto: NCCL when every rank can have its own GPU, else ranks share one GPU (local group).
  const int ranks = o.tp * o.pp;
  return o.device == "cuda" && ranks > 1 && int(at::getNumGPUs()) >= ranks;
}

int cores() {
  return std::max(1u, std::thread::hardware_concurrency());
}

// The parameters this rank holds (its shards), below `m`.
int64_t parametersBelow(const Module& m) {
  int64_t n = 0;
  for (const Parameter& p : m.parameters()) n += p.shard.defined() ? p.shard.numel() : 0;
  for (const Module* c : m.children()) n += parametersBelow(*c);
  return n;
}

std::string describeException(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

void Engine::Impl::makeGroups() {
  channels.clear();
  worlds.clear();
  groups.clear();
  ++groupsBuilt;
  if (options.process) {  // one stage (the constructor refuses more)
    groups.resize(size_t(options.tp));
    for (int r : localRanks)
      groups[size_t(r)] = options.process->makeGroup(devices[r], {collectiveTimeout});
    for (int r : localRanks) groups[size_t(r)]->setOptions({collectiveTimeout});
    return;
  }
  // One group over `members` (world ranks; under NCCL world rank r runs on GPU r).
  const auto makeGroup = [this](const std::vector<int>& members,
                                std::vector<std::unique_ptr<ProcessGroup>>& out) {
    if (wantsNccl(options)) {
#ifdef SHARDSCOPE_WITH_NCCL
      for (auto& g : NcclGroup::create(members)) out.push_back(std::move(g));
#else
      throw Error("the NCCL backend is not built in (LibTorch without CUDA); use --backend local");
#endif
    } else {
      for (auto& g : LocalGroup::create(int(members.size()))) out.push_back(std::move(g));
    }
  };
  std::vector<int> all;
  for (int r = 0; r < ranks(); ++r) all.push_back(r);
  for (int s = 0; s < options.pp; ++s)
    makeGroup(std::vector<int>(all.begin() + s * options.tp, all.begin() + (s + 1) * options.tp),
              groups);
  if (options.pp > 1) {
    makeGroup(all, worlds);
    for (int r = 0; r < ranks(); ++r)
      channels.push_back(
          std::make_unique<StageChannel>(*worlds[size_t(r)], options.tp, devices[size_t(r)]));
  }
  for (auto* set : {&groups, &worlds}) {
    for (auto& g : *set) g->setOptions({collectiveTimeout});
  }
}

void Engine::Impl::abortAll(const std::string& reason) {
  // Every group of every stage: a rank of another stage may wait in its own stage's collective
  // on a peer that waits on the world.
  for (auto* set : {&groups, &worlds}) {
    for (auto& g : *set) {
      if (g) g->abort(reason);  // null: another process's rank
    }
  }
}

void Engine::Impl::recordError(int rank, std::exception_ptr e) {
  bool isAbort = false;
  try {
    std::rethrow_exception(e);
  } catch (const CollectiveAborted&) {
    isAbort = true;
  } catch (...) {
  }
  {
    std::lock_guard lock(mutex);
    // The root cause wins over the aborts it caused on other ranks.
    if (!firstError || (firstErrorIsAbort && !isAbort)) {
      firstError = e;
      firstErrorIsAbort = isAbort;
    }
  }
  cv.notify_all();
  if (!isAbort) abortAll("rank " + std::to_string(rank) + " failed: " + describeException(e));
}

int Engine::Impl::threadsOf(int rank) const {
  const int64_t parameters = models[size_t(rank)] ? parametersBelow(*models[size_t(rank)]) : 0;
  return intraOpThreads(options.threadsPerRank, devices[size_t(rank)].is_cpu(), parameters, cores(),
                        ranks());
}

void Engine::Impl::rankMain(int rank, std::function<void()> load) {
  // Loading takes every thread it is given; the forwards take threadsOf() (intra_op_threads.h).
  at::set_num_threads(options.threadsPerRank > 0 ? options.threadsPerRank
                                                 : std::max(1, cores() / ranks()));
  c10::InferenceMode inference;
  c10::DeviceGuard guard(devices[rank]);
  try {
    load();
    at::set_num_threads(threadsOf(rank));
  } catch (...) {
    recordError(rank, std::current_exception());
  }
  {
    std::lock_guard lock(mutex);
    --running;
  }
  cv.notify_all();

  DecodeState decode(options.cudaGraphs);
  uint64_t seen = 0, groupsSeen = 0;
  for (;;) {
    std::shared_ptr<JobState> job;
    {
      std::unique_lock lock(mutex);
      cv.wait(lock, [&] { return ranksExit || epoch != seen; });
      if (epoch == seen) return;  // exiting, and no job was started for this rank
      seen = epoch;
      job = current;
      if (groupsSeen != groupsBuilt) decode.reset();  // its graphs hold the old communicator
      groupsSeen = groupsBuilt;
    }
    try {
      RankContext ctx{
          rank,   *groups[rank], *models[rank],
          source, devices[rank], dtype,
          *job,   decode,        channels.empty() ? nullptr : channels[size_t(rank)].get()};
      ctx.reports = options.process || rank == 0;
      job->run(ctx);
    } catch (...) {
      decode.reset();  // a graph recorded during a failed job is not replayed
      recordError(rank, std::current_exception());
    }
    {
      std::lock_guard lock(mutex);
      --running;
    }
    cv.notify_all();
  }
}

std::exception_ptr Engine::Impl::runOnRanks(const std::shared_ptr<JobState>& job,
                                            const std::function<void(std::exception_ptr)>& report) {
  std::unique_lock lock(mutex);
  current = job;
  firstError = nullptr;
  firstErrorIsAbort = false;
  running = int(localRanks.size());
  ++epoch;
  cv.notify_all();
  cv.wait(lock, [&] { return running == 0 || firstError; });
  if (running > 0 && !cv.wait_for(lock, collectiveTimeout, [&] { return running == 0; })) {
    // A rank is lost in its own work and never reaches the abort: the caller hears now.
    std::exception_ptr first = firstError;
    const std::string message =
        describeException(first) + " (" + std::to_string(running) +
        " rank(s) had not left the job " + std::to_string(collectiveTimeout.count() / 1000.0) +
        " s after this error; the engine runs no further job until they do)";
    lock.unlock();
    report(std::make_exception_ptr(Error(message)));
    lock.lock();
    cv.wait(lock, [&] { return running == 0; });
    current.reset();
    return nullptr;  // reported
  }
  current.reset();
  return firstError;
}

void Engine::Impl::dispatchMain() {
  const auto finish = [](const std::shared_ptr<JobState>& job, std::exception_ptr error) {
    {
      std::lock_guard lock(job->mutex);
      if (job->finished) return;
      job->finished = true;
      job->error = error;
    }
    job->cv.notify_all();
  };
  for (;;) {
    std::shared_ptr<JobState> job;
    std::exception_ptr brokenError;
    {
      std::unique_lock lock(mutex);
      cv.wait(lock, [&] { return stopping || !queue.empty(); });
      if (stopping) break;
      job = queue.front();
      queue.pop_front();
      job->failure = armedFailure;
      armedFailure = {};
      brokenError = broken;
    }
    if (brokenError) {
      finish(job, brokenError);
      continue;
    }
    bool reported = false;
    std::exception_ptr error = runOnRanks(job, [&](std::exception_ptr e) {
      reported = true;
      finish(job, e);
    });
    if (options.process && !reported) error = agreeOnOutcome(error);
    if (!reported) finish(job, error);  // the caller hears before the group is rebuilt
    if (!error && !reported) continue;
    // Every rank has left the job. Graphs recorded during it, or with the group about to be
    // replaced, are dropped on every rank first (NCCL frees an aborted communicator only once the
    // graphs recorded with it are gone); then the group is cleared or rebuilt for the next job.
    auto cleanup = std::make_shared<JobState>();
    cleanup->run = [](RankContext& ctx) { ctx.decode.reset(); };
    runOnRanks(cleanup, [](std::exception_ptr) {});
    try {
      if (groups[size_t(localRanks[0])]->reusableAfterAbort()) {
        for (auto* set : {&groups, &worlds}) {
          for (auto& g : *set) {
            if (g) g->reset();
          }
        }
      } else {
        makeGroups();
      }
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex);
      broken = std::make_exception_ptr(
          Error(std::string("the process group could not be rebuilt after a failed job: ") +
                e.what() + "; restart the engine (reload the model)"));
    }
  }
  // Fail whatever is still queued so no caller waits forever.
  std::lock_guard lock(mutex);
  for (auto& job : queue) {
    finish(job, std::make_exception_ptr(Cancelled("the engine shut down before this job ran")));
  }
  queue.clear();
}

std::exception_ptr Engine::Impl::agreeOnOutcome(std::exception_ptr local) {
  bool isAbort = false;
  std::string text;
  if (local) {
    text = describeException(local);
    try {
      std::rethrow_exception(local);
    } catch (const CollectiveAborted&) {
      isAbort = true;
    } catch (...) {
    }
  }
  const std::string rootCause = options.process->agreeOnOutcome(text, isAbort);
  if (rootCause.empty()) return nullptr;
  // This rank's own failure keeps its type (a script error stays one); a rank that only saw the
  // abort, or finished, reports the root cause with the rank and host it happened on.
  if (local && !isAbort) return local;
  return std::make_exception_ptr(Error(rootCause));
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
  info.device = options.device;
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

Engine::Engine(EngineOptions options, LoadProgress progress) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  if (s.options.tp < 1) throw Error("tp must be at least 1, got " + std::to_string(s.options.tp));
  if (s.options.pp < 1)
    throw Error("pipeline_parallel_size (pp) must be at least 1, got " +
                std::to_string(s.options.pp));
  if (s.options.device != "cpu" && s.options.device != "cuda") {
    throw Error("unknown device '" + s.options.device + "': use cpu or cuda");
  }
  if (s.options.device == "cuda" && !at::hasCUDA()) {
    throw Error(
        "device cuda was asked for, but this LibTorch has no CUDA or no GPU is visible; use "
        "--device cpu");
  }
  if (progress)
    progress("reading " + (s.options.model.empty() ? std::string("demo model") : s.options.model),
             0, s.ranks());
  s.source = openModelSource(s.options.model);
  s.source.config.checkTensorParallel(s.options.tp, s.options.expertParallel, s.options.dcp);
  s.checkStages();
  const PipelineStages stages(s.source.config.numLayers, s.options.pp);
  if (!s.source.tokenizerJson.empty()) s.tokenizer = Tokenizer::fromFile(s.source.tokenizerJson);
  if (!s.options.dtype.empty()) {
    s.dtype = scalarTypeOf(parseDType(s.options.dtype));
  } else if (s.options.device == "cuda") {
    s.dtype = s.source.config.torchDtype == "float32"   ? at::kFloat
              : s.source.config.torchDtype == "float16" ? at::kHalf
                                                        : at::kBFloat16;
  }
  if (s.options.collectiveTimeoutSeconds > 0) {
    s.collectiveTimeout = std::chrono::milliseconds(
        std::max<int64_t>(1, int64_t(s.options.collectiveTimeoutSeconds * 1000)));
  } else if (const char* t = std::getenv("SHARDSCOPE_COLLECTIVE_TIMEOUT"); t && *t) {
    char* end = nullptr;
    const double seconds = std::strtod(t, &end);
    if (end == t || *end || !(seconds > 0))
      throw Error(std::string("SHARDSCOPE_COLLECTIVE_TIMEOUT must be a positive number of "
                              "seconds, got '") +
                  t + "'");
    s.collectiveTimeout = std::chrono::milliseconds(std::max<int64_t>(1, int64_t(seconds * 1000)));
  }
  if (!s.options.failure.armed()) {
    if (const char* f = std::getenv("SHARDSCOPE_INJECT_FAILURE"); f && *f)
      s.options.failure = FailureInjection::parse(f);
  }
  s.validateFailure(s.options.failure);
  s.armedFailure = s.options.failure;
  const bool nccl = wantsNccl(s.options);
  if (s.options.process && s.options.process->size() != s.options.tp) {
    throw Error("tp=" + std::to_string(s.options.tp) + " needs as many rank processes, but " +
                std::to_string(s.options.process->size()) +
                " were started; launch with mpirun -np " + std::to_string(s.options.tp));
  }
  for (int r = 0; r < s.ranks(); ++r) {
    const int gpu = s.options.process ? s.options.process->localDevice() : nccl ? r : 0;
    s.devices.push_back(s.options.device == "cpu" ? at::Device(at::kCPU)
                                                  : at::Device(at::kCUDA, c10::DeviceIndex(gpu)));
    if (!s.options.process || s.options.process->rank() == r) s.localRanks.push_back(r);
  }
  s.makeGroups();
  s.models.resize(size_t(s.ranks()));
  s.running = int(s.localRanks.size());
  std::atomic<int> loaded{0};
  for (int r : s.localRanks) {
    s.rankThreads.emplace_back([this, r, &loaded, &progress, stages] {
      Impl& st = *impl_;
      impl_->rankMain(r, [&st, r, &loaded, &progress, stages] {
        const int tp = st.options.tp;
        LoadContext ctx{*st.source.weights,
                        {r % tp, tp, st.options.expertParallel, st.options.dcp},
                        st.dtype,
                        st.devices[size_t(r)],
                        {stages, r / tp}};
        st.models[size_t(r)] = buildCausalLM(st.source.config, ctx);
        const int done = ++loaded;
        if (progress) progress("loaded rank " + std::to_string(r), done, st.ranks());
      });
    });
  }
  std::exception_ptr error;
  {
    std::unique_lock lock(s.mutex);
    s.cv.wait(lock, [&] { return s.running == 0; });
    error = s.firstError;
  }
  if (s.options.process) {
    // Every process fails the load together (a rank that loaded waits for no collective).
    try {
      std::exception_ptr agreed = s.agreeOnOutcome(error);
      if (agreed) error = agreed;
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!error) {
    try {
      // An expert-parallel rank process reads only its own experts' tensors.
      if (!(s.options.process && s.options.expertParallel)) s.source.weights->checkAllUsed();
      s.buildInfo();
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) {
    {
      std::lock_guard lock(s.mutex);
      s.stopping = true;
      s.ranksExit = true;  // no dispatcher was started
    }
    s.cv.notify_all();
    for (auto& t : s.rankThreads) t.join();
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
