// ProcessGroup: the collectives a tensor-parallel model needs, behind one interface so that model
// code never knows whether its ranks are threads sharing a CPU (LocalGroup) or GPUs (NcclGroup).
//
// Contract (as in c10d): every rank calls the same collectives in the same order with tensors of
// the same shape and dtype. Each call blocks its caller until its result is ready to read on the
// calling rank's current stream. A collective waits at most `timeout`; abort() makes every pending
// and future collective on every rank throw CollectiveAborted until reset() is called, which the
// engine does once all ranks have left the failed job.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <string>

namespace shardscope {

struct CollectiveOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Concatenation of every rank's `local` along `dim`, in rank order. Returns a new tensor.
  virtual at::Tensor allGather(const at::Tensor& local, int64_t dim) = 0;
  // In place: `tensor` becomes the sum over ranks (summed in rank order, identical on every rank).
  virtual void allReduceSum(at::Tensor& tensor) = 0;
  // In place: every rank's `tensor` becomes root's.
  virtual void broadcast(at::Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;

  // Wakes every rank waiting in a collective with CollectiveAborted(reason). Callable from any
  // thread.
  virtual void abort(const std::string& reason) = 0;
  // Clears an abort; call only when no rank is inside a collective.
  virtual void reset() = 0;
  // False when an aborted group cannot be reset in place (NCCL): the owner then builds a new one.
  virtual bool reusableAfterAbort() const { return true; }
  // Whether the collectives can be recorded in a CUDA graph (one rank, or NCCL on the stream).
  virtual bool graphCapturable() const { return size() == 1; }
  // Blocks until the current stream's work (a replayed graph's collectives) is done, with the
  // same abort and timeout as a collective.
  virtual void waitForStream(const char* what) {}

  const CollectiveOptions& options() const { return options_; }
  void setOptions(const CollectiveOptions& o) { options_ = o; }

 private:
  CollectiveOptions options_;
};

}  // namespace shardscope
