#include "vllm_arguments.h"

#include <set>

#include "../parallel/rank_process.h"
#include "builtin_args.h"
#include "interpreter.h"

namespace shardscope::trace {
namespace {

// Accepted VLLM(...) keywords; vLLM knobs that mean nothing here are accepted and reported once.
const std::set<std::string> kModelKeywords = {"tensor_parallel_size",
                                              "pipeline_parallel_size",
                                              "dispatch",
                                              "dtype",
                                              "device",
                                              "enforce_eager",
                                              "enable_expert_parallel",
                                              "decode_context_parallel_size"};
const std::set<std::string> kIgnoredKeywords = {"gpu_memory_utilization",
                                                "trust_remote_code",
                                                "max_model_len",
                                                "seed",
                                                "swap_space",
                                                "disable_log_stats",
                                                "distributed_executor_backend",
                                                "enable_prefix_caching"};
const std::set<std::string> kTraceKeywords = {
    "temperature", "top_p", "top_k", "seed", "max_tokens", "stop", "stop_token_ids", "ignore_eos"};

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// A VLLM(...) keyword's value parsed by `parse`; a name it does not know fails the script at the
// call, with the keyword and the names that work.
template <typename Parse>
auto scriptOption(Interpreter& in, const std::string& keyword, Parse parse) {
  try {
    return parse();
  } catch (const Error& e) {
    in.fail("VLLM(" + keyword + "=...): " + e.what());
  }
}

}  // namespace

EngineOptions vllmEngineOptions(Interpreter& in, const CallArgs& a, const RunOptions& run,
                                const std::function<void(const std::string&)>& note) {
  EngineOptions o;
  const std::string& name = a.positional[0]->str;  // loadModel checked it is there
  const auto it = run.modelDirs.find(name);
  o.model = it != run.modelDirs.end() ? it->second : name;
  o.tp = 1;
  for (const auto& keyword : a.keywords) {
    const std::string& k = keyword.first;
    const Value& v = keyword.second;            // not a structured binding: lambdas read it (C++17)
    if (k == "distributed_executor_backend") {  // "ray", "mp": ShardScope has its own
      note(k +
           " is ignored: ShardScope's ranks are threads here, or processes under "
           "shardscope-engine / --mpi (MPI), whichever ran this script");
      continue;
    }
    if (kIgnoredKeywords.count(k)) {
      note(k + " has no meaning in ShardScope and is ignored");
      continue;
    }
    if (!kModelKeywords.count(k))
      in.fail("VLLM() got an unknown keyword '" + k + "'; accepted: " + join(kModelKeywords) +
              " (and vLLM knobs that are ignored: " + join(kIgnoredKeywords) + ")");
    if (k == "tensor_parallel_size") o.tp = int(asInt(v, "tensor_parallel_size"));
    if (k == "pipeline_parallel_size") o.pp = int(asInt(v, "pipeline_parallel_size"));
    if (k == "dtype") o.dtype = scriptOption(in, k, [&] { return parseModelDtype(str(v)); });
    if (k == "device") {  // 'cuda' or torch.device('cuda:0'): the kind of device the ranks use
      const std::string name =
          v->type == Type::Device ? v->str.substr(0, v->str.find(':')) : str(v);
      o.device = scriptOption(in, k, [&] { return parseDeviceKind(name); });
    }
    if (k == "enforce_eager") o.cudaGraphs = !truthy(v);
    if (k == "enable_expert_parallel") o.expertParallel = truthy(v);
    if (k == "decode_context_parallel_size") o.dcp = int(asInt(v, "decode_context_parallel_size"));
  }
  if (run.expertParallel) o.expertParallel = true;
  if (run.tp > 0) o.tp = run.tp;
  if (run.pp > 0) o.pp = run.pp;
  if (run.dcp > 0) o.dcp = run.dcp;
  if (run.process) {
    if (o.tp != run.process->size())
      note("tensor_parallel_size is the number of rank processes here (" +
           std::to_string(run.process->size()) + ")");
    o.tp = run.process->size();
    o.process = run.process;
  }
  if (run.device) o.device = *run.device;
  if (run.dtype) o.dtype = run.dtype;
  if (run.backend) o.backend = *run.backend;
  if (run.collectiveTimeoutSeconds > 0) o.collectiveTimeoutSeconds = run.collectiveTimeoutSeconds;
  return o;
}

void checkTraceKeyword(Interpreter& in, const std::string& method, const std::string& keyword) {
  if (!kTraceKeywords.count(keyword))
    in.fail("model." + method + "() got an unknown keyword '" + keyword +
            "'; accepted: " + join(kTraceKeywords));
}

SamplingParams vllmSampling(Interpreter& in, const std::map<std::string, Value>& p) {
  SamplingParams sampling;
  const auto num = [&](const char* k, double d) { return p.count(k) ? asNumber(p.at(k), k) : d; };
  sampling.temperature = num("temperature", 0.0);
  sampling.topP = num("top_p", 1.0);
  sampling.topK = (long long)num("top_k", 0);
  sampling.seed = (uint64_t)num("seed", 0);
  sampling.maxTokens = (long long)num("max_tokens", 1);
  if (p.count("ignore_eos")) sampling.ignoreEos = truthy(p.at("ignore_eos"));
  if (p.count("stop_token_ids")) {
    for (const auto& i : p.at("stop_token_ids")->items)
      sampling.stopTokenIds.push_back(asInt(i, "stop id"));
  }
  if (p.count("stop")) {  // vLLM: a string or a list of strings
    const Value& stop = p.at("stop");
    if (stop->type == Type::Str) {
      sampling.stop.push_back(stop->str);
    } else if (stop->type == Type::List || stop->type == Type::Tuple) {
      for (const auto& item : stop->items) {
        if (item->type != Type::Str)
          in.fail("stop= takes a string or a list of strings, got a list holding a " +
                  std::string(typeName(item->type)));
        sampling.stop.push_back(item->str);
      }
    } else if (stop->type != Type::None) {
      in.fail("stop= takes a string or a list of strings, got a " +
              std::string(typeName(stop->type)));
    }
  }
  return sampling;
}

}  // namespace shardscope::trace
