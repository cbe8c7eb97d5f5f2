#include "mpi_rank_process.h"

#include <unistd.h>

#include "../error.h"
#include "mpi_group.h"
#include "peer_abort_group.h"
#ifdef SHARDSCOPE_WITH_NCCL
#include "nccl_group.h"
#endif

namespace shardscope {
namespace {

MPI_Comm duplicate(MPI_Comm parent) {
  MPI_Comm comm;
  MPI_Request request;
  MPI_Comm_idup(parent, &comm, &request);
  mpiWait(request, "communicator duplication");
  return comm;
}

}  // namespace

MpiRankProcess::MpiRankProcess(const MpiRuntime& mpi)
    : rank_(mpi.rank()),
      size_(mpi.size()),
      localRank_(mpi.localRank()),
      where_("host " + mpi.host() + ", pid " + std::to_string(::getpid())),
      groups_(duplicate(MPI_COMM_WORLD)),
      agreement_(duplicate(MPI_COMM_WORLD)) {
  hosts_ = gatherStrings(mpi.host(), agreement_);
}

MpiRankProcess::~MpiRankProcess() {
  MPI_Comm_free(&agreement_);
  MPI_Comm_free(&groups_);
}

std::string MpiRankProcess::backendName(const at::Device& device) const {
  return device.is_cuda() ? "nccl+mpi" : "mpi";
}

std::vector<std::string> MpiRankProcess::gatherStrings(const std::string& mine,
                                                       MPI_Comm comm) const {
  std::vector<int> lengths(size_t(size_), 0);
  int length = int(mine.size());
  MPI_Request request;
  MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm, &request);
  mpiWait(request, "string length exchange");
  std::vector<int> offsets(size_t(size_), 0);
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[size_t(r)] = total;
    total += lengths[size_t(r)];
  }
  std::string all(size_t(total), '\0');
  MPI_Iallgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                  MPI_CHAR, comm, &request);
  mpiWait(request, "string exchange");
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r)
    out.push_back(all.substr(size_t(offsets[size_t(r)]), size_t(lengths[size_t(r)])));
  return out;
}

std::unique_ptr<ProcessGroup> MpiRankProcess::makeGroup(const at::Device& device,
                                                        const CollectiveOptions& options) {
  std::unique_ptr<ProcessGroup> inner;
  if (device.is_cuda()) {
#ifdef SHARDSCOPE_WITH_NCCL
    std::string id = rank_ == 0 ? NcclGroup::newUniqueId() : std::string();
    id.resize(128);  // NCCL_UNIQUE_ID_BYTES
    MPI_Request request;
    MPI_Ibcast(id.data(), int(id.size()), MPI_CHAR, 0, groups_, &request);
    mpiWait(request, "NCCL unique id broadcast");
    inner = NcclGroup::join(rank_, size_, id, device.index());
#else
    throw Error("GPU rank processes need NCCL, and this build has none; use --device cpu");
#endif
  } else {
    inner = MpiGroup::create(groups_);
  }
  inner->setOptions(options);
  auto group = std::make_unique<PeerAbortGroup>(std::move(inner), groups_, where_);
  group->setOptions(options);
  return group;
}

std::string MpiRankProcess::agreeOnOutcome(const std::string& error, bool isAbort) {
  // One leading letter per rank: ' ' succeeded, 'A' aborted by another rank, 'E' failed itself.
  const char kind = error.empty() ? ' ' : isAbort ? 'A' : 'E';
  const auto outcomes = gatherStrings(kind + error, agreement_);
  for (char wanted : {'E', 'A'}) {
    for (int r = 0; r < size_; ++r) {
      const std::string& o = outcomes[size_t(r)];
      if (o[0] != wanted) continue;
      return "rank " + std::to_string(r) + " (host " + hosts_[size_t(r)] + "): " + o.substr(1);
    }
  }
  return {};
}

}  // namespace shardscope
