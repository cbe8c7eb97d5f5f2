// What a script's VLLM(...) and model.trace(...) / model.generate(...) arguments ask for, in
// vLLM's names: the engine's options (tensor_parallel_size, dtype, device, ...; vLLM knobs that
// mean nothing here are noted once and ignored) and the sampling (SamplingParams' names). A
// keyword neither takes fails the script at the call, listing the ones that work.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "../engine/engine_types.h"
#include "script_runner.h"
#include "value.h"

namespace shardscope::trace {

class Interpreter;

// VLLM("name", ...)'s engine options (a.positional[0] is the model's name), then the run's
// overrides (--tp, --device, rank processes ...); `note` receives each ignored knob.
EngineOptions vllmEngineOptions(Interpreter& in, const CallArgs& a, const RunOptions& run,
                                const std::function<void(const std::string&)>& note);

// Fails the script unless `keyword` is one model.<method>(...) takes.
void checkTraceKeyword(Interpreter& in, const std::string& method, const std::string& keyword);

// model.trace(...)'s sampling arguments, as vLLM's SamplingParams names them.
SamplingParams vllmSampling(Interpreter& in, const std::map<std::string, Value>& p);

}  // namespace shardscope::trace
