// The generation loop one rank runs for a GenerateRequest: a prefill step holding every prompt,
// then one decode step per new token, all requests flattened into each step as vLLM schedules
// them. The sampling rank (RankContext::samplerRank: rank 0, or the last stage's first rank with
// pipeline stages) samples and broadcasts the ids (with the cancel decision) so every rank agrees.
#pragma once

#include "rank_context.h"

namespace shardscope {

// Throws Error before any collective if the request is invalid (the same on every rank).
void validateRequest(const GenerateRequest& request, const ModelConfig& config);

// Vllm: the text vLLM reports (an id without a token adds nothing); Display: for people (such an
// id shows as <|id N|>, Tokenizer::displayText).
enum class TextForm { Vllm, Display };

// The text of generated `ids`: decoded without special tokens and cut before the first of the
// `stop` strings it contains. Empty without a tokenizer.
std::string completionText(const Tokenizer* tokenizer, const std::vector<int64_t>& ids,
                           const std::vector<std::string>& stop, TextForm form = TextForm::Vllm);

// Runs the request on this rank; the sampling rank fills `result` (pass it on every rank).
// `observer`, if any, sees every port visit.
void runGeneration(RankContext& ctx, const GenerateRequest& request, GenerateResult* result,
                   PortObserver* observer = nullptr);

}  // namespace shardscope
