// MpiRankProcess: RankProcess over MPI_COMM_WORLD. CPU ranks exchange tensors with MpiGroup, GPU
// ranks with an NcclGroup whose unique id rank 0 broadcasts over MPI; either is wrapped in a
// PeerAbortGroup so that an abort reaches every process.
#pragma once

#include <mpi.h>

#include "mpi_runtime.h"
#include "rank_process.h"

namespace shardscope {

class MpiRankProcess : public RankProcess {
 public:
  // Collective over MPI_COMM_WORLD.
  explicit MpiRankProcess(const MpiRuntime& mpi);
  ~MpiRankProcess() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int localDevice() const override { return localRank_; }
  const std::vector<std::string>& hosts() const override { return hosts_; }
  std::string backendName(const at::Device& device) const override;
  std::unique_ptr<ProcessGroup> makeGroup(const at::Device& device,
                                          const CollectiveOptions& options) override;
  std::string agreeOnOutcome(const std::string& error, bool isAbort) override;

 private:
  // Every rank's `mine`, in rank order (collective over `comm`).
  std::vector<std::string> gatherStrings(const std::string& mine, MPI_Comm comm) const;

  int rank_ = 0;
  int size_ = 1;
  int localRank_ = 0;
  std::vector<std::string> hosts_;
  std::string where_;   // "host h, pid p"
  MPI_Comm groups_;     // parent of every group (used by makeGroup only)
  MPI_Comm agreement_;  // agreeOnOutcome only
};

}  // namespace shardscope
