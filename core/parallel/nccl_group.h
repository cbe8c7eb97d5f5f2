// NcclGroup: one GPU per rank thread, collectives through NCCL on the rank's current CUDA stream.
// Built only when LibTorch has CUDA. Communicators are created together from one unique id
// (ncclCommInitRank inside a group call) and destroyed, or aborted, with the group.
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

  ~NcclGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  at::Tensor allGather(const at::Tensor& local, int64_t dim) override;
  void allReduceSum(at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;
  void abort(const std::string& reason) override;
  bool graphCapturable() const override { return true; }
  void waitForStream(const char* what) override { waitFor(what); }
  void reset() override;
  bool reusableAfterAbort() const override { return false; }

  struct Comm;
  NcclGroup(int rank, int size, std::unique_ptr<Comm> comm);

 private:
  void check(int result, const char* op);
  void waitFor(const char* op);  // polls the stream with abort and timeout

  int rank_;
  int size_;
  std::unique_ptr<Comm> comm_;
};

}  // namespace shardscope
