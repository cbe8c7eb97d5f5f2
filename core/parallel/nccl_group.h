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

#include "../runtime_switches.h"
#include "all_reduce_algorithm.h"
#include "process_group.h"

namespace shardscope {

class NcclGroup : public ProcessGroup {
 public:
  // Up to this size an all-reduce takes the peer or symmetric path (a decode step's rows up to
  // batch 64 of a 4096-wide bf16 model); larger ones are bandwidth-bound and NCCL's rings do well.
  static constexpr size_t kSmallAllReduceBytes = 512 * 1024;

  // Creates one communicator per rank on devices 0..size-1. Call from one thread; each returned
  // group is then used from its own rank thread. `algorithm` picks allReduceSum's implementation
  // for small tensors (peer memory, NCCL, or NCCL on registered symmetric windows); larger ones
  // and Auto without peer access use NCCL.
  static std::vector<std::unique_ptr<NcclGroup>> create(
      int size, AllReduceAlgorithm algorithm = RuntimeSwitches::current().allReduce);
  // One communicator per device in `devices` (rank i on devices[i]): a stage's tensor-parallel
  // group, or the world of a pipeline. create(size) is create({0..size-1}).
  static std::vector<std::unique_ptr<NcclGroup>> create(
      const std::vector<int>& devices,
      AllReduceAlgorithm algorithm = RuntimeSwitches::current().allReduce);
  // The implementation small all-reduces use in this group (never Auto).
  AllReduceAlgorithm allReduceAlgorithm() const;
  // Rank processes (one GPU each, bootstrapped over MPI): newUniqueId() on one rank, its bytes sent
  // to every process, then join() on every process with its rank and GPU (collective). A joined
  // group's small all-reduces use NCCL (peer pointers need the ranks in one process).
  static std::string newUniqueId();
  static std::unique_ptr<NcclGroup> join(int rank, int size, const std::string& uniqueId,
                                         int device);

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
