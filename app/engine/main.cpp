// shardscope-engine: the model's ranks as processes, started by an MPI launcher:
//   mpirun -np N shardscope-engine --model M [--tp N] --listen 127.0.0.1:PORT
// Every process runs one rank of one loaded model. Rank 0 serves clients (shardscope-cli
// --engine) over gRPC; each accepted job is sent to every rank, and each rank runs it on its own
// driver with the same engine code as rank threads. See README "Engine server".
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <thread>

#include "app/cli/arguments.h"
#include "core/build_info.h"
#include "core/engine/engine.h"
#include "core/error.h"
#include "core/parallel/mpi_rank_process.h"
#include "core/remote/access_token.h"
#include "core/remote/engine_server.h"
#include "core/remote/job_executor.h"
#include "job_channel.h"
#include "rank_watch.h"

namespace shardscope::engine {
namespace {

constexpr const char* kUsage = R"(usage: mpirun -np N shardscope-engine [options]

  --model PATH|NAME    checkpoint directory, Hugging Face cache name or random:CONFIG.json[@SEED]
                       (default: the built-in demo model)
  --tp N               tensor-parallel size; must equal the number of processes (default: it)
  --device cpu|cuda    (default cpu); on cuda each rank uses the GPU of its rank on its host
  --dtype bf16|f16|f32 (default: f32 on cpu, the checkpoint's dtype on cuda)
  --threads N          CPU threads per rank (default: 1 for a model of at most 64M
                       parameters a rank on the cpu, else cores / tp)
  --collective-timeout S   fail a job whose collective waits longer than S seconds (default 60)
  --enable-expert-parallel   MoE models: each rank holds num_experts / tp whole experts
  --listen HOST:PORT   where rank 0 serves clients (default 127.0.0.1:50051); an address other
                       than loopback needs --token-file
  --token-file F       the access token clients must present (a file of mode 0600)
)";

remote::v1::EngineIdentity identityOf(const Engine& engine) {
  const ModelInfo& info = engine.info();
  const BuildInfo b = buildInfo();
  remote::v1::EngineIdentity id;
  id.set_shardscope_version(b.shardscope);
  id.set_libtorch_version(b.libtorch);
  if (b.nccl) id.set_nccl_version(b.ncclVersion);
  id.set_model_spec(info.spec);
  id.set_model_path(info.path);
  id.set_family(info.family);
  id.set_config_sha256(info.configSha256);
  id.set_dtype(info.dtype);
  id.set_device(info.device);
  id.set_backend(info.backend);
  id.set_tp(info.tp);
  for (const auto& h : info.rankHosts) id.add_rank_hosts(h);
  return id;
}

EngineOptions engineOptions(const cli::Arguments& a, int processes) {
  EngineOptions o;
  o.model = a.get("model");
  o.tp = int(a.getInt("tp", processes));
  o.device = parseDeviceKind(a.get("device", "cpu"));
  o.dtype = parseModelDtype(a.get("dtype"));
  o.threadsPerRank = int(a.getInt("threads", 0));
  o.collectiveTimeoutSeconds = a.getDouble("collective-timeout", 0);
  o.expertParallel = a.has("enable-expert-parallel");
  return o;
}

// Rank 0: a lost rank on this host (the rank watch), or SIGINT/SIGTERM (the MPI launcher stops
// every rank when one dies), ends service. A running job first fails with one error naming the
// lost rank and its host, which has a moment to reach the client; MPI_Abort is the last resort
// that takes every other rank down (a driver may be inside a collective that never completes).
void loseEngine(remote::EngineServer& server, const RankWatch& watch, const std::string& cause) {
  const std::string lost = watch.lostRanks();
  const std::string message =
      "engine lost: " + (lost.empty() ? cause : lost) +
      "; every rank process is stopped: restart the engine (mpirun ... shardscope-engine ...) "
      "and run again";
  std::fprintf(stderr, "shardscope-engine: %s\n", message.c_str());
  const bool running = server.failRunning(message);
  server.shutdown();
  if (!running && lost.empty()) std::_Exit(0);  // stopped while idle: the launcher ends the rest
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// Runs rank 0's two watches (the rank watch, and the stop signals) until it goes away.
class Rank0Watch {
 public:
  Rank0Watch(remote::EngineServer& server, const RankWatch& watch, sigset_t signals)
      : state_(std::make_shared<State>(server, watch)) {
    std::thread([state = state_, signals] {
      int signal = 0;
      sigwait(&signals, &signal);
      if (state->stop) std::_Exit(0);  // the engine is on its way out already
      loseEngine(state->server, state->watch,
                 "the engine was stopped (signal " + std::to_string(signal) +
                     "); if a rank process died, the MPI launcher's output names it");
    }).detach();  // blocked in sigwait for good: the process ends it
    poll_ = std::thread([state = state_] {
      while (!state->stop) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        if (!state->stop && !state->watch.lostRanks().empty())
          loseEngine(state->server, state->watch, "");
      }
    });
  }
  ~Rank0Watch() {
    state_->stop = true;
    poll_.join();
  }

 private:
  struct State {
    State(remote::EngineServer& s, const RankWatch& w) : server(s), watch(w) {}
    remote::EngineServer& server;
    const RankWatch& watch;
    std::atomic<bool> stop{false};
  };
  std::shared_ptr<State> state_;
  std::thread poll_;
};

// Other ranks: a stop signal ends the process at once (rank 0 tells the client).
void watchOtherRank(sigset_t signals) {
  std::thread([signals] {
    int signal = 0;
    sigwait(&signals, &signal);
    std::_Exit(128 + signal);
  }).detach();
}

int serve(const cli::Arguments& a, const MpiRuntime& mpi, sigset_t signals) {
  auto process = std::make_shared<MpiRankProcess>(mpi);
  RankWatch watch(*process);
  EngineOptions o = engineOptions(a, mpi.size());
  o.process = process;
  const bool root = mpi.rank() == 0;
  std::optional<std::string> token;
  const std::string listen = a.get("listen", "127.0.0.1:50051");
  std::string refused;  // before the model loads; every rank stops together
  if (root) {
    try {
      if (a.has("token-file")) token = remote::readTokenFile(a.get("token-file"));
      remote::checkListenAddress(listen, token.has_value());
    } catch (const std::exception& e) {
      refused = e.what();
    }
  }
  if (const std::string agreed = process->agreeOnOutcome(refused, false); !agreed.empty())
    throw Error(refused.empty() ? agreed : refused);
  Engine engine(
      o, root ? [](const std::string& what, int done,
                   int total) { std::fprintf(stderr, "[%d/%d] %s\n", done, total, what.c_str()); }
              : Engine::LoadProgress());
  remote::JobExecutor executor(engine);
  JobChannel channel(MPI_COMM_WORLD);
  if (!root) {
    watchOtherRank(signals);
    while (auto bytes = channel.receive()) {
      remote::v1::JobRequest job;
      job.ParseFromString(*bytes);  // rank 0 parsed the same bytes
      executor.run(job, {});
    }
    return 0;
  }
  std::unique_ptr<remote::EngineServer> listening;
  try {
    listening = std::make_unique<remote::EngineServer>(listen, token, identityOf(engine));
  } catch (...) {
    channel.send(std::nullopt);  // the other ranks leave too
    throw;
  }
  remote::EngineServer& server = *listening;
  {
    Rank0Watch guard(server, watch, signals);  // stopped before the other ranks leave
    std::fprintf(stderr, "%s", watch.ranksText().c_str());
    std::fprintf(stderr, "shardscope-engine: serving %s (tp=%d, %s, %s) on %s\n",
                 engine.info().spec.c_str(), engine.info().tp, engine.info().backend.c_str(),
                 engine.info().device.c_str(), listen.c_str());
    while (auto ticket = server.nextJob()) {
      channel.send(ticket->request().SerializeAsString());
      ticket->attach([&executor] { executor.cancel(); },
                     [&executor] { return executor.progress(); });
      executor.run(ticket->request(),
                   [&ticket](const remote::v1::JobEvent& e) { ticket->emit(e); });
      ticket->finish();
    }
  }
  channel.send(std::nullopt);
  return 0;
}

}  // namespace
}  // namespace shardscope::engine

int main(int argc, char** argv) {
  using namespace shardscope;
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::unique_ptr<cli::Arguments> a;
  try {
    a = std::make_unique<cli::Arguments>(
        args,
        std::set<std::string>{"model", "tp", "device", "dtype", "threads", "collective-timeout",
                              "listen", "token-file"},
        std::set<std::string>{"help", "enable-expert-parallel"});
  } catch (const std::exception& e) {
    std::cerr << "shardscope-engine: " << e.what() << "\n\n" << engine::kUsage;
    return 2;
  }
  if (a->has("help")) {
    std::cout << engine::kUsage;
    return 0;
  }
  // Before MPI starts its threads: stop signals go to the watcher thread only.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  int rank = 0;
  try {
    MpiRuntime mpi(&argc, &argv);
    rank = mpi.rank();
    return engine::serve(*a, mpi, signals);
  } catch (const std::exception& e) {
    if (rank == 0) std::cerr << "shardscope-engine: error: " << e.what() << "\n";
    return 1;
  }
}
