// The one-token expert kernels' variants that stream the chosen experts' weights through shared
// memory with bulk copies (Hopper's TMA) instead of holding the loads in flight in registers. The
// bits are those of the register kernels (fused_moe_one_token.cuh).
#pragma once

#include <optional>

#include "kernels.h"

namespace shardscope::kernels {

// Which of the two one-token kernels stream for these shapes and pointers: a device of sm_90 or
// later, rows of whole 16-byte pieces (gate_up: hidden, down: inter) at 16-byte aligned addresses,
// and switched on: SHARDSCOPE_MOE_BULK=1 streams both, =gate_up only gate_up, unset or 0 neither
// (core/runtime_switches.h; other values are refused there). Off by default until a GPU run has
// measured it against the register kernels.
struct BulkStages {
  bool gateUp = false, down = false;
};
BulkStages oneTokenBulkStages(const FusedMoeArgs& a);

// gate_up + SwiGLU into a.h, one block an SM, when oneTokenBulkStages(a).gateUp: the launch's
// result; nullopt (nothing launched: the caller runs the register kernel) otherwise. The setting
// and the plan are read once for both.
std::optional<cudaError_t> launchBulkGateUp(const FusedMoeArgs& a, cudaStream_t stream);
// down with the combine into a.y, one block an SM, when oneTokenBulkStages(a).down (else nullopt);
// its weights are asked for before it waits on gate_up's h.
std::optional<cudaError_t> launchBulkDown(const FusedMoeArgs& a, cudaStream_t stream);

}  // namespace shardscope::kernels
