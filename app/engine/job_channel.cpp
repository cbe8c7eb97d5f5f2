#include "job_channel.h"

#include <cstdint>

#include "core/parallel/mpi_runtime.h"

namespace shardscope::engine {

JobChannel::JobChannel(MPI_Comm parent) {
  MPI_Request request;
  MPI_Comm_idup(parent, &comm_, &request);
  mpiWait(request, "communicator duplication for jobs");
}

JobChannel::~JobChannel() {
  MPI_Comm_free(&comm_);
}

void JobChannel::send(const std::optional<std::string>& job) {
  exchange(job);
}

std::optional<std::string> JobChannel::receive() {
  return exchange(std::nullopt);
}

std::optional<std::string> JobChannel::exchange(std::optional<std::string> job) {
  // The length first (-1: the end of service), then the bytes.
  int64_t length = job ? int64_t(job->size()) : -1;
  MPI_Request request;
  MPI_Ibcast(&length, 1, MPI_INT64_T, 0, comm_, &request);
  mpiWait(request, "job broadcast");
  if (length < 0) return std::nullopt;
  std::string bytes = job ? *job : std::string(size_t(length), '\0');
  MPI_Ibcast(bytes.data(), int(length), MPI_CHAR, 0, comm_, &request);
  mpiWait(request, "job broadcast");
  return bytes;
}

}  // namespace shardscope::engine
