// Engine::Impl, the engine's state shared by engine.cpp (loading, the public calls) and
// engine_ranks.cpp (the rank threads, the job dispatcher and the process groups). Private to
// core/engine.
#pragma once

#include <ATen/ATen.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "../model/causal_lm.h"
#include "../model/failure_injection.h"
#include "../model/model_source.h"
#include "../parallel/pipeline_stages.h"
#include "../parallel/process_group.h"
#include "../parallel/stage_channel.h"
#include "engine.h"
#include "rank_context.h"

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
  // The constructor's steps, in order.
  void checkOptions() const;  // tp, pp, device, rank processes
  void resolveDtype();        // the option, else the checkpoint's on the GPU, fp32 on the CPU
  void resolveCollectiveTimeout();
  void armFailureInjection();  // the option, else SHARDSCOPE_INJECT_FAILURE
  void placeRanks();           // devices and this process's ranks
  // Each local rank loads its shard on its thread; the first error, agreed among rank processes.
  std::exception_ptr loadRanks(const PipelineStages& stages, const Engine::LoadProgress& progress);
  void stopRanksAfterFailedLoad();
  void validateFailure(const FailureInjection& f) const;
  // Refuses pipeline stages combined with what they do not run with.
  void checkStages() const;
  void recordError(int rank, std::exception_ptr e);
  // Rank processes: every process learns how the job ended on the others and fails with the root
  // cause when any rank failed (so that all of them rebuild their groups together).
  std::exception_ptr agreeOnOutcome(std::exception_ptr local);
  void buildInfo();
  // Whether the ranks form an NCCL group (auto: when every rank can have its own GPU).
  static bool wantsNccl(const EngineOptions& o);
};

}  // namespace shardscope
