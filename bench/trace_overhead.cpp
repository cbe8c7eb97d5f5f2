// trace_overhead: what a trace costs on top of the forward it rides on, on the demo model (CPU,
// tp=1 unless --tp): a plain one-step generation, an empty trace, a trace with 1 save and with
// 12 saves, and a trace that reads one port (to show untouched ports cost nothing measurable).
// Plain and traced runs alternate after warm-up; a case's overhead is the median of the N per-pair
// differences in wall time, and beside it in process CPU time (every thread; robust to a loaded
// machine, where wall time mostly measures the neighbours). --threads N sets the rank threads'
// intra-op threads (default: cores / tp); --profile N runs only N empty traces (for perf record),
// --profile-plain N only N plain forwards (its baseline in a differential profile); --only NAME
// measures one case. The median of N pair differences varies by about a plain forward's spread
// over sqrt(N): on a 2-core VM whose ~5 ms forward varies by +-5 %, N=300 gives about +-20 us.
// nnsight's published figures for the same shapes of work (308 / 474 / 716 us) are printed as
// context, not as a ratio: they were not run in this call (no Python torch on this machine), and
// a peer measured elsewhere is no peer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/model/model_source.h"
#include "core/model/tokenizer.h"
#include "core/trace/script_runner.h"

using namespace shardscope;
using Clock = std::chrono::steady_clock;

namespace {

// Wall and process CPU time of one call, in microseconds. CPU time counts every thread of the
// process (driver, dispatcher, ranks) and not the time spent waiting for a core, so on a shared,
// loaded machine it shows the work a trace adds where wall time mostly shows the neighbours.
struct Sample {
  double wall = 0, cpu = 0;
};

double cpuMicros() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) / 1e3;
}

template <class F>
Sample timeOnce(F fn) {
  const double c = cpuMicros();
  const auto a = Clock::now();
  fn();
  return {std::chrono::duration<double, std::micro>(Clock::now() - a).count(), cpuMicros() - c};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double medianMicros(int n, F fn) {
  for (int i = 0; i < (n > 1 ? 5 : 0); ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < n; ++i) t.push_back(timeOnce(fn).wall);
  return median(t);
}

std::string traceScript(const std::string& body) {
  return "model = VLLM(\"demo\")\nwith model.trace(\"The capital of France is\"):\n" + body;
}

}  // namespace

int main(int argc, char** argv) {
  int tp = 1, n = 200, threads = 0, profile = 0, profilePlain = 0;
  std::string only;  // --only "empty trace": one case (a large --n resolves tens of microseconds)
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--only") only = argv[i + 1];
    if (std::string(argv[i]) == "--tp") tp = std::stoi(argv[i + 1]);
    if (std::string(argv[i]) == "--n") n = std::stoi(argv[i + 1]);
    if (std::string(argv[i]) == "--threads") threads = std::stoi(argv[i + 1]);
    if (std::string(argv[i]) == "--profile") profile = std::stoi(argv[i + 1]);
    if (std::string(argv[i]) == "--profile-plain") profilePlain = std::stoi(argv[i + 1]);
  }
  EngineOptions o;
  o.tp = tp;
  o.dtype = DType::F32;
  // 0: the engine's default (cores / tp). On a loaded machine, 1 keeps the forward from waiting
  // on busy cores at every parallel region, which otherwise drowns a 30 us difference.
  o.threadsPerRank = threads;
  Engine engine(o);
  GenerateRequest r;
  r.prompts = {engine.tokenizer()->encode("The capital of France is")};
  r.sampling.maxTokens = 1;
  const auto plainRun = [&] { Engine::generateResult(engine.generate(r)); };

  if (profilePlain > 0) {
    const double total = timeOnce([&] {
                           for (int i = 0; i < profilePlain; ++i) plainRun();
                         }).wall;
    std::printf("%d plain forwards: %.1f us each\n", profilePlain, total / profilePlain);
    return 0;
  }
  trace::RunOptions ro;
  ro.modelDirs["demo"] = ensureDemoModel().string();
  ro.tp = tp;
  ro.dtype = DType::F32;
  ro.out = [](const std::string&) {};
  ro.engine = &engine;  // the same engine, so the difference is the trace alone
  trace::ScriptRunner runner(ro);
  if (profile > 0) {  // only empty traces, back to back: a steady state for perf record
    const std::string empty = traceScript("    pass\n");
    const double total = timeOnce([&] {
                           for (int i = 0; i < profile; ++i) runner.run(empty, "bench.py");
                         }).wall;
    std::printf("%d empty traces: %.1f us each\n", profile, total / profile);
    return 0;
  }
  std::string twelve;
  const char* ports[] = {"model.model.embed_tokens.output",
                         "model.model.layers[0].self_attn.qkv_proj.output[0]",
                         "model.model.layers[0].self_attn.attn.output",
                         "model.model.layers[0].self_attn.o_proj.input",
                         "model.model.layers[0].mlp.act_fn.output",
                         "model.model.layers[1].self_attn.o_proj.input",
                         "model.model.layers[1].mlp.down_proj.output[0]",
                         "model.model.layers[2].self_attn.qkv_proj.output[0]",
                         "model.model.layers[2].mlp.act_fn.output",
                         "model.model.layers[3].self_attn.o_proj.input",
                         "model.model.layers[3].output[0]",
                         "model.logits"};
  for (int i = 0; i < 12; ++i)
    twelve += "    s" + std::to_string(i) + " = " + ports[i] + ".save()\n";
  struct Case {
    const char* name;
    std::string script;
    double nnsight;
  };
  const std::vector<Case> cases = {
      {"empty trace", traceScript("    pass\n"), 308},
      {"1 save", traceScript("    h = model.model.layers[1].output[0].save()\n"), 474},
      {"12 saves", traceScript(twelve), 716},
      {"read one layer (no save)", traceScript("    h = model.model.layers[3].output\n"), 0},
  };
  std::printf(
      "trace_overhead: demo model (Qwen3 arch, hidden 32, 4 layers, vocab 151936), tp=%d, CPU, "
      "5-token prompt, 1 step, median of %d, %s threads per rank\n",
      tp, n, threads > 0 ? std::to_string(threads).c_str() : "default");
  const double plain = medianMicros(n, plainRun);
  std::printf("  plain forward (engine job, no trace): %.1f us\n", plain);
  const double setup = medianMicros(n, [&] { runner.run("x = 1\n", "bench.py"); });
  const double load = medianMicros(n, [&] { runner.run("model = VLLM(\"demo\")\n", "bench.py"); });
  std::printf(
      "  driver only: a script without a trace %.1f us, with VLLM(...) (engine reused) %.1f us\n",
      setup, load);
  for (const auto& c : cases) {
    if (!only.empty() && only != c.name) continue;
    // Plain and traced runs alternate, so drift (caches, clocks) hits both alike.
    std::vector<double> diffs, totals, cpuDiffs;
    for (int i = 0; i < n + 5; ++i) {
      const Sample p = timeOnce(plainRun);
      const Sample t = timeOnce([&] { runner.run(c.script, "bench.py"); });
      if (i < 5) continue;
      diffs.push_back(t.wall - p.wall);
      totals.push_back(t.wall);
      cpuDiffs.push_back(t.cpu - p.cpu);
    }
    const double t = median(totals), over = median(diffs), cpuOver = median(cpuDiffs);
    if (c.nnsight > 0) {
      std::printf(
          "  %-26s %.1f us total, overhead %.1f us, CPU time %.1f us (context, not run here: "
          "nnsight publishes %.0f us)\n",
          c.name, t, over, cpuOver, c.nnsight);
    } else {
      std::printf(
          "  %-26s %.1f us total, overhead %.1f us, CPU time %.1f us (%.1f%% of the plain "
          "forward)\n",
          c.name, t, over, cpuOver, 100.0 * over / plain);
    }
  }
  return 0;
}
