#include "engine_client.h"

#include <grpcpp/grpcpp.h>

#include "access_token.h"
#include "core/error.h"
#include "core/remote/engine_protocol.grpc.pb.h"
#include "core/trace/engine_connection.h"
#include "protocol_version.h"

namespace shardscope::remote {

struct EngineClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::EngineService::Stub> stub;
};

namespace {

std::string statusText(const grpc::Status& s) {
  return s.error_message().empty() ? "gRPC status " + std::to_string(int(s.error_code()))
                                   : s.error_message();
}

}  // namespace

EngineClient::EngineClient(const std::string& address, std::string token, double connectSeconds)
    : impl_(std::make_unique<Impl>()), address_(address), token_(std::move(token)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(-1);  // the server enforces its own limit and says so
  impl_->channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::milliseconds(int64_t(connectSeconds * 1000));
  if (!impl_->channel->WaitForConnected(deadline))
    throw Error("cannot reach an engine at " + address +
                " (is shardscope-engine running there? start it with mpirun -np N "
                "shardscope-engine --model M --listen " +
                address + ")");
  impl_->stub = v1::EngineService::NewStub(impl_->channel);
  grpc::ClientContext context;
  if (!token_.empty()) context.AddMetadata(kTokenHeader, token_);
  v1::HelloRequest hello;
  hello.set_protocol_version(kProtocolVersion);
  hello.set_client(std::string("shardscope ") + SHARDSCOPE_VERSION);
  v1::HelloReply reply;
  const grpc::Status s = impl_->stub->Hello(&context, hello, &reply);
  if (!s.ok())
    throw Error("the engine at " + address + " refused the connection: " + statusText(s));
  if (reply.protocol_version() != kProtocolVersion)
    throw Error("the engine at " + address + " speaks protocol " +
                std::to_string(reply.protocol_version()) + ", this client " +
                std::to_string(kProtocolVersion) + "; use matching ShardScope versions");
  identity_ = reply.identity();
}

EngineClient::~EngineClient() = default;

std::string describeEngine(const v1::EngineIdentity& id, const std::string& address) {
  std::string hosts;
  for (int r = 0; r < id.rank_hosts_size(); ++r) {
    hosts += (r ? ", " : "") + std::string("rank ") + std::to_string(r) + " " + id.rank_hosts(r);
    if (id.device() != "cuda") continue;
    // Each rank process takes the GPU of its rank among the ranks of its host.
    int gpu = 0;
    for (int q = 0; q < r; ++q) gpu += id.rank_hosts(q) == id.rank_hosts(r);
    hosts += " cuda:" + std::to_string(gpu);
  }
  return "shardscope-engine " + id.shardscope_version() + " at " + address + ": " +
         std::to_string(id.tp()) + " rank processes (" + id.backend() + ", " + id.device() +
         ") on " + hosts + "; LibTorch " + id.libtorch_version() +
         (id.nccl_version().empty() ? "" : ", NCCL " + id.nccl_version());
}

std::string EngineClient::describe() const {
  return describeEngine(identity_, address_);
}

void EngineClient::run(v1::JobRequest job,
                       const std::function<void(const v1::JobEvent&)>& onEvent) {
  job.set_protocol_version(kProtocolVersion);
  grpc::ClientContext context;
  if (!token_.empty()) context.AddMetadata(kTokenHeader, token_);
  {
    std::lock_guard lock(callMutex_);
    call_ = &context;
    cancelled_ = false;
  }
  struct Forget {  // the context dies with this call
    EngineClient* client;
    ~Forget() {
      std::lock_guard lock(client->callMutex_);
      client->call_ = nullptr;
    }
  } forget{this};
  auto reader = impl_->stub->Run(&context, job);
  v1::JobEvent event;
  while (reader->Read(&event)) onEvent(event);
  const grpc::Status s = reader->Finish();
  if (s.ok()) return;
  {
    std::lock_guard lock(callMutex_);
    if (cancelled_)
      throw Cancelled("the job was cancelled (the engine at " + address_ + " stops it)");
  }
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
      s.error_code() == grpc::StatusCode::CANCELLED)
    throw EngineLost("engine lost: the connection to the engine at " + address_ +
                     " ended during the job (" + statusText(s) +
                     "); a rank process may have died: see the engine's log, restart it and run "
                     "again");
  throw Error("the engine at " + address_ + " refused the job: " + statusText(s));
}

void EngineClient::cancel() {
  std::lock_guard lock(callMutex_);
  if (!call_) return;
  cancelled_ = true;
  call_->TryCancel();
}

bool EngineClient::reachable() const {
  const grpc_connectivity_state state = impl_->channel->GetState(/*try_to_connect=*/true);
  if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) return false;
  // After the server went away the channel may wait in connecting or idle (reconnect backoff)
  // rather than report the failure: not ready for a while is as good as failed.
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(stateMutex_);
  if (state == GRPC_CHANNEL_READY) {
    unreadySince_.reset();
    return true;
  }
  if (!unreadySince_) unreadySince_ = now;
  return std::chrono::duration<double>(now - *unreadySince_).count() < kUnreadySeconds;
}

}  // namespace shardscope::remote
