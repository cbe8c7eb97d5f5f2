// JobChannel: rank 0 hands each client job (the serialized JobRequest) to every rank process over
// MPI. Waiting ranks poll with short sleeps instead of MPI's spinning wait, so an idle engine
// leaves the cores alone.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>

namespace shardscope::engine {

class JobChannel {
 public:
  // Collective over `parent`.
  explicit JobChannel(MPI_Comm parent);
  ~JobChannel();
  JobChannel(const JobChannel&) = delete;
  JobChannel& operator=(const JobChannel&) = delete;

  // Rank 0: the next job's bytes, or the end of service (nullopt).
  void send(const std::optional<std::string>& job);
  // Other ranks: waits for rank 0's next send.
  std::optional<std::string> receive();

 private:
  std::optional<std::string> exchange(std::optional<std::string> job);

  MPI_Comm comm_;
};

}  // namespace shardscope::engine
