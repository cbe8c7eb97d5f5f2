// EngineServer: the gRPC side of shardscope-engine, on rank 0. Client calls are checked (access
// token, protocol version, size, well-formed request) in gRPC's handler threads, and a bad one gets
// its error without disturbing anyone else; good jobs wait in a queue that the rank-0 driver takes
// them from (nextJob), one at a time, while the handler streams the job's events back and turns
// a cancelled call into JobTicket::cancel.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/engine/engine_types.h"
#include "core/remote/engine_protocol.pb.h"

namespace grpc {
class Server;
}

namespace shardscope::remote {

// One accepted job, shared by the handler that streams its events and the driver that runs it.
class JobTicket {
 public:
  explicit JobTicket(v1::JobRequest request) : request_(std::move(request)) {}

  const v1::JobRequest& request() const { return request_; }

  // Driver side: hands one event to the client; `finish` after the last.
  void emit(const v1::JobEvent& event);
  void finish();
  // Driver side: how the handler cancels the job and reads its progress while it runs.
  void attach(std::function<void()> cancel, std::function<JobProgress()> progress);

  // Handler side: waits up to `ms` for events; returns them (empty on timeout). `finished` tells
  // whether the job has ended and every event was taken.
  std::deque<v1::JobEvent> take(int ms, bool& finished);
  void cancel();
  JobProgress progress();

 private:
  v1::JobRequest request_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<v1::JobEvent> events_;
  bool finished_ = false;
  bool cancelRequested_ = false;
  std::function<void()> cancel_;
  std::function<JobProgress()> progress_;
};

class EngineServer {
 public:
  // Listens on `address` (HOST:PORT); a non-loopback address needs `token`. Throws Error when the
  // address is refused or cannot be bound.
  EngineServer(const std::string& address, std::optional<std::string> token,
               v1::EngineIdentity identity);
  ~EngineServer();
  EngineServer(const EngineServer&) = delete;
  EngineServer& operator=(const EngineServer&) = delete;

  // The next accepted job; nullptr once shutdown() was called.
  std::shared_ptr<JobTicket> nextJob();
  // From any thread (a signal handler's thread): nextJob returns nullptr from now on.
  void shutdown();
  // Fails the running job with `message`, for a rank lost under it; false when none was running.
  bool failRunning(const std::string& message);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardscope::remote
