// shardscope-cli: the headless front end. Subcommands: run, generate, inspect, tokenize,
// make-checkpoint, examples, and the session-log commands log, show, replay, diff, export.
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "arguments.h"
#include "core/build_info.h"
#include "core/engine/engine.h"
#include "core/engine/module_tree_text.h"
#include "core/engine/port_probe.h"
#include "core/error.h"
#include "core/file_tree.h"
#include "core/model/model_source.h"
#include "core/model/tokenizer.h"
#include "core/store/run_recorder.h"
#include "core/trace/script_runner.h"
#include "example_commands.h"
#include "resources/example_catalog.h"
#include "session_commands.h"
#ifdef SHARDSCOPE_WITH_MPI
#include "core/parallel/mpi_rank_process.h"
#endif
#include "remote_commands.h"  // declarations; defined only in builds with gRPC
#include "terminal_progress.h"

namespace shardscope::cli {
namespace {

constexpr const char* kUsage = R"(usage: shardscope-cli <command> [options]

commands:
  run        run a trace script (nnsight-style Python subset, see docs/trace-language.md)
  generate   generate a continuation of one or more prompts
  inspect    print the module tree: ports with shapes and shard kinds, parameter shards
  tokenize   print the token ids and pieces of a text
  make-checkpoint   write a checkpoint with deterministic random weights for a config.json
  examples   list the built-in example scripts (run one with 'run --example NAME')
  log        list the runs recorded in a session file (run --log S.db records them)
  show       show a recorded run, or one of its saved values
  replay     re-run a recorded run and compare its values and texts with the record
  diff       compare two recorded runs: every saved value and generation
  export     write a recorded run's saved tensors as a safetensors file

Run 'shardscope-cli --version' for the version and what it was built with.

Run 'shardscope-cli <command> --help' for a command's options.
)";

constexpr const char* kModelOptions =
    R"(  --model PATH|NAME    checkpoint directory, Hugging Face cache name (Qwen/Qwen3-8B) or
                       random:CONFIG.json[@SEED]; default: the built-in demo model
  --tp N               tensor-parallel size (default 1)
  --pp N               pipeline-parallel size: decoder layers split into N stages, each sharded
                       tp ways, tp x pp ranks (default 1)
  --device cpu|cuda    (default cpu)
  --dtype bf16|f16|f32 (default: f32 on cpu, the checkpoint's dtype on cuda)
  --backend auto|local|nccl   process group (default auto: nccl for cuda with tp > 1)
  --threads N          CPU threads per rank (default: 1 for a model of at most 64M
                       parameters a rank on the cpu, else cores / tp)
  --collective-timeout S   fail a job whose collective waits longer than S seconds (default 60,
                       or SHARDSCOPE_COLLECTIVE_TIMEOUT)
  --enable-expert-parallel   MoE models: each rank holds num_experts / tp whole experts
                       (default: every rank holds a slice of every expert)
  --dcp N              decode_context_parallel_size, MLA models (DeepSeek-V2): the latent KV
                       cache is split along the tokens across groups of N ranks (N divides tp)
)";

const std::set<std::string> kModelOptionNames = {
    "model", "tp", "pp", "device", "dtype", "backend", "threads", "collective-timeout", "dcp"};

std::set<std::string> withModel(std::set<std::string> extra) {
  extra.insert(kModelOptionNames.begin(), kModelOptionNames.end());
  extra.insert({"engine", "token-file"});
  return extra;
}

#ifdef SHARDSCOPE_WITH_REMOTE
const char* const kEngineHelp = kEngineOptions;
#else
const char* const kEngineHelp = "";
#endif

// --engine HOST:PORT: the command runs on an engine server. Returns its exit code, or nothing when
// the command runs here.
template <typename Remote>
std::optional<int> onEngine(const Arguments& a, Remote remote) {
  if (!a.has("engine")) return std::nullopt;
#ifdef SHARDSCOPE_WITH_REMOTE
  return remote();
#else
  throw Error(
      "this build has no engine client (gRPC and protobuf were not found when it was "
      "built); install libgrpc++-dev and protobuf-compiler-grpc and rebuild");
#endif
}

// --mpi: this process is one rank process of `mpirun -np N shardscope-cli COMMAND --mpi ...`.
// Declare it before the engine: MPI ends after the engine's groups are gone.
struct RankProcesses {
#ifdef SHARDSCOPE_WITH_MPI
  std::unique_ptr<MpiRuntime> mpi;
#endif
  std::shared_ptr<RankProcess> process;
  int rank = 0;
  int size = 0;
  // Ranks other than 0 run the same work without printing it.
  bool silent() const {
    return rank != 0;
  }
  void apply(EngineOptions& o) const {
    if (!process) return;
    o.process = process;
    o.tp = size;
  }
};

RankProcesses startRankProcesses(const Arguments& a, const std::string& command) {
  RankProcesses rp;
  if (!a.has("mpi")) return rp;
#ifdef SHARDSCOPE_WITH_MPI
  if (!MpiRuntime::launched())
    throw UsageError("--mpi runs as rank processes: mpirun -np N shardscope-cli " + command +
                     " --mpi ...");
  rp.mpi = std::make_unique<MpiRuntime>(nullptr, nullptr);
  rp.process = std::make_shared<MpiRankProcess>(*rp.mpi);
  rp.rank = rp.mpi->rank();
  rp.size = rp.mpi->size();
  return rp;
#else
  throw Error("this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
}

EngineOptions engineOptions(const Arguments& a) {
  EngineOptions o;
  o.model = a.get("model");
  o.tp = int(a.getInt("tp", 1));
  o.pp = int(a.getInt("pp", 1));
  o.device = parseDeviceKind(a.get("device", "cpu"));
  o.dtype = parseModelDtype(a.get("dtype"));
  o.backend = parseGroupBackend(a.get("backend", "auto"));
  o.threadsPerRank = int(a.getInt("threads", 0));
  o.collectiveTimeoutSeconds = a.getDouble("collective-timeout", 0);
  o.expertParallel = a.has("enable-expert-parallel");
  o.dcp = int(a.getInt("dcp", 1));
  if (o.tp < 1) throw UsageError("--tp must be at least 1");
  if (o.pp < 1) throw UsageError("--pp must be at least 1");
  if (o.dcp < 1) throw UsageError("--dcp must be at least 1");
  if (o.collectiveTimeoutSeconds < 0) throw UsageError("--collective-timeout must be positive");
  return o;
}

// Engine::LoadProgress drawn by `progress` (nothing when stderr is not a terminal).
Engine::LoadProgress loadProgress(TerminalProgress& progress) {
  return [&progress](const std::string& what, int done, int total) {
    progress.load(what, done, total);
  };
}

int generate(const std::vector<std::string>& args) {
  const Arguments a(
      args, withModel({"max-tokens", "temperature", "top-k", "top-p", "seed", "ids", "stop-ids"}),
      {"help", "ignore-eos", "quiet", "enable-expert-parallel", "mpi"});
  if (a.has("help")) {
    std::cout
        << "usage: shardscope-cli generate [options] \"prompt\" [\"prompt\" ...]\n\n"
        << kModelOptions
        << "  --max-tokens N       tokens to generate per prompt (default 16)\n"
           "  --temperature T      0 is greedy (default 0)\n"
           "  --top-k K --top-p P  sampling filters (default off)\n"
           "  --seed S             sampling seed (default 0)\n"
           "  --ids 1,2,3          a prompt given as token ids instead of text (repeat the\n"
           "                       option for more prompts; they come before the texts)\n"
           "  --stop-ids 1,2       extra stop token ids (repeatable)\n"
           "  --ignore-eos         do not stop at the model's EOS tokens\n"
           "  --quiet              print only the generated text\n"
           "  --mpi                run as rank processes: mpirun -np N shardscope-cli generate\n"
           "                       --mpi ... (tp is N; rank 0 prints)\n\n"
           "Sampled ids the tokenizer has no token for (a model may have more rows than its\n"
           "tokenizer has ids) print as <|id N|>.\n"
        << kEngineHelp;
    return 0;
  }
  if (a.positional().empty() && !a.has("ids"))
    throw UsageError("generate needs a prompt (or --ids)");
  if (auto code = onEngine(a, [&] { return generateRemote(a); })) return *code;
  const RankProcesses ranks = startRankProcesses(a, "generate");
  EngineOptions options = engineOptions(a);
  ranks.apply(options);
  const bool quiet = a.has("quiet") || ranks.silent();
  TerminalProgress progress(!quiet && TerminalProgress::stderrIsTerminal());
  Engine engine(options, loadProgress(progress));
  auto tokenizer = engine.tokenizer();
  GenerateRequest request;
  request.prompts = idPrompts(a);
  for (const auto& p : a.positional()) {
    if (!tokenizer) {
      throw Error(
          "this model has no tokenizer.json, so text prompts cannot be encoded; pass token ids "
          "with --ids 1,2,3");
    }
    request.prompts.push_back(tokenizer->encode(p));
  }
  request.sampling.maxTokens = a.getInt("max-tokens", 16);
  request.sampling.temperature = a.getDouble("temperature", 0.0);
  request.sampling.topK = a.getInt("top-k", 0);
  request.sampling.topP = a.getDouble("top-p", 1.0);
  request.sampling.seed = uint64_t(a.getInt("seed", 0));
  request.sampling.ignoreEos = a.has("ignore-eos");
  request.sampling.stopTokenIds = stopIds(a);
  JobHandle job = engine.generate(request);
  progress.follow(job, "generating");
  const GenerateResult result = Engine::generateResult(job);
  if (ranks.silent()) return 0;
  for (const RequestOutput& out : result.outputs) {
    if (tokenizer) {
      std::cout << tokenizer->displayText(out.tokenIds, /*skipSpecialTokens=*/true) << "\n";
    } else {
      for (size_t i = 0; i < out.tokenIds.size(); ++i)
        std::cout << (i ? "," : "") << out.tokenIds[i];
      std::cout << "\n";
    }
  }
  if (!a.has("quiet")) {
    int64_t tokens = 0;
    for (const auto& o : result.outputs) tokens += int64_t(o.tokenIds.size());
    std::fprintf(stderr, "%lld tokens in %lld steps, %.3f s (%s, tp=%d, pp=%d, %s, %s)\n",
                 (long long)tokens, (long long)result.steps, result.seconds,
                 engine.info().spec.c_str(), engine.info().tp, engine.info().pp,
                 engine.info().device.c_str(), engine.info().dtype.c_str());
  }
  return 0;
}

int inspect(const std::vector<std::string>& args) {
  const Arguments a(args, withModel({"prompt"}), {"help", "enable-expert-parallel"});
  if (a.has("help")) {
    std::cout
        << "usage: shardscope-cli inspect [options]\n\n"
        << kModelOptions
        << "  --prompt TEXT        the prompt whose port shapes are shown (default: 5 tokens,\n"
           "                       \"The capital of France is\")\n"
        << kEngineHelp;
    return 0;
  }
  if (!a.positional().empty()) throw UsageError("inspect takes no positional arguments");
  if (auto code = onEngine(a, [&] { return inspectRemote(a); })) return *code;
  TerminalProgress progress;
  Engine engine(engineOptions(a), loadProgress(progress));
  std::cout << inspectText(engine, a.get("prompt"));
  return 0;
}

int tokenize(const std::vector<std::string>& args) {
  const Arguments a(args, {"model", "tokenizer"}, {"help", "no-special"});
  if (a.has("help")) {
    std::cout << "usage: shardscope-cli tokenize [--model PATH|NAME | --tokenizer tokenizer.json] "
                 "[--no-special] \"text\"\n";
    return 0;
  }
  if (a.positional().size() != 1) throw UsageError("tokenize needs exactly one text argument");
  std::filesystem::path path = a.has("tokenizer") ? std::filesystem::path(a.get("tokenizer"))
                                                  : tokenizerPathFor(a.get("model"));
  if (path.empty())
    throw Error("model '" + a.get("model") + "' has no tokenizer.json; pass --tokenizer FILE");
  auto tok = Tokenizer::fromFile(path);
  const auto ids = tok->encode(a.positional()[0], !a.has("no-special"));
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
  std::cout << "\n";
  for (int64_t id : ids)
    std::cout << id << "\t" << tok->tokenText(id) << "\t" << tok->tokenPiece(id) << "\n";
  return 0;
}

// A rank process other than rank 0 runs the same script silently; rank 0 prints the error.
int runQuietRank(const std::string& source, const std::string& file, trace::RunOptions o) {
  o.out = [](const std::string&) {};
  o.note = [](const std::string&) {};
  try {
    trace::ScriptRunner(o).run(source, file);
    return 0;
  } catch (const std::exception&) {
    return 1;
  }
}

int runScript(const std::vector<std::string>& args) {
  const Arguments a(args,
                    {"tp", "pp", "device", "dtype", "backend", "model-dir", "budget",
                     "memory-budget-mb", "log", "session", "title", "value-cap-mb",
                     "collective-timeout", "dcp", "engine", "token-file", "example"},
                    {"help", "timing", "enable-expert-parallel", "mpi"});
  if (a.has("help")) {
    std::cout
        << "usage: shardscope-cli run FILE.py|--example NAME [--tp N] [--pp N]\n                   "
           "       [--device cpu|cuda]"
           "                          [--dtype bf16|f16|f32]\n"
           "                          [--backend auto|local|nccl] [--model-dir NAME=PATH ...]\n"
           "                          [--budget STEPS] [--memory-budget-mb MB]\n"
           "                          [--log S.db [--session NAME] [--title T]\n"
           "                          [--value-cap-mb MB]] [--collective-timeout S] [--timing]\n"
           "                          [--enable-expert-parallel] [--dcp N] [--mpi]\n"
           "Runs a trace script. VLLM(\"NAME\", ...) loads NAME from --model-dir NAME=PATH when "
           "given,\n"
           "else from a path or the Hugging Face cache (\"demo\" is the built-in demo model).\n"
           "--tp overrides tensor_parallel_size, --pp pipeline_parallel_size,\n"
           "--dcp decode_context_parallel_size, "
           "--enable-expert-parallel turns\n"
           "enable_expert_parallel on; --budget bounds the evaluation steps of each\n"
           "block (default 10000000); --memory-budget-mb bounds the bytes a block's values hold\n"
           "(default: half of the device's free memory). --log records the run in a session file "
           "(created if\n"
           "needed; session 'default' unless --session); saved values over --value-cap-mb\n"
           "(default 256) are recorded as a summary. --collective-timeout fails a trace whose\n"
           "collective waits longer than S seconds (default 60, or "
           "SHARDSCOPE_COLLECTIVE_TIMEOUT). --timing prints each trace's wall time and\n"
           "generation steps to stderr when the script ends (the session log keeps them too).\n"
           "--mpi runs each rank as a process: `mpirun -np N shardscope-cli run --mpi FILE.py`\n"
           "(or srun); tensor_parallel_size is N, rank 0 prints and logs, the GPU of a rank is\n"
           "its rank on its host.\n"
           "--example NAME runs a built-in example instead of a file ('shardscope-cli examples'\n"
           "lists them).\n"
        << kEngineHelp;
    return 0;
  }
  const size_t files = a.positional().size() + (a.has("example") ? 1 : 0);
  if (files != 1) throw UsageError("run needs exactly one script file, or --example NAME");
  std::string file, source;
  if (a.has("example")) {
    const examples::Example& e = examples::find(a.get("example"));
    file = e.name + ".py";
    source = e.source;
  } else {
    file = a.positional()[0];
    source = readFile(file);
  }
  if (auto code = onEngine(a, [&] { return runRemote(a, source, file); })) return *code;
  trace::RunOptions o;
  o.tp = int(a.getInt("tp", 0));
  o.pp = int(a.getInt("pp", 0));
  if (o.pp < 0) throw UsageError("--pp must be at least 1");
  if (const std::string device = a.get("device"); !device.empty())
    o.device = parseDeviceKind(device);
  o.dtype = parseModelDtype(a.get("dtype"));
  if (const std::string backend = a.get("backend"); !backend.empty())
    o.backend = parseGroupBackend(backend);
  o.expertParallel = a.has("enable-expert-parallel");
  o.dcp = int(a.getInt("dcp", 0));
  o.budget = a.getInt("budget", 10'000'000);
  o.memoryBudget = a.memoryBudgetBytes();
  o.collectiveTimeoutSeconds = a.getDouble("collective-timeout", 0);
  if (o.collectiveTimeoutSeconds < 0) throw UsageError("--collective-timeout must be positive");
  for (const auto& m : a.getAll("model-dir")) {
    const auto eq = m.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("--model-dir expects NAME=PATH, got '" + m + "'");
    o.modelDirs[m.substr(0, eq)] = m.substr(eq + 1);
  }
  const RankProcesses ranks = startRankProcesses(a, "run");  // before the runner's engines
  o.process = ranks.process;
  if (ranks.silent()) return runQuietRank(source, file, std::move(o));
  TerminalProgress progress;
  o.onJob = [&progress](const JobHandle& job) { progress.follow(job, "trace"); };
  o.out = [&progress](const std::string& line) {
    progress.clearLine();  // the script's own output, not after a half-drawn status line
    std::cout << line << "\n";
  };
  trace::ScriptRunner runner(std::move(o));  // holds the rank process until before MPI ends
  // Printed on the way out too, so a failing script still shows the traces that finished.
  struct TimingPrinter {
    const trace::ScriptRunner& runner;
    bool enabled;
    ~TimingPrinter() {
      if (!enabled) return;
      const auto& traces = runner.result().traces;
      for (size_t i = 0; i < traces.size(); ++i)
        std::cerr << "trace " << i << ": " << timingText(traces[i].timing) << "\n";
    }
  } timing{runner, a.has("timing")};
  if (!a.has("log")) {
    runner.run(source, file);
    return 0;
  }
  store::StoreOptions so;
  so.session = a.get("session", "default");
  so.valueCapBytes = int64_t(a.getDouble("value-cap-mb", 256) * 1e6);
  store::SessionStore log(a.get("log"), so);
  int64_t id = 0;
  try {
    store::runRecorded(log, runner, source, file,
                       a.get("title", std::filesystem::path(file).filename().string()), {}, &id);
  } catch (...) {
    if (id) std::cerr << "recorded as run " << id << " in " << a.get("log") << "\n";
    throw;
  }
  std::cerr << "recorded as run " << id << " in " << a.get("log") << "\n";
  return 0;
}

int makeCheckpoint(const std::vector<std::string>& args) {
  const Arguments a(args, {"config", "seed", "dtype"}, {"help"});
  if (a.has("help")) {
    std::cout
        << "usage: shardscope-cli make-checkpoint --config CONFIG.json [--seed S] [--dtype "
           "bf16|f16|f32] OUT_DIR\n"
           "Writes OUT_DIR/config.json and OUT_DIR/model.safetensors with the random weights that\n"
           "--model random:CONFIG.json@S would use (default seed 0, dtype bf16).\n";
    return 0;
  }
  if (a.positional().size() != 1)
    throw UsageError("make-checkpoint needs exactly one output directory");
  if (!a.has("config")) throw UsageError("make-checkpoint needs --config CONFIG.json");
  const std::filesystem::path out = a.positional()[0];
  if (std::filesystem::exists(out))
    throw Error(out.string() + " already exists; choose a new directory");
  writeRandomCheckpoint(readFile(a.get("config")), out, uint64_t(a.getInt("seed", 0)),
                        a.get("dtype", "bf16"));
  std::cout << "wrote " << out.string() << "\n";
  return 0;
}

}  // namespace
}  // namespace shardscope::cli

int main(int argc, char** argv) {
  using namespace shardscope::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (args[0] == "--version") {
    const shardscope::BuildInfo b = shardscope::buildInfo();
    std::cout << "shardscope-cli " << b.shardscope << " (LibTorch " << b.libtorch << ", CUDA "
              << (b.cuda ? "yes, " + std::to_string(b.gpus) + " GPU(s)" : std::string("no"))
              << ", NCCL " << (b.nccl ? b.ncclVersion : std::string("no")) << ", OpenMP CPU loops "
              << (b.openmp ? "yes" : "no") << ")\n";
    return 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  try {
    if (command == "run") return runScript(args);
    if (command == "generate") return generate(args);
    if (command == "inspect") return inspect(args);
    if (command == "tokenize") return tokenize(args);
    if (command == "make-checkpoint") return makeCheckpoint(args);
    if (command == "examples") return examplesCommand(args);
    if (command == "log") return logCommand(args);
    if (command == "show") return showCommand(args);
    if (command == "replay") return replayCommand(args);
    if (command == "export") return exportCommand(args);
    if (command == "diff") return diffCommand(args);
    std::cerr << "shardscope-cli: unknown command '" << command << "'\n\n" << kUsage;
    return 2;
  } catch (const UsageError& e) {
    std::cerr << "shardscope-cli " << command << ": " << e.what() << " (see 'shardscope-cli "
              << command << " --help')\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "shardscope-cli " << command << ": error: " << e.what() << "\n";
    return 1;
  }
}
