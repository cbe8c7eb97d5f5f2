// How many intra-op threads (ATen's and OpenBLAS's OpenMP team) a rank uses. A rank of a small
// model on the CPU uses one: its parallel regions last microseconds, and each one waits for a
// scheduler time slice whenever another process holds a core (the demo model's forward took 29
// ms with two threads and one busy neighbour on two cores, 144 ms with two, against 7-8 ms with
// one thread; 5 ms with two threads on an idle machine: bench/RESULTS.md, "Intra-op threads").
#pragma once

#include <cstdint>

namespace shardscope {

// Parameters a rank may hold and still run with one thread by default.
constexpr int64_t kSmallRankParameters = 64'000'000;

// `requested` (> 0: --threads) wins; else one thread for a CPU rank of at most
// kSmallRankParameters parameters, else the machine's cores divided by its ranks (at least one).
int intraOpThreads(int requested, bool cpu, int64_t rankParameters, int cores, int ranks);

}  // namespace shardscope
