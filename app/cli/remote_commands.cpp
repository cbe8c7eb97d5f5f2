#include "remote_commands.h"

#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/remote/access_token.h"
#include "core/remote/engine_client.h"
#include "core/remote/wire_format.h"
#include "core/store/session_store.h"
#include "session_commands.h"

namespace shardscope::cli {
namespace {

// Options that choose or shape a local engine: the engine server chose its own when it started.
const char* const kLocalEngineOptions[] = {"model",
                                           "tp",
                                           "pp",
                                           "device",
                                           "dtype",
                                           "backend",
                                           "threads",
                                           "model-dir",
                                           "collective-timeout",
                                           "enable-expert-parallel",
                                           "mpi"};

remote::EngineClient connect(const Arguments& a) {
  for (const char* o : kLocalEngineOptions) {
    if (a.has(o))
      throw UsageError(std::string("--") + o +
                       " chooses a local engine; with --engine the engine server's own settings "
                       "apply (set them when starting shardscope-engine)");
  }
  const std::string token =
      a.has("token-file") ? remote::readTokenFile(a.get("token-file")) : std::string();
  return remote::EngineClient(a.get("engine"), token);
}

// Prints a job's lines; returns its failure ("" when it succeeded), and its run result if any.
struct Outcome {
  std::optional<trace::RunResult> result;
  std::string failure;
  bool cancelled = false;
};

Outcome runJob(remote::EngineClient& client, const remote::v1::JobRequest& job) {
  Outcome o;
  client.run(job, [&o](const remote::v1::JobEvent& e) {
    switch (e.event_case()) {
      case remote::v1::JobEvent::kPrinted:
        std::cout << e.printed() << "\n" << std::flush;
        break;
      case remote::v1::JobEvent::kNote:
        std::cerr << "note: " << e.note() << "\n";
        break;
      case remote::v1::JobEvent::kResult:
        o.result = remote::fromWire(e.result());
        break;
      case remote::v1::JobEvent::kFailure:
        o.failure = e.failure().message();
        o.cancelled = e.failure().cancelled();
        break;
      default:
        break;  // progress, done
    }
  });
  return o;
}

}  // namespace

int runRemote(const Arguments& a, const std::string& source, const std::string& file) {
  auto client = connect(a);
  remote::v1::JobRequest job;
  job.mutable_run()->set_source(source);
  job.mutable_run()->set_file(file);
  job.mutable_run()->set_budget(a.getInt("budget", 10'000'000));
  job.mutable_run()->set_memory_budget(a.memoryBudgetBytes());
  std::optional<store::SessionStore> log;
  int64_t id = 0;
  if (a.has("log")) {
    store::StoreOptions so;
    so.session = a.get("session", "default");
    so.valueCapBytes = int64_t(a.getDouble("value-cap-mb", 256) * 1e6);
    log.emplace(a.get("log"), so);
    id = log->beginRun(a.get("title", std::filesystem::path(file).filename().string()), source,
                       file);
  }
  // The session log names the engine the run used, with every model it loaded.
  const auto record = [&](const Outcome& o, store::RunStatus status, const std::string& error) {
    if (!log) return;
    trace::RunResult result = o.result.value_or(trace::RunResult{});
    for (auto& m : result.models) m.engineVersion = client.describe();
    log->finishRun(id, result, status, error);
    std::cerr << "recorded as run " << id << " in " << a.get("log") << "\n";
  };
  Outcome o;
  try {
    o = runJob(client, job);
  } catch (const std::exception& e) {
    record(o, store::RunStatus::Failed, e.what());
    throw;
  }
  if (a.has("timing") && o.result) {
    for (size_t i = 0; i < o.result->traces.size(); ++i)
      std::cerr << "trace " << i << ": " << timingText(o.result->traces[i].timing) << "\n";
  }
  if (!o.failure.empty()) {
    record(o, o.cancelled ? store::RunStatus::Interrupted : store::RunStatus::Failed, o.failure);
    throw Error(o.failure);
  }
  record(o, store::RunStatus::Done, "");
  return 0;
}

int generateRemote(const Arguments& a) {
  auto client = connect(a);
  remote::v1::JobRequest job;
  auto& g = *job.mutable_generate();
  for (const std::vector<int64_t>& ids : idPrompts(a)) {
    auto& prompt = *g.add_prompts();
    for (int64_t id : ids) prompt.add_ids(id);
  }
  for (const auto& p : a.positional()) g.add_texts(p);
  SamplingParams s;
  s.maxTokens = a.getInt("max-tokens", 16);
  s.temperature = a.getDouble("temperature", 0.0);
  s.topK = a.getInt("top-k", 0);
  s.topP = a.getDouble("top-p", 1.0);
  s.seed = uint64_t(a.getInt("seed", 0));
  s.ignoreEos = a.has("ignore-eos");
  s.stopTokenIds = stopIds(a);
  remote::toWire(s, *g.mutable_sampling());
  const Outcome o = runJob(client, job);
  if (!o.failure.empty()) throw Error(o.failure);
  return 0;
}

int inspectRemote(const Arguments& a) {
  auto client = connect(a);
  remote::v1::JobRequest job;
  job.mutable_inspect()->set_prompt(a.get("prompt"));
  std::cout << "engine: " << client.describe() << "\n";
  const Outcome o = runJob(client, job);
  if (!o.failure.empty()) throw Error(o.failure);
  return 0;
}

}  // namespace shardscope::cli
