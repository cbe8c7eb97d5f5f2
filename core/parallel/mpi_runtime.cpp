#include "mpi_runtime.h"

#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "../error.h"

namespace shardscope {

std::string hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

bool MpiRuntime::launched() {
  // Open MPI's mpirun, PMIx launchers (srun --mpi=pmix) and PMI-1/2 launchers.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

MpiRuntime::MpiRuntime(int* argc, char*** argv) : host_(hostName()) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    throw Error("MPI_Init_thread failed; start rank processes with mpirun or srun");
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw Error(
        "this MPI library does not offer MPI_THREAD_MULTIPLE, which rank processes need; use an "
        "Open MPI built with thread support (Debian's openmpi-bin is)");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &localRank_);
  MPI_Comm_free(&local);
}

MpiRuntime::~MpiRuntime() {
  MPI_Finalize();
}

void mpiWait(MPI_Request& request, const char* what, const std::function<void()>& interrupt,
             std::chrono::steady_clock::time_point deadline) {
  for (int tests = 0;; ++tests) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (interrupt) interrupt();
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(std::string("MPI ") + what + " did not complete in time");
    // Spin briefly (a collective between idle ranks takes microseconds), then back off.
    if (tests < 200) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(tests < 2000 ? 20 : 200));
    }
  }
}

void keepUntilExit(std::shared_ptr<void> thing) {
  static std::mutex mutex;
  static std::vector<std::shared_ptr<void>> kept;
  std::lock_guard lock(mutex);
  kept.push_back(std::move(thing));
}

}  // namespace shardscope
