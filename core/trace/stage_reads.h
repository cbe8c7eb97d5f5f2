// What a block reads from a module that one pipeline stage holds, on a rank of any stage (SPEC
// section 9, "Stages"). The block runs on every rank of every stage in lock step, so each of these
// is a collective over the world that every rank makes at the same point of the block: the stage
// holding the module computes or reads, and shares the result with every rank.
//   - a parameter: each rank gets the shard of the holding stage's rank with its own
//     tensor-parallel index (the shapes the module tree documents for that stage);
//   - whole(name): the holding stage gathers the parameter and shares the whole;
//   - a module call (model.model.norm(h), logits_processor(...)): the holding stage runs it on the
//     whole arguments every rank has, and shares the outputs.
// An error on the holding stage (a bad argument) is shared too, so every rank raises the same.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "../engine/rank_context.h"

namespace shardscope::trace {

// The stage that holds `m` when the block must fetch from it: -1 with one stage, or for modules
// every stage holds (or outside the model's tree).
int holdingStage(const RankContext& ctx, const Module& m);

// Runs `compute` on the ranks of `stage` and gives its outputs to every rank; its error, raised
// there, is raised on every rank (as RuntimeFailure).
std::vector<at::Tensor> computeOnStage(RankContext& ctx, int stage,
                                       const std::function<std::vector<at::Tensor>()>& compute);

// Parameter `name` of `m` as the holding stage's rank with this rank's tensor-parallel index has
// it; nullopt on every rank when `m` has no such parameter.
std::optional<at::Tensor> parameterFromStage(RankContext& ctx, int stage, const Module& m,
                                             const std::string& name);

// The name of `m`'s first parameter (empty without one), for error messages: the holding stage
// says it, so every rank's message is the same.
std::string firstParameterName(RankContext& ctx, const Module& m);

}  // namespace shardscope::trace
