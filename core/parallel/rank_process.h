// RankProcess: what the engine needs when each rank is a process of its own (shardscope-engine or
// `shardscope-cli run --mpi` under mpirun or srun) instead of a thread: which rank this process
// runs, how its process group is built, and agreement with the other processes on how a job
// ended, so that every process fails (and rebuilds its group) together.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "process_group.h"

namespace shardscope {

class RankProcess {
 public:
  virtual ~RankProcess() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The GPU this process uses when the device is cuda (its rank among the processes of its host).
  virtual int localDevice() const = 0;
  // The host of every rank, in rank order.
  virtual const std::vector<std::string>& hosts() const = 0;
  // "mpi" (CPU tensors over MPI) or "nccl+mpi" (GPU tensors over NCCL bootstrapped by MPI).
  virtual std::string backendName(const at::Device& device) const = 0;

  // Collective over every process, called in the same order on each: this rank's group for
  // tensors on `device` (again after a failed job, when the old group cannot be reused).
  virtual std::unique_ptr<ProcessGroup> makeGroup(const at::Device& device,
                                                  const CollectiveOptions& options) = 0;
  // Collective: each process passes how its rank's job ended ("" when it succeeded; `isAbort` when
  // it only failed because another rank aborted the group). Returns the root cause: the first
  // rank's own failure, else the first abort, naming the rank and its host; "" when every rank
  // succeeded.
  virtual std::string agreeOnOutcome(const std::string& error, bool isAbort) = 0;
};

}  // namespace shardscope
