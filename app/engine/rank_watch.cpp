#include "rank_watch.h"

#include <mpi.h>
#include <unistd.h>

#include <fstream>

#include "core/parallel/mpi_runtime.h"

namespace shardscope::engine {
namespace {

// Gone, or a zombie that its launcher has not reaped yet.
bool processEnded(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

}  // namespace

RankWatch::RankWatch(const RankProcess& process)
    : hosts_(process.hosts()), host_(hostName()), rank_(process.rank()) {
  pids_.resize(size_t(process.size()));
  const int pid = int(::getpid());
  std::vector<int> all(size_t(process.size()));
  MPI_Request request;
  MPI_Iallgather(&pid, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD, &request);
  mpiWait(request, "pid exchange");
  for (size_t r = 0; r < all.size(); ++r) pids_[r] = pid_t(all[r]);
}

std::string RankWatch::lostRanks() const {
  std::string lost;
  for (size_t r = 0; r < pids_.size(); ++r) {
    if (int(r) == rank_ || hosts_[r] != host_ || !processEnded(pids_[r])) continue;
    lost += (lost.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " (host " +
            hosts_[r] + ", pid " + std::to_string(pids_[r]) + ") ended (killed or crashed)";
  }
  return lost;
}

std::string RankWatch::ranksText() const {
  std::string text;
  for (size_t r = 0; r < pids_.size(); ++r)
    text += "rank " + std::to_string(r) + ": host " + hosts_[r] + ", pid " +
            std::to_string(pids_[r]) + "\n";
  return text;
}

}  // namespace shardscope::engine
