// LocalGroup: ranks are threads of one process exchanging tensors through shared memory. Works for
// CPU tensors and for several ranks on one GPU. Reductions sum in rank order so every rank gets the
// bit-identical result.
#pragma once

#include <memory>
#include <vector>

#include "process_group.h"

namespace shardscope {

class LocalGroupState;

class LocalGroup : public ProcessGroup {
 public:
  // One group object per rank, all sharing one state.
  static std::vector<std::unique_ptr<LocalGroup>> create(int size);

  int rank() const override { return rank_; }
  int size() const override;
  at::Tensor allGather(const at::Tensor& local, int64_t dim) override;
  void allReduceSum(at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;
  void abort(const std::string& reason) override;
  bool aborted() const override;
  void reset() override;

  LocalGroup(int rank, std::shared_ptr<LocalGroupState> state);
  ~LocalGroup() override;

 protected:
  std::string abortReason() const override;

 private:
  // Publishes `t` in this rank's slot and waits until every rank has published.
  const std::vector<at::Tensor>& exchange(const at::Tensor& t, const char* op);
  // Waits until every rank has finished reading the slots of the current exchange.
  void release(const char* op);

  int rank_;
  std::shared_ptr<LocalGroupState> state_;
};

}  // namespace shardscope
