// NcclGroup: one GPU per rank thread, collectives through NCCL on the rank's current CUDA stream.
// Built only when LibTorch has CUDA. Communicators are created together from one unique id
// (ncclCommInitRank inside a group call) and destroyed with the group.
//
// Abort: the group objects of all ranks share one state. abort(), from any rank or thread, marks
// the whole group aborted (every rank's wait sees it at once and throws CollectiveAborted) and
// aborts every communicator with ncclCommAbort, so that NCCL kernels already running on any GPU,
// also inside replayed CUDA graphs, quit. NCCL frees an aborted communicator only once every CUDA
// graph recorded with it is destroyed, so the aborts run on a thread of the shared state, joined
// when the last group object goes away; the owner then builds a new group (reusableAfterAbort()
// is false). No NCCL call reaches a communicator after its abort: each call checks the flag under
// a shared lock that abort() takes exclusively to set it.
#pragma once

#include <memory>
#include <vector>

#include "process_group.h"

namespace shardscope {

class NcclGroup : public ProcessGroup {
 public:
  // Creates one communicator per rank on devices 0..size-1. Call from one thread; each returned
  // group is then used from its own rank thread.
  static std::vector<std::unique_ptr<NcclGroup>> create(int size);
  // One communicator per device in `devices` (rank i on devices[i]): a stage's tensor-parallel
  // group, or the world of a pipeline.
  static std::vector<std::unique_ptr<NcclGroup>> create(const std::vector<int>& devices);

  ~NcclGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  at::Tensor allGather(const at::Tensor& local, int64_t dim) override;
  void allReduceSum(at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;
  void abort(const std::string& reason) override;
  bool aborted() const override;
  bool graphCapturable() const override { return true; }
  void waitForStream(const char* what) override;
  void reset() override;
  bool reusableAfterAbort() const override { return false; }

  struct Shared;
  NcclGroup(int rank, int size, std::shared_ptr<Shared> shared);

 protected:
  std::string abortReason() const override;

 private:
  // Enqueues one NCCL call (`launch` gets the communicator and the stream), then waits for it.
  template <typename Launch>
  void collective(const char* op, Launch&& launch);
  void check(int result, const char* op) const;
  void waitFor(const char* op);  // polls the stream with abort and timeout

  int rank_;
  int size_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace shardscope
