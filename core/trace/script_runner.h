// ScriptRunner: runs a trace script's top level on the driver (the caller's thread). `VLLM(...)`
// loads a model through an Engine (the same arguments reuse it); each `with model.trace(...)`
// becomes one engine job whose invokes run as mediators on every rank; saved values come back
// from rank 0 into the driver's scope. Public API: no LibTorch in this header.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "../host_tensor.h"
#include "trace_record.h"

namespace shardscope {
class Engine;
class JobHandle;
class RankProcess;
}  // namespace shardscope

namespace shardscope::trace {

struct RunOptions {
  std::map<std::string, std::string> modelDirs;  // model name in the script -> model spec
  int tp = 0;                                    // > 0 overrides tensor_parallel_size
  int pp = 0;                                    // > 0 overrides pipeline_parallel_size
  int dcp = 0;                                   // > 0 overrides decode_context_parallel_size
  std::optional<DeviceKind> device;              // overrides VLLM(device=...)
  std::optional<DType> dtype;                    // overrides VLLM(dtype=...)
  std::optional<GroupBackend> backend;           // the rank threads' process group (default auto)
  bool expertParallel = false;                   // turns enable_expert_parallel on for every model
  long long budget = 10'000'000;                 // evaluation steps per block
  int64_t memoryBudget = 0;  // bytes a block's values may hold; 0: half of the free memory of
                             // the device the block runs on (MemoryBudget)
  double collectiveTimeoutSeconds = 0;          // > 0: the engines' collective watchdog
  std::function<void(const std::string&)> out;  // receives printed lines (default: stdout)
  std::function<void(const std::string&)>
      note;                  // receives notices (ignored knobs; default: stderr)
  Engine* engine = nullptr;  // when set, every VLLM(...) of the script uses this loaded engine
  // Rank processes (`run --mpi`): every process runs the script, its engines run this process's
  // rank, and tensor_parallel_size is the number of processes.
  std::shared_ptr<RankProcess> process;
  // Called with each trace's engine job as it is queued (progress, cancel), on the driver thread.
  std::function<void(const JobHandle&)> onJob;
};

class ScriptRunner {
 public:
  explicit ScriptRunner(RunOptions options = {});
  ~ScriptRunner();

  // Runs `source` (named `file` in errors). Throws ScriptError for script errors and Error for
  // engine failures; the engines stay usable for the next run.
  void run(const std::string& source, const std::string& file);

  // What the run produced so far: filled as models load and traces end, so after a failed run it
  // holds what finished before the failure.
  const RunResult& result() const;

  // The value of a top-level name after run(), as repr() shows it (for tests and tools).
  std::string reprOf(const std::string& name) const;
  // How many earlier runs' scopes (their globals, and the call scopes their functions were made
  // in) wait to be freed: a rank still in a failed job when the next run started could read them.
  // A later run's start frees them once every rank has left.
  size_t unreleasedScopes() const;
  // How many of those runs' lists and dicts that may close a cycle no scope reaches (a list that
  // held itself in a call now over; Interpreter::cycleCandidates) wait with them.
  size_t unreleasedCycleCandidates() const;
  // A top-level tensor's value as float32 on the host, if `name` holds a tensor.
  std::optional<HostTensor> tensorValue(const std::string& name) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardscope::trace
