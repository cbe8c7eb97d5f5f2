// Prompt forms: what `model.trace(prompt)` and `tracer.invoke(prompt)` accept, normalised to the
// token ids of one request per prompt. The forms are those nnsight and vLLM take:
//   "text"                                     one prompt, tokenized by the model's tokenizer
//   [785, 6722, 315]  (or a 1-D integer tensor) one prompt of token ids
//   TokensPrompt(prompt_token_ids=[...])        vLLM's TypedDict, i.e. {"prompt_token_ids": [...]}
//   {"prompt": "text"}                          vLLM's TextPrompt
//   {"input_ids": ..., "attention_mask": ...}   a tokenizer's output: positions whose mask is 0
//                                               are dropped; a 2-D input_ids is one prompt a row
//   [p1, p2, ...]  (or a 2-D integer tensor)    a batch: one request per prompt, each of the
//                                               forms above
// It does not run anything: the driver calls it before the trace's job is queued, and a failure is
// a RuntimeFailure that names the prompt and lists the forms that work.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "value.h"

namespace shardscope {
class Tokenizer;
}

namespace shardscope::trace {

// The accepted forms in one sentence, for error messages.
extern const char* const kPromptForms;

// One list of token ids per request, in order. `tokenizer` may be null: strings are then refused.
// Texts are tokenized through encodePromptCached (a rerun's prompts are not tokenized again).
std::vector<std::vector<int64_t>> normalizePrompts(
    const Value& prompt, const std::shared_ptr<const Tokenizer>& tokenizer);

// The `vllm` namespace a script may import from: `TokensPrompt` and `vllm.inputs.TokensPrompt`.
Value vllmNamespace();

}  // namespace shardscope::trace
