// JobExecutor: runs one client job (engine_protocol.proto's JobRequest) on this rank process's
// engine. Every rank process runs every job the same way (each has its own driver, and scripts are
// deterministic), so the values a block captures are the same on every rank without being sent;
// rank 0 passes an `emit` that streams the events to the client, the others none.
#pragma once

#include <functional>
#include <mutex>

#include "core/engine/engine.h"
#include "core/remote/engine_protocol.pb.h"

namespace shardscope::remote {

class JobExecutor {
 public:
  using Emit = std::function<void(const v1::JobEvent&)>;

  explicit JobExecutor(Engine& engine) : engine_(engine) {}

  // Runs `job`; its events go to `emit` (may be empty). A failure ends with a Failure event and
  // does not throw; the engine serves the next job.
  void run(const v1::JobRequest& job, const Emit& emit);

  // From any thread: cancels the running job and the rest of its script's traces.
  void cancel();
  // The running engine job's progress (zeros between jobs).
  JobProgress progress() const;

 private:
  void runScript(const v1::RunScript& job, const Emit& emit);
  void generate(const v1::Generate& job, const Emit& emit);
  // The model, its port shapes (a probe job on every rank) and its tokenizer.json, for the GUI.
  void describe(const v1::Describe& job, const Emit& emit);
  // Records `h` as the running engine job; cancels it at once when the client already asked.
  void track(const JobHandle& h);

  Engine& engine_;
  mutable std::mutex mutex_;
  JobHandle current_;
  bool hasCurrent_ = false;
  bool cancelled_ = false;
};

}  // namespace shardscope::remote
