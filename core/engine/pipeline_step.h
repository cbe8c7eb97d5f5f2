// One model step across pipeline stages (vLLM's pipeline_parallel_size), run by every rank: the
// stages take turns in order. While stage s runs its layers, every other rank follows it: it
// receives each port value stage s shares (the ports the trace waits on) and hands it to its
// observer, until stage s hands over the residual stream, which stage s + 1 continues from. No
// micro-batches overlap: a step costs the sum of the stages' times plus one hand-over each.
// With one stage this is the model's forward and nothing more.
#pragma once

#include <functional>

#include "rank_context.h"

namespace shardscope {

// Runs the step. On the last stage `lastStage` gets the final hidden states [T, H] during that
// stage's turn (so what it visits is shared with the followers) and its result is returned there;
// elsewhere the result is undefined.
at::Tensor runStages(RankContext& ctx, const at::Tensor& ids, const ForwardBatch& batch,
                     const std::function<at::Tensor(const at::Tensor& hidden)>& lastStage);

// The stage that owns `module`'s port `role`, when ranks of other stages must receive its value
// from that stage; -1 when every rank sees the port itself (one stage, a port every stage visits,
// a module outside the model's tree).
int sharingStage(const RankContext& ctx, const Module& module, PortRole role);

// Sends a port's whole value from its stage to every rank (called on the owning stage's ranks
// during its turn, where every other rank follows).
void sharePortValue(RankContext& ctx, const Module& module, PortRole role,
                    const std::vector<at::Tensor>& wholes, bool tuple);

}  // namespace shardscope
