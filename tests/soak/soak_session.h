// SoakSession: runs trace scripts at a reference tensor-parallel size (tp=1) and a candidate size
// (tp=2) through trace::ScriptRunner and compares what they did (soak_compare.h). Each run is
// under a Watchdog deadline; a run past it is a hang: the handler gets the script, which tp hung
// and the script's label (the default handler prints them and exits with 124).
//
// The runners, and so the engines and their process groups, are reused from script to script
// (an error must leave the engine ready for the next job); `freshEvery` replaces them every N
// scripts so that first traces of new engines are exercised too.
// Threading: one thread calls run(); the engines own their rank threads.
#pragma once

#include <memory>
#include <string>

#include "soak_compare.h"
#include "soak_watchdog.h"
#include "trace_script_generator.h"

namespace shardscope::trace {
class ScriptRunner;
}

namespace shardscope::soak {

struct SoakConfig {
  std::string modelSpec;  // what VLLM("demo") loads ("" = the built-in demo model)
  std::string device = "cpu";
  std::string dtype = "f32";
  std::string backend = "local";           // the candidate's process group (local, nccl)
  std::string referenceBackend = "local";  // the reference's
  int referenceTp = 1;
  int tp = 2;
  double timeoutSeconds = 120;  // per script and size
  int freshEvery = 0;           // new engines every N scripts (0: keep them)
  CompareOptions compare;
};

struct ScriptReport {
  RunOutcome reference, candidate;
  Comparison comparison;
};

// The widths and layer kinds the generator needs, from the config.json of what VLLM("demo") loads
// (a SoakConfig::modelSpec; "" is the built-in demo model).
ModelShape modelShapeOf(const std::string& modelSpec);

class SoakSession {
 public:
  explicit SoakSession(SoakConfig config, Watchdog::OnTimeout onHang = {});
  ~SoakSession();

  ScriptReport run(const std::string& script, const std::string& label);
  // One script at one size (for tests that compare different scripts on purpose).
  RunOutcome runReference(const std::string& script, const std::string& label);
  RunOutcome runCandidate(const std::string& script, const std::string& label);

  const SoakConfig& config() const { return config_; }

 private:
  RunOutcome runOne(bool reference, const std::string& script, const std::string& label);
  std::unique_ptr<trace::ScriptRunner> makeRunner(bool reference) const;

  SoakConfig config_;
  Watchdog watchdog_;
  std::unique_ptr<trace::ScriptRunner> reference_, candidate_;
  int scripts_ = 0;
};

}  // namespace shardscope::soak
