// The engine's rank threads (each loads its shard, then runs the jobs it is given), the job
// dispatcher that hands every job to every rank and settles how it ended, and the process groups
// they are rebuilt with after a failure.
#include <ATen/Parallel.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>

#include "../error.h"
#include "../parallel/local_group.h"
#include "../parallel/rank_process.h"
#include "engine_impl.h"
#include "generation.h"
#include "intra_op_threads.h"
#include "rank_context.h"
#ifdef SHARDSCOPE_WITH_NCCL
#include "../parallel/nccl_group.h"
#endif

namespace shardscope {

namespace {

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
  const bool isAbort = isCollectiveAborted(e);
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
  const bool isAbort = local && isCollectiveAborted(local);
  const std::string text = local ? describeException(local) : std::string();
  const std::string rootCause = options.process->agreeOnOutcome(text, isAbort);
  if (rootCause.empty()) return nullptr;
  // This rank's own failure keeps its type (a script error stays one); a rank that only saw the
  // abort, or finished, reports the root cause with the rank and host it happened on.
  if (local && !isAbort) return local;
  return std::make_exception_ptr(Error(rootCause));
}

}  // namespace shardscope
