// Engine: a long-lived owner of one worker thread per tensor-parallel rank, each bound to its
// device and holding its shards of one model, and of a job queue. Jobs run one at a time on every
// rank. A failure on any rank aborts the group's collectives, the job fails with that one error,
// and the engine serves the next job.
//
// Threading: every public method may be called from any thread. Job handles are shared; results
// are plain C++ values (no LibTorch), safe to hand to the UI thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine_types.h"

namespace shardscope {

struct JobState;
class Tokenizer;
struct RankContext;

// A job's handle: progress, cancellation, and its outcome.
class JobHandle {
 public:
  JobHandle() = default;
  explicit JobHandle(std::shared_ptr<JobState> s) : state_(std::move(s)) {}

  JobProgress progress() const;
  void cancel();
  bool done() const;
  // Blocks until the job ends; rethrows its error.
  void wait() const;
  // Waits up to `ms`; true when the job has ended.
  bool waitFor(int ms) const;
  std::shared_ptr<JobState> state() const { return state_; }

 private:
  std::shared_ptr<JobState> state_;
};

class Engine {
 public:
  using LoadProgress = std::function<void(const std::string& what, int done, int total)>;

  // Starts the rank threads and loads the model on each (blocking; throws on a bad model).
  explicit Engine(EngineOptions options, LoadProgress progress = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelInfo& info() const;
  // The model's tokenizer, or nullptr when the checkpoint has no tokenizer.json.
  std::shared_ptr<const Tokenizer> tokenizer() const;

  // Queues generation; generateResult(handle) waits for it and returns its result.
  JobHandle generate(GenerateRequest request);
  static GenerateResult generateResult(const JobHandle& h);

  // Internal seam for other core layers (trace interleaver) and tests: runs `fn` on every rank.
  JobHandle submit(std::function<void(RankContext&)> fn, int64_t totalSteps = 0);

  // Whether a rank is inside a job now. After a job failed and a rank had not left it within the
  // collective timeout, the caller has heard of the failure while that rank may still run the
  // job's code (and read the values it was given).
  bool rankInJob() const;

  // Test hook: the next job that starts runs with `failure` (see FailureInjection); throws Error
  // when it names a rank the engine does not have, or asks a single rank to get stuck.
  void injectFailure(const FailureInjection& failure);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardscope
