#include "engine_server.h"

#include <grpcpp/grpcpp.h>

#include "access_token.h"
#include "core/error.h"
#include "core/remote/engine_protocol.grpc.pb.h"
#include "protocol_version.h"

namespace shardscope::remote {

// ---- JobTicket ----

void JobTicket::emit(const v1::JobEvent& event) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;  // failed already (a lost rank): later events are dropped
    events_.push_back(event);
  }
  cv_.notify_all();
}

void JobTicket::finish() {
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
  }
  cv_.notify_all();
}

void JobTicket::attach(std::function<void()> cancel, std::function<JobProgress()> progress) {
  bool cancelNow = false;
  {
    std::lock_guard lock(mutex_);
    cancel_ = std::move(cancel);
    progress_ = std::move(progress);
    cancelNow = cancelRequested_;
  }
  if (cancelNow) cancel_();
}

std::deque<v1::JobEvent> JobTicket::take(int ms, bool& finished) {
  std::unique_lock lock(mutex_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return finished_ || !events_.empty(); });
  std::deque<v1::JobEvent> out;
  out.swap(events_);
  finished = finished_;
  return out;
}

void JobTicket::cancel() {
  std::function<void()> cancel;
  {
    std::lock_guard lock(mutex_);
    if (cancelRequested_) return;
    cancelRequested_ = true;
    cancel = cancel_;
  }
  if (cancel) cancel();
}

JobProgress JobTicket::progress() {
  std::lock_guard lock(mutex_);
  return progress_ ? progress_() : JobProgress{};
}

// ---- EngineServer ----

namespace {

// Checks a request's own limits beyond gRPC's message size: what a client could get wrong.
std::string invalidJob(const v1::JobRequest& job) {
  switch (job.kind_case()) {
    case v1::JobRequest::kRun:
      if (job.run().source().empty()) return "the job's script is empty";
      if (job.run().budget() < 0 || job.run().memory_budget() < 0)
        return "the job's budgets must not be negative";
      return {};
    case v1::JobRequest::kGenerate: {
      const auto& g = job.generate();
      if (g.prompts_size() + g.texts_size() == 0) return "the generate job has no prompt";
      if (g.prompts_size() + g.texts_size() > 4096) return "the generate job has too many prompts";
      const auto& s = g.sampling();
      if (s.max_tokens() < 0 || s.max_tokens() > 1'000'000)
        return "max_tokens must be between 0 and 1000000";
      if (s.temperature() < 0 || !(s.top_p() > 0 && s.top_p() <= 1) || s.top_k() < 0)
        return "the sampling parameters are out of range (temperature >= 0, 0 < top_p <= 1, "
               "top_k >= 0)";
      return {};
    }
    case v1::JobRequest::kInspect:
      return {};
    case v1::JobRequest::kDescribe:
      if (job.describe().prompt().size() > 4096) return "the describe job's prompt is too long";
      return {};
    default:
      return "the job names no kind (run, generate, inspect or describe)";
  }
}

}  // namespace

struct EngineServer::Impl final : public v1::EngineService::Service {
  std::optional<std::string> token;
  v1::EngineIdentity identity;
  std::unique_ptr<grpc::Server> server;

  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::shared_ptr<JobTicket>> queue;
  std::shared_ptr<JobTicket> running;
  bool stopping = false;

  grpc::Status authorize(grpc::ServerContext* context) const {
    if (!token) return grpc::Status::OK;
    const auto& metadata = context->client_metadata();
    const auto it = metadata.find(kTokenHeader);
    const std::string presented =
        it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
    if (it != metadata.end() && tokensEqual(presented, *token)) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        it == metadata.end()
                            ? "this engine needs an access token: pass --token-file F"
                            : "the access token does not match the engine's");
  }

  static grpc::Status checkVersion(uint32_t version) {
    if (version == kProtocolVersion) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "protocol version " + std::to_string(version) + " is not this engine's (" +
                            std::to_string(kProtocolVersion) +
                            "); use a client of the same ShardScope version");
  }

  grpc::Status Hello(grpc::ServerContext* context, const v1::HelloRequest* request,
                     v1::HelloReply* reply) override {
    if (auto s = authorize(context); !s.ok()) return s;
    if (auto s = checkVersion(request->protocol_version()); !s.ok()) return s;
    reply->set_protocol_version(kProtocolVersion);
    *reply->mutable_identity() = identity;
    return grpc::Status::OK;
  }

  grpc::Status Run(grpc::ServerContext* context, const v1::JobRequest* request,
                   grpc::ServerWriter<v1::JobEvent>* writer) override {
    if (auto s = authorize(context); !s.ok()) return s;
    if (auto s = checkVersion(request->protocol_version()); !s.ok()) return s;
    if (const std::string why = invalidJob(*request); !why.empty())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
    auto ticket = std::make_shared<JobTicket>(*request);
    {
      std::lock_guard lock(mutex);
      if (stopping) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the engine is stopping");
      queue.push_back(ticket);
    }
    cv.notify_all();
    JobProgress last;
    for (bool finished = false; !finished;) {
      for (const auto& e : ticket->take(100, finished)) {
        if (!writer->Write(e)) ticket->cancel();  // the client went away
      }
      if (context->IsCancelled()) ticket->cancel();
      const JobProgress p = ticket->progress();
      if (!finished && (p.step != last.step || p.total != last.total)) {
        last = p;
        v1::JobEvent e;
        e.mutable_progress()->set_step(p.step);
        e.mutable_progress()->set_total(p.total);
        writer->Write(e);
      }
    }
    return grpc::Status::OK;
  }
};

EngineServer::EngineServer(const std::string& address, std::optional<std::string> token,
                           v1::EngineIdentity identity)
    : impl_(std::make_unique<Impl>()) {
  checkListenAddress(address, token.has_value());
  impl_->token = std::move(token);
  impl_->identity = std::move(identity);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterService(impl_.get());
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || port == 0)
    throw Error("cannot listen on " + address + " (in use, or not an address of this host)");
}

EngineServer::~EngineServer() {
  shutdown();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

std::shared_ptr<JobTicket> EngineServer::nextJob() {
  std::unique_lock lock(impl_->mutex);
  impl_->running.reset();
  impl_->cv.wait(lock, [&] { return impl_->stopping || !impl_->queue.empty(); });
  if (impl_->stopping) return nullptr;
  impl_->running = impl_->queue.front();
  impl_->queue.pop_front();
  return impl_->running;
}

void EngineServer::shutdown() {
  std::deque<std::shared_ptr<JobTicket>> waiting;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
    waiting.swap(impl_->queue);
  }
  impl_->cv.notify_all();
  for (auto& t : waiting) {
    v1::JobEvent e;
    e.mutable_failure()->set_message("the engine stopped before this job ran");
    t->emit(e);
    t->finish();
  }
}

bool EngineServer::failRunning(const std::string& message) {
  std::shared_ptr<JobTicket> running;
  {
    std::lock_guard lock(impl_->mutex);
    running = impl_->running;
  }
  if (!running) return false;
  v1::JobEvent e;
  e.mutable_failure()->set_message(message);
  running->emit(e);
  running->finish();
  return true;
}

}  // namespace shardscope::remote
