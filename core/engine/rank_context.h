// RankContext: what a job's function sees on one rank thread (internal to core; includes LibTorch).
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

#include "../model/causal_lm.h"
#include "../model/model_source.h"
#include "../parallel/process_group.h"
#include "../parallel/stage_channel.h"
#include "decode_state.h"
#include "engine_types.h"

namespace shardscope {

struct RankContext;

// Shared between the caller's handle and the ranks running the job.
struct JobState {
  std::function<void(RankContext&)> run;
  std::atomic<int64_t> step{0};
  std::atomic<int64_t> total{0};
  std::atomic<bool> cancelRequested{false};
  std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;
  std::exception_ptr error;
  std::shared_ptr<void> result;  // job-specific, set by rank 0
  FailureInjection failure;      // the test hook, armed for this job or not
};

struct RankContext {
  int rank = 0;         // in the world: stage * tp + tensor-parallel rank
  ProcessGroup& group;  // this rank's stage: its tensor-parallel group
  CausalLM& model;
  const ModelSource& source;
  at::Device device;
  at::ScalarType dtype;
  JobState& job;
  DecodeState& decode;  // the rank's KV cache and decode graphs, kept across jobs
  // Pipeline parallelism: the channel between stages over the world group; nullptr with one
  // stage.
  StageChannel* pipeline = nullptr;
  // Whether this rank hands results, printed lines and progress to its caller: rank 0 of rank
  // threads, every rank process (each runs its own driver on the same whole values).
  bool reports = false;

  int stages() const { return pipeline ? pipeline->stages() : 1; }
  int stage() const { return pipeline ? pipeline->stage() : 0; }
  int worldSize() const { return group.size() * stages(); }
  // The rank that samples, decides on cancellation and reports a generation's result: the
  // tensor-parallel rank 0 of the last stage (it holds the logits). Rank 0 with one stage.
  int samplerRank() const { return (stages() - 1) * group.size(); }
  bool isSampler() const { return rank == samplerRank(); }
  // Whether this rank fills a generation's result: a reporting rank, or with pipeline stages (rank
  // threads only) the sampler, whose stage holds the logits.
  bool fillsResult() const { return stages() > 1 ? isSampler() : reports; }

  // The sampler decides; the decision reaches every rank through the next broadcast.
  bool cancelRequested() const { return job.cancelRequested.load(); }
  void setProgress(int64_t step) const {
    if (reports) job.step = step;
  }
};

}  // namespace shardscope
