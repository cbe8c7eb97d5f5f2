#include "remote_engine_connection.h"

#include <optional>

#include "core/error.h"
#include "core/model/tokenizer.h"
#include "core/trace/source_location.h"
#include "engine_client.h"
#include "wire_format.h"

namespace shardscope::remote {
namespace {

// A job's failure event as the exception a local run throws.
[[noreturn]] void rethrow(const v1::Failure& f) {
  if (f.cancelled()) throw Cancelled(f.message());
  if (f.script_line() > 0)
    throw trace::ScriptError(f.message(), {f.script_line(), f.script_column()}, f.script_message());
  throw Error(f.message());
}

}  // namespace

RemoteEngineConnection::RemoteEngineConnection(const std::string& address, const std::string& token,
                                               const std::string& prompt, double connectSeconds)
    : client_(std::make_unique<EngineClient>(address, token, connectSeconds)) {
  v1::JobRequest job;
  job.mutable_describe()->set_prompt(prompt);
  bool described = false;
  std::optional<v1::Failure> failure;
  client_->run(job, [&](const v1::JobEvent& e) {
    if (e.has_failure()) failure = e.failure();
    if (!e.has_description()) return;
    const auto& d = e.description();
    info_ = fromWire(d.model());
    for (const auto& s : d.port_shapes()) shapes_.push_back(fromWire(s));
    if (!d.tokenizer_json().empty())
      tokenizer_ =
          Tokenizer::fromJson(d.tokenizer_json(), "the tokenizer.json of the engine at " + address);
    described = true;
  });
  if (failure) rethrow(*failure);
  if (!described)
    throw Error("the engine at " + address + " ended the describe job without a description");
}

RemoteEngineConnection::~RemoteEngineConnection() = default;

std::string RemoteEngineConnection::describe() const {
  return client_->describe();
}

void RemoteEngineConnection::run(const std::string& source, const std::string& file) {
  result_ = {};
  step_ = 0;
  total_ = 0;
  if (lost_)
    throw EngineLost("engine lost: the engine at " + client_->address() +
                     " went away; reconnect once it runs again");
  v1::JobRequest job;
  job.mutable_run()->set_source(source);
  job.mutable_run()->set_file(file);
  std::optional<v1::Failure> failure;
  const auto named = [this] {
    for (auto& m : result_.models) m.engineVersion = client_->describe();
  };
  try {
    client_->run(job, [&](const v1::JobEvent& e) {
      switch (e.event_case()) {
        case v1::JobEvent::kProgress:
          step_ = e.progress().step();
          total_ = e.progress().total();
          break;
        case v1::JobEvent::kResult:
          result_ = fromWire(e.result());
          break;
        case v1::JobEvent::kFailure:
          failure = e.failure();
          break;
        default:
          break;  // printed lines and notes are in the result's record
      }
    });
  } catch (const EngineLost&) {
    lost_ = true;
    named();
    throw;
  }
  named();
  if (failure) rethrow(*failure);
}

void RemoteEngineConnection::cancel() {
  client_->cancel();
}

bool RemoteEngineConnection::lost() const {
  // Latched: an engine back on the same port may be another model, so it takes a reconnect.
  if (!lost_ && !client_->reachable()) lost_ = true;
  return lost_;
}

}  // namespace shardscope::remote
