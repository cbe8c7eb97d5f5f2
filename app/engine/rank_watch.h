// RankWatch: rank 0's view of the other rank processes' liveness, so that a rank killed under a
// job (SIGKILL, OOM killer) ends the job with one error naming the rank and its host instead of a
// collective that waits for the watchdog. Ranks on rank 0's host are checked directly (their
// /proc entry gone or a zombie); for the others the MPI launcher's SIGTERM is the signal.
#pragma once

#include <sys/types.h>
#include <string>
#include <vector>

#include "core/parallel/rank_process.h"

namespace shardscope::engine {

class RankWatch {
 public:
  // Collective: every process passes its pid.
  explicit RankWatch(const RankProcess& process);

  // "rank 1 (host h, pid 123) ended (killed or crashed)" for each lost rank on this host; empty
  // when none is lost.
  std::string lostRanks() const;
  // One line a rank: "rank 1: host h, pid 123" (the engine logs them at start).
  std::string ranksText() const;

 private:
  std::vector<pid_t> pids_;
  std::vector<std::string> hosts_;
  std::string host_;
  int rank_ = 0;
};

}  // namespace shardscope::engine
