#include "failure_injection.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>
#include <vector>

#include "../error.h"
#include "forward_batch.h"

namespace shardscope {

FailureInjection FailureInjection::parse(const std::string& spec) {
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ':');) parts.push_back(item);
  const auto bad = [&spec] {
    return Error("failure injection '" + spec +
                 "' is not KIND:RANK:LAYER:STEP with KIND throw, stuck or nan (e.g. throw:1:3:0)");
  };
  if (parts.size() != 4) throw bad();
  FailureInjection f;
  if (parts[0] == "throw") {
    f.kind = Kind::Throw;
  } else if (parts[0] == "stuck") {
    f.kind = Kind::Stuck;
  } else if (parts[0] == "nan") {
    f.kind = Kind::NaN;
  } else {
    throw bad();
  }
  try {
    size_t used = 0;
    f.rank = std::stoi(parts[1], &used);
    if (used != parts[1].size()) throw bad();
    f.layer = std::stoll(parts[2], &used);
    if (used != parts[2].size()) throw bad();
    f.step = std::stoll(parts[3], &used);
    if (used != parts[3].size()) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  if (f.rank < 0 || f.layer < 0 || f.step < 0) throw bad();
  return f;
}

std::string FailureInjection::describe() const {
  const char* what = kind == Kind::Throw   ? "throw"
                     : kind == Kind::Stuck ? "stuck"
                     : kind == Kind::NaN   ? "nan"
                                           : "none";
  return std::string(what) + " on rank " + std::to_string(rank) + " at layer " +
         std::to_string(layer) + " of step " + std::to_string(step);
}

void applyFailureInjection(const FailureInjection& f, int64_t layer, const ForwardBatch& batch,
                           at::Tensor& hidden) {
  const int rank = batch.worldRank >= 0 ? batch.worldRank : batch.group.rank();
  if (!f.targets(layer, batch.step) || rank != f.rank) return;
  switch (f.kind) {
    case FailureInjection::Kind::Throw:
      throw Error("injected failure (" + f.describe() + ")");
    case FailureInjection::Kind::Stuck:
      // Like a rank lost in its own work: the others time out in their next collective (the
      // watchdog), abort the group, and this rank leaves with them.
      while (!batch.group.aborted()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      batch.group.throwIfAborted();
      return;
    case FailureInjection::Kind::NaN:
      hidden = hidden.clone(at::MemoryFormat::Contiguous);
      hidden.view({-1}).narrow(0, 0, 1).fill_(NAN);
      return;
    case FailureInjection::Kind::None:
      return;
  }
}

}  // namespace shardscope
