#include "job_executor.h"

#include <fstream>
#include <sstream>

#include "core/engine/module_tree_text.h"
#include "core/engine/port_probe.h"
#include "core/error.h"
#include "core/model/model_source.h"
#include "core/model/tokenizer.h"
#include "core/trace/script_runner.h"
#include "core/trace/source_location.h"
#include "wire_format.h"

namespace shardscope::remote {
namespace {

void send(const JobExecutor::Emit& emit, const v1::JobEvent& e) {
  if (emit) emit(e);
}

void sendLine(const JobExecutor::Emit& emit, const std::string& line, bool note = false) {
  v1::JobEvent e;
  if (note) {
    e.set_note(line);
  } else {
    e.set_printed(line);
  }
  send(emit, e);
}

void sendFailure(const JobExecutor::Emit& emit, const std::exception& error) {
  v1::JobEvent e;
  e.mutable_failure()->set_message(error.what());
  e.mutable_failure()->set_cancelled(dynamic_cast<const Cancelled*>(&error) != nullptr);
  if (const auto* script = dynamic_cast<const trace::ScriptError*>(&error)) {
    e.mutable_failure()->set_script_line(script->location().line);
    e.mutable_failure()->set_script_column(script->location().column);
    e.mutable_failure()->set_script_message(script->message());
  }
  send(emit, e);
}

void sendDone(const JobExecutor::Emit& emit) {
  v1::JobEvent e;
  e.set_done(true);
  send(emit, e);
}

}  // namespace

void JobExecutor::track(const JobHandle& h) {
  std::lock_guard lock(mutex_);
  current_ = h;
  hasCurrent_ = true;
  if (cancelled_) current_.cancel();
}

void JobExecutor::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  if (hasCurrent_) current_.cancel();
}

JobProgress JobExecutor::progress() const {
  std::lock_guard lock(mutex_);
  return hasCurrent_ ? current_.progress() : JobProgress{};
}

void JobExecutor::run(const v1::JobRequest& job, const Emit& emit) {
  {
    std::lock_guard lock(mutex_);
    hasCurrent_ = false;
    cancelled_ = false;
  }
  try {
    switch (job.kind_case()) {
      case v1::JobRequest::kRun:
        runScript(job.run(), emit);
        break;
      case v1::JobRequest::kGenerate:
        generate(job.generate(), emit);
        break;
      case v1::JobRequest::kInspect: {
        const std::string text = inspectText(engine_, job.inspect().prompt());
        size_t start = 0;
        for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
          sendLine(emit, text.substr(start, nl - start));
        sendDone(emit);
        break;
      }
      case v1::JobRequest::kDescribe:
        describe(job.describe(), emit);
        break;
      default:
        throw Error("the job names no kind (run, generate, inspect or describe)");
    }
  } catch (const std::exception& e) {
    sendFailure(emit, e);
  }
  std::lock_guard lock(mutex_);
  hasCurrent_ = false;
}

void JobExecutor::runScript(const v1::RunScript& job, const Emit& emit) {
  trace::RunOptions o;
  o.engine = &engine_;
  if (job.budget() > 0) o.budget = job.budget();
  o.memoryBudget = job.memory_budget();
  o.out = [&emit](const std::string& line) { sendLine(emit, line); };
  o.note = [&emit](const std::string& line) { sendLine(emit, line, /*note=*/true); };
  o.onJob = [this](const JobHandle& h) { track(h); };
  trace::ScriptRunner runner(o);
  const auto sendResult = [&] {
    v1::JobEvent e;
    toWire(runner.result(), *e.mutable_result());
    send(emit, e);
  };
  try {
    runner.run(job.source(), job.file().empty() ? "<engine job>" : job.file());
  } catch (const std::exception& e) {
    sendResult();  // what finished before the failure, for the client's session log
    sendFailure(emit, e);
    return;
  }
  sendResult();
}

void JobExecutor::generate(const v1::Generate& job, const Emit& emit) {
  GenerateRequest request;
  for (const auto& p : job.prompts()) request.prompts.emplace_back(p.ids().begin(), p.ids().end());
  auto tokenizer = engine_.tokenizer();
  for (const auto& text : job.texts()) {
    if (!tokenizer)
      throw Error(
          "the engine's model has no tokenizer.json, so text prompts cannot be encoded; "
          "pass token ids (--ids 1,2,3)");
    request.prompts.push_back(tokenizer->encode(text));
  }
  request.sampling = fromWire(job.sampling());
  request.tokenizer = tokenizer;
  JobHandle h = engine_.generate(request);
  track(h);
  const GenerateResult result = Engine::generateResult(h);
  int64_t tokens = 0;
  for (const RequestOutput& out : result.outputs) {
    tokens += int64_t(out.tokenIds.size());
    if (tokenizer) {
      sendLine(emit, tokenizer->displayText(out.tokenIds, /*skipSpecialTokens=*/true));
      continue;
    }
    std::string ids;
    for (size_t i = 0; i < out.tokenIds.size(); ++i)
      ids += (i ? "," : "") + std::to_string(out.tokenIds[i]);
    sendLine(emit, ids);
  }
  const ModelInfo& info = engine_.info();
  sendLine(emit,
           std::to_string(tokens) + " tokens in " + std::to_string(result.steps) + " steps, " +
               std::to_string(result.seconds) + " s (" + info.spec +
               ", tp=" + std::to_string(info.tp) + " rank processes, " + info.device + ", " +
               info.dtype + ")",
           /*note=*/true);
  sendDone(emit);
}

void JobExecutor::describe(const v1::Describe& job, const Emit& emit) {
  const auto tokenizer = engine_.tokenizer();
  // On every rank, as inspect probes.
  const std::vector<PortShape> shapes = probePortShapes(engine_, probeIds(engine_, job.prompt()));
  v1::JobEvent e;
  auto& d = *e.mutable_description();
  toWire(engine_.info(), *d.mutable_model());
  for (const PortShape& s : shapes) toWire(s, *d.add_port_shapes());
  // The same file the engine's tokenizer was read from: the client decodes tokens with it.
  if (const auto path = tokenizerPathFor(engine_.info().spec); tokenizer && !path.empty()) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    d.set_tokenizer_json(text.str());
  }
  send(emit, e);
}

}  // namespace shardscope::remote
