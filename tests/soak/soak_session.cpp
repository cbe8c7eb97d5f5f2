#include "soak_session.h"

#include <chrono>
#include <cstdio>

#include "core/model/model_source.h"
#include "core/trace/script_runner.h"
#include "core/trace/source_location.h"

namespace shardscope::soak {

ModelShape modelShapeOf(const std::string& modelSpec) {
  const ModelConfig c =
      openModelSource(isDemoSpec(modelSpec) ? ensureDemoModel().string() : modelSpec).config;
  ModelShape s;
  s.layers = int(c.numLayers);
  s.heads = int(c.numHeads);
  s.kvHeads = int(c.numKvHeads);
  s.headDim = int(c.headDim);
  s.hidden = int(c.hiddenSize);
  s.intermediate = int(c.intermediateSize);
  s.qkNorm = c.qkNorm;
  s.experts = int(c.moe.numExperts);
  for (int64_t l = 0; l < c.numLayers; ++l) s.sparse.push_back(c.isSparseLayer(l));
  return s;
}

SoakSession::SoakSession(SoakConfig config, Watchdog::OnTimeout onHang)
    : config_(std::move(config)), watchdog_(std::move(onHang)) {}

SoakSession::~SoakSession() = default;

std::unique_ptr<trace::ScriptRunner> SoakSession::makeRunner(bool reference) const {
  trace::RunOptions o;
  o.modelDirs["demo"] =
      isDemoSpec(config_.modelSpec) ? ensureDemoModel().string() : config_.modelSpec;
  o.tp = reference ? config_.referenceTp : config_.tp;
  o.device = parseDeviceKind(config_.device);
  o.dtype = parseModelDtype(config_.dtype);
  o.backend = parseGroupBackend(reference ? config_.referenceBackend : config_.backend);
  o.out = [](const std::string&) {};  // kept in RunResult::printed
  o.note = [](const std::string&) {};
  return std::make_unique<trace::ScriptRunner>(o);
}

RunOutcome SoakSession::runOne(bool reference, const std::string& script,
                               const std::string& label) {
  auto& runner = reference ? reference_ : candidate_;
  if (!runner) runner = makeRunner(reference);
  const int tp = reference ? config_.referenceTp : config_.tp;
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", config_.timeoutSeconds);
  watchdog_.arm(config_.timeoutSeconds,
                "HANG: " + label + " ran past " + limit + " s at tp=" + std::to_string(tp) + " (" +
                    (reference ? config_.referenceBackend : config_.backend) + ", " +
                    config_.device + ", " + config_.dtype + "); the script:\n" + script);
  RunOutcome out;
  const auto start = std::chrono::steady_clock::now();
  try {
    runner->run(script, label + ".py");
  } catch (const trace::ScriptError& e) {
    out.error = std::string("ScriptError: ") + e.what();
  } catch (const Error& e) {
    out.error = std::string("Error: ") + e.what();
  } catch (const std::exception& e) {
    out.error = std::string("exception: ") + e.what();
  }
  watchdog_.disarm();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.result = runner->result();
  return out;
}

RunOutcome SoakSession::runReference(const std::string& script, const std::string& label) {
  return runOne(true, script, label);
}

RunOutcome SoakSession::runCandidate(const std::string& script, const std::string& label) {
  return runOne(false, script, label);
}

ScriptReport SoakSession::run(const std::string& script, const std::string& label) {
  if (config_.freshEvery > 0 && scripts_ > 0 && scripts_ % config_.freshEvery == 0) {
    reference_.reset();
    candidate_.reset();
  }
  ++scripts_;
  ScriptReport r;
  r.reference = runOne(true, script, label);
  r.candidate = runOne(false, script, label);
  r.comparison = compareOutcomes(r.reference, r.candidate, config_.compare);
  return r;
}

}  // namespace shardscope::soak
