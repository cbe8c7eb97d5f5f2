// EngineClient: a connection to a shardscope-engine server (the CLI's --engine, the GUI's
// RemoteEngineConnection). Connecting says hello: the protocol versions must match and the token
// (if the server wants one) must be right, else the constructor throws Error saying which. A job's
// events arrive in order; a connection lost under a job is one EngineLost that says where.
//
// Threading: run() from one thread at a time; cancel() and reachable() from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/remote/engine_protocol.pb.h"

namespace grpc {
class ClientContext;
}

namespace shardscope::remote {

// EngineClient::describe's text for an engine `id` listening at `address`.
std::string describeEngine(const v1::EngineIdentity& id, const std::string& address);

class EngineClient {
 public:
  // `token` empty: none is sent. Waits up to `connectSeconds` for the server.
  EngineClient(const std::string& address, std::string token, double connectSeconds = 10);
  ~EngineClient();

  const v1::EngineIdentity& identity() const { return identity_; }
  const std::string& address() const { return address_; }
  // "shardscope-engine 0.1.0 at 127.0.0.1:5000: 2 rank processes (nccl+mpi, cuda) on rank 0 a
  // cuda:0, rank 1 a cuda:1; LibTorch 2.11.0, NCCL 2.28.3": what a session log records about
  // the engine a run used (hosts, ranks, GPUs, versions).
  std::string describe() const;

  // Runs `job` (its protocol version is set here), passing each event to `onEvent`. Throws
  // EngineLost when the connection is lost, Cancelled after cancel(), Error when the engine
  // refuses the job; a job that fails on the engine arrives as a Failure event instead.
  void run(v1::JobRequest job, const std::function<void(const v1::JobEvent&)>& onEvent);
  // Ends the running call (the engine cancels its job); none running: nothing happens.
  void cancel();
  // Without blocking: false once the server cannot be reached (the connection failed, or has not
  // been ready for kUnreadySeconds: a live server accepts at once).
  bool reachable() const;
  static constexpr double kUnreadySeconds = 2;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string address_;
  std::string token_;
  v1::EngineIdentity identity_;
  std::mutex callMutex_;
  grpc::ClientContext* call_ = nullptr;  // the running call's (guarded by callMutex_)
  bool cancelled_ = false;
  mutable std::mutex stateMutex_;
  mutable std::optional<std::chrono::steady_clock::time_point> unreadySince_;
};

}  // namespace shardscope::remote
