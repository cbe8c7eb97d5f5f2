// MpiRuntime: MPI for the life of one object (MPI_Init_thread with MPI_THREAD_MULTIPLE, then
// MPI_Finalize), plus the small helpers every MPI user in core shares: a polling wait that does not
// burn a core while peers are slow, and a place for buffers MPI may still write to.
#pragma once

#include <mpi.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace shardscope {

class MpiRuntime {
 public:
  // Throws Error when MPI cannot give MPI_THREAD_MULTIPLE (the engine calls MPI from its rank,
  // dispatcher and watcher threads).
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The rank among the processes of this host (binds a rank process to its GPU).
  int localRank() const { return localRank_; }
  const std::string& host() const { return host_; }

  // Whether this process was started by an MPI launcher (mpirun, srun): MPI_Init would otherwise
  // start a one-process "singleton" job, which is never what a user asking for ranks wants.
  static bool launched();

 private:
  int rank_ = 0;
  int size_ = 1;
  int localRank_ = 0;
  std::string host_;
};

// Waits for `request`, testing it and sleeping a little between tests (MPI's own blocking calls
// spin, which starves oversubscribed ranks). `interrupt`, when given, is called between tests and
// may throw to abandon the wait; `deadline` bounds it (a timeout then throws Error naming `what`).
void mpiWait(
    MPI_Request& request, const char* what, const std::function<void()>& interrupt = {},
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

// Keeps `thing` alive until the process ends. MPI cannot cancel a started collective: its buffers
// (and request) must outlive an abandoned wait, or a late peer's data lands in freed memory.
void keepUntilExit(std::shared_ptr<void> thing);

// This host's name.
std::string hostName();

}  // namespace shardscope
