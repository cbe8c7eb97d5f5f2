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

// Whether launchRouterInGateUp takes a: as oneTokenExpertsTake, with the router's weights
// (a.routerWeight, its logits written to a.routerLogits = a.select.logits), at most 16 x 8
// experts, on a device whose SMs hold its clusters (sm_90 on), and switched on with
// SHARDSCOPE_MOE_ROUTER_IN_GATE_UP=1 (off by default until an H200 times it; the same bits
// either way).
bool routerInGateUpTakes(const FusedMoeArgs& a);

// The router's GEMV (after the post-attention norm when a.norm.normWeight is set: a.x is then
// the hidden state before it) inside gate_up + SwiGLU, then down with the combine: two kernels
// where routerKernel and launchOneTokenExperts take three.
cudaError_t launchRouterInGateUp(const FusedMoeArgs& a, cudaStream_t stream);

}  // namespace shardscope::kernels
