// CollectiveBoard: what every rank of one process group is doing with its collectives, so that a
// rank whose collective times out can say which collective it was, where in the model it was
// called (layer, port) and what each rank was waiting on at that moment. One board is shared by
// the group objects of all ranks; each rank writes only its own row.
//
// CollectiveSite: the caller's label for the collectives it makes while the object lives (a module
// path or a trace port, and the step), kept per thread: rank threads label their collectives
// without the ProcessGroup interface carrying a label argument.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace shardscope {

class CollectiveSite {
 public:
  // `where` must outlive the object (a module's path, a string owned by the caller).
  explicit CollectiveSite(const std::string& where, int64_t step = -1);
  CollectiveSite(std::string&& where, int64_t step = -1) = delete;  // it keeps a pointer
  ~CollectiveSite();
  CollectiveSite(const CollectiveSite&) = delete;
  CollectiveSite& operator=(const CollectiveSite&) = delete;

  // "model.model.layers[3].mlp.down_proj at step 2", or "" outside any site.
  static std::string current();

 private:
  const std::string* where_;
  int64_t step_;
  const CollectiveSite* outer_;
};

class CollectiveBoard {
 public:
  explicit CollectiveBoard(int size);

  // Rank `rank` starts waiting in `op` (its n-th collective since the last clear()), labelled
  // with the calling thread's CollectiveSite; `again`: a second wait of the same collective.
  void enter(int rank, const char* op, bool again = false);
  // Rank `rank` has its collective's result.
  void leave(int rank);
  // Forgets the history (between jobs).
  void clear();

  // One line per rank: what it waits on and for how long, or what it last finished.
  std::string describe() const;
  // "allReduceSum #57 (model.model.layers[3].mlp.down_proj at step 2)" for `rank`'s current or
  // last collective.
  std::string collectiveOf(int rank) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Row {
    const char* op = nullptr;
    std::string site;
    uint64_t count = 0;  // collectives entered
    bool waiting = false;
    Clock::time_point since{};  // entered (waiting) or left (not waiting)
  };
  static std::string label(const Row& r);

  mutable std::mutex mutex_;
  std::vector<Row> rows_;
};

}  // namespace shardscope
