// ProcessGroup: the collectives a tensor-parallel model needs, behind one interface so that model
// code never knows whether its ranks are threads sharing a CPU (LocalGroup) or GPUs (NcclGroup).
//
// Contract (as in c10d): every rank calls the same collectives in the same order with tensors of
// the same shape and dtype. Each call blocks its caller until its result is ready to read on the
// calling rank's current stream. A collective waits at most `timeout` (the watchdog): then the rank
// throws CollectiveTimeout, whose message names the collective, where it was called
// (CollectiveSite) and what every rank was waiting on, and aborts the group. abort(), from any
// rank or thread, makes every pending and future collective on every rank throw
// CollectiveAborted(reason) until reset() (local) or until the group is replaced (NCCL: every
// communicator of the group is aborted with ncclCommAbort); the engine does either once all ranks
// have left the failed job.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <string>

namespace shardscope {

struct CollectiveOptions {
  // The watchdog: how long one collective (or one replayed graph of collectives) may wait.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
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
  // Whether abort() was called (by any rank); throwIfAborted() throws CollectiveAborted then.
  virtual bool aborted() const = 0;
  void throwIfAborted() const;
  // Clears an abort; call only when no rank is inside a collective.
  virtual void reset() = 0;
  // False when an aborted group cannot be reset in place (NCCL): the owner then builds a new one.
  virtual bool reusableAfterAbort() const { return true; }
  // Whether the collectives can be recorded in a CUDA graph (one rank, or NCCL on the stream).
  virtual bool graphCapturable() const { return size() == 1; }
  // Blocks until the current stream's work (a replayed graph's collectives) is done, with the
  // same abort and timeout as a collective.
  virtual void waitForStream(const char* what) { throwIfAborted(); }

  const CollectiveOptions& options() const { return options_; }
  void setOptions(const CollectiveOptions& o) { options_ = o; }

 protected:
  // The reason given to the first abort() (empty before).
  virtual std::string abortReason() const = 0;

 private:
  CollectiveOptions options_;
};

}  // namespace shardscope
