// MpiGroup: one rank per process (shardscope-engine or `shardscope-cli run --mpi` under mpirun or
// srun), CPU tensors exchanged with MPI's non-blocking collectives. Waits poll the request, so the
// watchdog and abort() (from any thread of this process) end them; PeerAbortGroup carries an abort
// to the other processes. Sums are an all-gather followed by a sum in rank order, so every rank
// gets the bit-identical result that LocalGroup computes for rank threads.
//
// An aborted group cannot be reused: MPI cannot cancel a started collective, so the owner builds a
// new group on a fresh communicator (every process does, in the same order), and the buffers an
// abandoned collective may still write to are kept until the process ends.
#pragma once

#include <mpi.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "process_group.h"

namespace shardscope {

class MpiGroup : public ProcessGroup {
 public:
  // Collective over `parent`: every process of it calls create, in the same order.
  static std::unique_ptr<MpiGroup> create(MPI_Comm parent);
  // Takes `comm` (its own communicator, freed with the group unless the group was aborted).
  explicit MpiGroup(MPI_Comm comm);
  ~MpiGroup() override;
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  at::Tensor allGather(const at::Tensor& local, int64_t dim) override;
  void allReduceSum(at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;
  void abort(const std::string& reason) override;
  bool aborted() const override { return aborted_.load(); }
  void reset() override;
  bool reusableAfterAbort() const override { return false; }

 protected:
  std::string abortReason() const override;

 private:
  // `[size, local...]`: every rank's `local` stacked in rank order.
  at::Tensor gatherStacked(const at::Tensor& local, const char* op);
  // Waits for `request` with abort and watchdog; `buffers` outlive an abandoned wait.
  void wait(MPI_Request& request, const char* op, std::vector<at::Tensor> buffers);
  MPI_Datatype elementType(const at::Tensor& t, const char* op) const;

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::atomic<bool> aborted_{false};
  mutable std::mutex mutex_;
  std::string reason_;
};

}  // namespace shardscope
