// soak_trace: the randomised soak test as a long run (issue 14). Generates trace scripts
// (tests/soak/trace_script_generator.h) for the demo model or --model, runs each at tp=1 (local
// process group) and at --tp (default 2) over --backend, and compares them
// (tests/soak/soak_compare.h). One log line per script, the failing scripts in full, and a
// summary: scripts run, near-ties, mismatches, errors compared, hangs. A script that runs past
// --timeout is a hang: the summary so far and the script are printed and the process exits 124.
// In bf16 or f16 a script whose runs disagree by at most 4x the tolerance is run again in fp32 at
// both sizes: it counts as a mismatch only if fp32 disagrees too (differently sharded sums round
// differently; a sharding bug shows in fp32 as well). Its line says "ok-f32".
//
//   soak_trace --minutes 5 --seed 1 [--device cpu|cuda] [--backend local|nccl] [--dtype f32|bf16]
//              [--eager] [--tp 2] [--timeout 120] [--tolerance X] [--fresh-every 10]
//              [--scripts N] [--error-probability 0.15] [--model SPEC] [--log FILE]
//   soak_trace --script-seed N --print ...   runs (and prints) one script, as a log line names it
//
// Exit status: 0 all agreed, 1 a mismatch or an error in a script meant to be valid, 2 bad
// arguments, 124 a hang.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/model/model_source.h"
#include "soak/soak_session.h"
#include "soak/trace_script_generator.h"

using namespace shardscope;
using namespace shardscope::soak;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  double minutes = 5;
  uint64_t seed = 1;
  long long scripts = -1;
  long long scriptSeed = -1;
  bool print = false;
  std::string logPath;
  GeneratorOptions generator;
  SoakConfig session;
  double tolerance = -1;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(
      stderr,
      "soak_trace: %s\nusage: soak_trace [--minutes M] [--seed S] [--scripts N] "
      "[--device cpu|cuda] [--backend local|nccl] [--dtype f32|bf16|f16] [--eager] "
      "[--tp N] [--enable-expert-parallel] [--timeout SECONDS] [--tolerance X] [--fresh-every N] "
      "[--error-probability P] [--model SPEC] [--log FILE] [--script-seed N] [--print]\n",
      why.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  a.session.freshEvery = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(k + " needs a value");
      return argv[++i];
    };
    try {
      if (k == "--minutes")
        a.minutes = std::stod(value());
      else if (k == "--seed")
        a.seed = std::stoull(value());
      else if (k == "--scripts")
        a.scripts = std::stoll(value());
      else if (k == "--script-seed")
        a.scriptSeed = std::stoll(value());
      else if (k == "--print")
        a.print = true;
      else if (k == "--log")
        a.logPath = value();
      else if (k == "--device")
        a.session.device = value();
      else if (k == "--backend")
        a.session.backend = value();
      else if (k == "--dtype")
        a.session.dtype = value();
      else if (k == "--eager")
        a.generator.enforceEager = true;
      else if (k == "--enable-expert-parallel")
        a.generator.expertParallel = true;
      else if (k == "--tp")
        a.session.tp = std::stoi(value());
      else if (k == "--timeout")
        a.session.timeoutSeconds = std::stod(value());
      else if (k == "--tolerance")
        a.tolerance = std::stod(value());
      else if (k == "--fresh-every")
        a.session.freshEvery = std::stoi(value());
      else if (k == "--error-probability")
        a.generator.errorProbability = std::stod(value());
      else if (k == "--model")
        a.session.modelSpec = value();
      else
        usage("unknown option " + k);
    } catch (const std::logic_error&) {
      usage("bad value for " + k);
    }
  }
  if (a.session.device != "cpu" && a.session.device != "cuda") usage("--device is cpu or cuda");
  if (a.session.backend != "local" && a.session.backend != "nccl") usage("--backend local|nccl");
  if (a.session.tp < 2) usage("--tp must be at least 2 (tp=1 is the reference)");
  a.session.compare.tolerance = a.tolerance > 0 ? a.tolerance : defaultTolerance(a.session.dtype);
  return a;
}

// What the run has seen so far; read by the hang handler on the watchdog's thread.
struct Totals {
  std::mutex mutex;
  long long scripts = 0, mismatches = 0, unexpectedErrors = 0, nearTies = 0, nearTieScripts = 0,
            errorsCompared = 0, values = 0, skipped = 0, recheckedInF32 = 0;
  double maxRel = 0;
  std::map<std::string, int> errorKinds;
  std::string describe(double seconds, int hangs, double tolerance) {
    std::lock_guard<std::mutex> lock(mutex);
    std::string kinds;
    for (const auto& [k, n] : errorKinds)
      kinds += (kinds.empty() ? "" : ", ") + k + " " + std::to_string(n);
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "summary: %lld scripts in %.0f s; mismatches %lld; unexpected errors %lld; "
                  "near-ties %lld (in %lld scripts); errors compared %lld (%s); hangs %d; values "
                  "compared %lld (skipped after near-ties %lld); max relative error %.3g "
                  "(tolerance %.3g); agreed in fp32 after a low-precision difference %lld",
                  scripts, seconds, mismatches, unexpectedErrors, nearTies, nearTieScripts,
                  errorsCompared, kinds.empty() ? "none" : kinds.c_str(), hangs, values, skipped,
                  maxRel, tolerance, recheckedInF32);
    return buf;
  }
};

// Within this many tolerances a low-precision difference is re-checked in fp32.
constexpr double kRecheckCeiling = 4;

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  FILE* log = args.logPath.empty() ? nullptr : std::fopen(args.logPath.c_str(), "w");
  if (!args.logPath.empty() && !log) usage("cannot write " + args.logPath);
  std::mutex logMutex;
  const auto say = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(logMutex);
    std::fprintf(stdout, "%s\n", line.c_str());
    std::fflush(stdout);
    if (log) {
      std::fprintf(log, "%s\n", line.c_str());
      std::fflush(log);
    }
  };

  Totals totals;
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const double tolerance = args.session.compare.tolerance;
  args.generator.model = modelShapeOf(args.session.modelSpec);
  char head[512];
  std::snprintf(head, sizeof head,
                "soak_trace: seed %llu, %.1f minutes, model %s (%d layers), device %s, tp=1 "
                "(local) vs tp=%d (%s)%s, %s, %s, tolerance %.3g, timeout %g s, fresh engines "
                "every %d scripts",
                (unsigned long long)args.seed, args.minutes,
                args.session.modelSpec.empty() ? "demo" : args.session.modelSpec.c_str(),
                args.generator.model.layers, args.session.device.c_str(), args.session.tp,
                args.session.backend.c_str(),
                args.generator.expertParallel ? " expert parallel" : "", args.session.dtype.c_str(),
                args.generator.enforceEager ? "enforce_eager" : "graphs on", tolerance,
                args.session.timeoutSeconds, args.session.freshEvery);
  say(head);

  SoakSession session(args.session, [&](const std::string& what) {
    say(what);
    say(totals.describe(elapsed(), 1, tolerance));
    if (log) std::fclose(log);
    std::fflush(stdout);
    std::_Exit(124);
  });

  // The fp32 twin of `session`, made on the first low-precision difference.
  std::unique_ptr<SoakSession> fp32;
  const auto agreesInFp32 = [&](const std::string& script, const std::string& label,
                                std::string& detail) {
    if (!fp32) {
      SoakConfig c = args.session;
      c.dtype = "f32";
      c.compare.tolerance = defaultTolerance("f32");
      fp32 = std::make_unique<SoakSession>(c, [&](const std::string& what) {
        say("hang in the fp32 re-check: " + what);
        std::_Exit(124);
      });
    }
    const ScriptReport r = fp32->run(script, label + "-f32");
    char buf[160];
    std::snprintf(buf, sizeof buf, "re-checked in fp32: %s (maxrel %.2g)",
                  r.comparison.ok() ? "agree" : "DISAGREE", r.comparison.maxRelativeError);
    detail = buf;
    for (const auto& m : r.comparison.mismatches) detail += "\n      fp32: " + m;
    return r.comparison.ok();
  };

  for (long long i = 0;; ++i) {
    if (args.scriptSeed >= 0
            ? i > 0
            : (args.scripts >= 0 ? i >= args.scripts : elapsed() >= args.minutes * 60))
      break;
    const uint64_t seed =
        args.scriptSeed >= 0 ? uint64_t(args.scriptSeed) : scriptSeed(args.seed, uint64_t(i));
    const GeneratedScript g = generateTraceScript(seed, args.generator);
    if (args.print) say(g.text);
    const ScriptReport r = session.run(g.text, "soak-" + std::to_string(seed));
    const Comparison& c = r.comparison;
    std::string recheck;
    const bool rechecked =
        !c.ok() && args.session.dtype != "f32" && c.maxRelativeError <= kRecheckCeiling * tolerance;
    const bool failed =
        !c.ok() && !(rechecked && agreesInFp32(g.text, "soak-" + std::to_string(seed), recheck));
    const bool unexpected = !r.reference.error.empty() && g.error.empty();
    {
      std::lock_guard<std::mutex> lock(totals.mutex);
      ++totals.scripts;
      totals.mismatches += failed;
      totals.recheckedInF32 += rechecked && !failed;
      totals.unexpectedErrors += unexpected;
      totals.nearTies += long(c.nearTies.size());
      totals.nearTieScripts += !c.nearTies.empty();
      totals.values += c.valuesCompared;
      totals.skipped += c.valuesSkipped;
      totals.maxRel = std::max(totals.maxRel, c.maxRelativeError);
      if (c.errorsCompared) {
        ++totals.errorsCompared;
        ++totals.errorKinds[g.error.empty() ? "unplanned" : g.error];
      }
    }
    const std::string verdict = failed       ? "MISMATCH"
                                : unexpected ? "UNEXPECTED-ERROR"
                                : rechecked  ? "ok-f32"
                                             : "ok";
    char line[512];
    std::snprintf(line, sizeof line,
                  "[%5lld] %7.1f s seed %llu %-6s ref %.2f s cand %.2f s values %d skipped %d "
                  "maxrel %.2g near-ties %zu error %s | ",
                  i, elapsed(), (unsigned long long)seed, verdict.c_str(), r.reference.seconds,
                  r.candidate.seconds, c.valuesCompared, c.valuesSkipped, c.maxRelativeError,
                  c.nearTies.size(),
                  r.reference.error.empty() ? "-" : (g.error.empty() ? "?" : g.error.c_str()));
    say(line + g.summary + (c.worstValue.empty() ? "" : " | worst " + c.worstValue));
    for (const auto& t : c.nearTies) say("    near-tie: " + t);
    if (rechecked) {
      for (const auto& m : c.mismatches) say("    " + args.session.dtype + ": " + m);
      say("    " + recheck);
    }
    if (failed || unexpected) {
      if (failed && !rechecked) {
        for (const auto& m : c.mismatches) say("    " + m);
      }
      if (unexpected) say("    reference error: " + r.reference.error);
      if (!args.print) say("    script:\n" + g.text);
    }
  }
  const std::string summary = totals.describe(elapsed(), 0, tolerance);
  say(summary);
  if (log) std::fclose(log);
  return totals.mismatches || totals.unexpectedErrors ? 1 : 0;
}
