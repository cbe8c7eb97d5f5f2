// Runs a function on every rank of a LocalGroup, one thread a rank, for suites that test
// collectives without an engine.
#pragma once

#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "core/parallel/local_group.h"

namespace shardscope::test {

// Runs fn(rank, group) on `size` threads; returns each rank's exception message (empty if none).
template <class F>
std::vector<std::string> runRanks(int size, F fn) {
  auto groups = LocalGroup::create(size);
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r, *groups[size_t(r)]);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace shardscope::test
