// The experts of a single token (a decode step at batch 1) from its router logits, in two
// kernels with no routing lists between them: each block chooses the token's experts itself.
#pragma once

#include "kernels.h"

namespace shardscope::kernels {

// Whether launchOneTokenExperts takes a: one token, its logits (a.select.logits) at most
// 32 * kLaneExperts experts wide, and not switched off with SHARDSCOPE_MOE_ONE_TOKEN=0 (to compare;
// the results are the same bits either way).
bool oneTokenExpertsTake(const FusedMoeArgs& a);

// gate_up + SwiGLU, then down with the combine, for a.tokens == 1 (oneTokenExpertsTake). The
// kernel before must have written the logits; the choice's ids and weights are written too.
cudaError_t launchOneTokenExperts(const FusedMoeArgs& a, cudaStream_t stream);

}  // namespace shardscope::kernels
