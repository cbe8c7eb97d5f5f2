// PeerAbortGroup: makes abort() reach every process of a group whose ranks are processes. It wraps
// the group that moves the tensors (MpiGroup on the CPU, NcclGroup bootstrapped over MPI on GPUs),
// whose own abort reaches only this process: abort() also sends the reason to every other process,
// and a watcher thread aborts the wrapped group as soon as a peer's reason arrives, so one rank's
// failure wakes the collectives of all within milliseconds. The messages travel on the group's own
// communicator, so a late abort of a failed job never reaches the group built after it. The
// wrapped group's watchdog names its rank only: its CollectiveTimeout comes out of here naming this
// process too (host, pid), on the CPU and on GPUs alike.
#pragma once

#include <mpi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "process_group.h"

namespace shardscope {

class PeerAbortGroup : public ProcessGroup {
 public:
  // Collective over `parent` (a communicator of the same processes, in rank order). `where` names
  // this process in the reasons it sends ("host h1, pid 123").
  PeerAbortGroup(std::unique_ptr<ProcessGroup> inner, MPI_Comm parent, std::string where);
  ~PeerAbortGroup() override;
  PeerAbortGroup(const PeerAbortGroup&) = delete;
  PeerAbortGroup& operator=(const PeerAbortGroup&) = delete;

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  at::Tensor allGather(const at::Tensor& local, int64_t dim) override;
  void allReduceSum(at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;
  void abort(const std::string& reason) override;
  bool aborted() const override { return inner_->aborted(); }
  void reset() override { inner_->reset(); }
  bool reusableAfterAbort() const override { return false; }
  bool graphCapturable() const override { return inner_->graphCapturable(); }
  void waitForStream(const char* what) override;

 protected:
  std::string abortReason() const override;

 private:
  void watch();
  // Aborts the wrapped group with the first reason (ours or a peer's).
  bool abortInner(const std::string& reason);
  void sendToPeers(const std::string& reason);
  // Applies the collective watchdog set on this group to the wrapped one.
  ProcessGroup& inner();
  // Runs `call` on the wrapped group; its watchdog's CollectiveTimeout comes out naming this
  // process (`where`), and the peers are told at once, like abort() does.
  template <typename Call>
  auto located(Call&& call);

  std::unique_ptr<ProcessGroup> inner_;
  MPI_Comm comm_;
  std::string where_;
  mutable std::mutex mutex_;
  std::string reason_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sent_{false};
  std::thread watcher_;
};

}  // namespace shardscope
