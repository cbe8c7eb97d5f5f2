#include "session_commands.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "arguments.h"
#include "core/store/replay.h"
#include "core/store/session_store.h"
#include "core/store/value_export.h"
#include "core/store/value_summary.h"

namespace shardscope::cli {
namespace {

std::string localTime(int64_t ms) {
  if (ms == 0) return "-";
  const std::time_t t = std::time_t(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// Milliseconds below a second, seconds above.
std::string duration(double seconds) {
  char buf[32];
  if (seconds < 1.0)
    std::snprintf(buf, sizeof buf, "%.1f ms", seconds * 1000.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f s", seconds);
  return buf;
}

std::string seconds(const store::RunSummary& r) {
  if (r.endedMs == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", double(r.endedMs - r.startedMs) / 1000.0);
  return buf;
}

int64_t runId(const std::string& text) {
  try {
    size_t used = 0;
    const long long id = std::stoll(text, &used);
    if (used == text.size() && id > 0) return id;
  } catch (const std::exception&) {
  }
  throw UsageError("RUN must be a run id (a positive integer, see 'shardscope-cli log'), got '" +
                   text + "'");
}

store::StoreOptions readerOptions(const Arguments& a) {
  store::StoreOptions o;
  o.session = a.get("session", "default");
  return o;
}

std::string sampling(const SamplingParams& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "max_tokens=%lld temperature=%g top_k=%lld top_p=%g seed=%llu",
                (long long)s.maxTokens, s.temperature, (long long)s.topK, s.topP,
                (unsigned long long)s.seed);
  std::string out = buf;
  if (!s.stop.empty()) {
    out += " stop=" +
           nlohmann::json(s.stop).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return out;
}

std::string ids(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t i : v) s += (s.empty() ? "" : ",") + std::to_string(i);
  return s;
}

void printValueData(const trace::SavedValue& v, int64_t limit) {
  if (!v.isTensor()) {
    std::cout << *v.repr << "\n";
    return;
  }
  const HostTensor& t = v.tensor;
  const auto s = v.summary ? *v.summary : store::summarize(t);
  std::printf("%s %s  min %.6g  max %.6g  mean %.6g  norm %.6g%s\n", dtypeName(t.dtype),
              t.shapeString().c_str(), s.min, s.max, s.mean, s.norm,
              s.nonFinite ? ("  non-finite " + std::to_string(s.nonFinite)).c_str() : "");
  if (!v.hasData()) {
    std::cout << v.note << "\n";
    return;
  }
  const int64_t n = t.numel();
  const int64_t row = t.shape.empty() ? 1 : std::max<int64_t>(1, t.shape.back());
  for (int64_t i = 0; i < n && i < limit; ++i) {
    std::printf(i % row == 0 ? (i ? "\n%.6g" : "%.6g") : " %.6g", t.element(i));
  }
  if (n > 0) std::printf("\n");
  if (n > limit) std::printf("... %lld more (--limit N shows more)\n", (long long)(n - limit));
}

}  // namespace

std::string timingText(const std::optional<trace::TraceTiming>& t) {
  if (!t) return "not recorded";
  return duration(t->wallSeconds) + ", " + std::to_string(t->steps) +
         (t->steps == 1 ? " step" : " steps");
}

int logCommand(const std::vector<std::string>& args) {
  const Arguments a(args, {"session"}, {"help", "all"});
  if (a.has("help")) {
    std::cout << "usage: shardscope-cli log S.db [--session NAME | --all]\n"
                 "Lists the runs of a session file (default session: default).\n";
    return 0;
  }
  if (a.positional().size() != 1) throw UsageError("log needs exactly one session file");
  store::SessionStore s(a.positional()[0], readerOptions(a));
  const auto runs = s.runs(a.has("all"));
  if (runs.empty()) {
    std::cout << "no runs in session '" << s.options().session << "' of " << s.path().string()
              << " (sessions there:";
    for (const auto& name : s.sessions()) std::cout << " " << name;
    std::cout << ")\n";
    return 0;
  }
  std::printf("%5s  %-19s  %-11s  %8s  %10s  %6s  %-3s  %-22s  %6s  %s\n", "RUN", "STARTED",
              "STATUS", "TIME", "TRACE TIME", "STEPS", "TP", "MODEL", "VALUES", "TITLE");
  for (const auto& r : runs) {
    std::string title = r.title;
    if (r.replayOf) title += " (replay of " + std::to_string(*r.replayOf) + ")";
    if (a.has("all")) title = "[" + r.session + "] " + title;
    // TRACE TIME sums the run's traces (the rest of TIME is loading and the script around them).
    const bool timed = r.traceSeconds.has_value();
    std::printf("%5lld  %-19s  %-11s  %8s  %10s  %6s  %-3s  %-22s  %6lld  %s\n", (long long)r.id,
                localTime(r.startedMs).c_str(), store::runStatusName(r.status), seconds(r).c_str(),
                timed ? duration(*r.traceSeconds).c_str() : "-",
                timed ? std::to_string(r.steps).c_str() : "-",
                r.tp ? std::to_string(r.tp).c_str() : "-", r.model.substr(0, 22).c_str(),
                (long long)r.valueCount, title.c_str());
    if (!r.error.empty()) std::printf("       %s\n", r.error.substr(0, 200).c_str());
  }
  return 0;
}

int showCommand(const std::vector<std::string>& args) {
  const Arguments a(args, {"session", "value", "trace", "limit"}, {"help", "script"});
  if (a.has("help")) {
    std::cout << "usage: shardscope-cli show S.db RUN [--value NAME [--trace K] [--limit N]] "
                 "[--script]\n"
                 "Shows a recorded run: status, models, sampling, generations and saved values.\n"
                 "--value prints one saved value (the last trace's when several saved it);\n"
                 "--limit bounds the elements printed (default 64); --script prints the script.\n";
    return 0;
  }
  if (a.positional().size() != 2) throw UsageError("show needs a session file and a run id");
  store::StoreOptions o = readerOptions(a);
  store::SessionStore s(a.positional()[0], o);
  const int64_t id = runId(a.positional()[1]);
  if (a.has("value")) {
    const auto v = s.value(id, a.get("value"), int(a.getInt("trace", -1)));
    printValueData(v, a.getInt("limit", 64));
    return 0;
  }
  const store::RunRecord r = s.run(id, /*withValueData=*/false);
  if (a.has("script")) {
    std::cout << r.script;
    return 0;
  }
  std::cout << "run " << r.summary.id << " of session '" << r.summary.session
            << "': " << r.summary.title << "\n"
            << "  status   " << store::runStatusName(r.summary.status)
            << (r.summary.error.empty() ? "" : " (" + r.summary.error + ")") << "\n"
            << "  started  " << localTime(r.summary.startedMs) << ", took " << seconds(r.summary)
            << ", on " << r.host << " (pid " << r.pid << ")\n"
            << "  script   " << r.summary.scriptFile << " (" << r.script.size()
            << " bytes; --script prints it)\n";
  if (r.summary.replayOf) std::cout << "  replays  run " << *r.summary.replayOf << "\n";
  for (const auto& m : r.result.models) {
    std::cout << "  model    " << m.name << " = " << m.spec
              << (m.path.empty() ? "" : " at " + m.path) << "\n           config.json sha256 "
              << m.configSha256 << "\n           " << m.dtype << ", tp=" << m.tp
              << (m.expertParallel ? " (enable_expert_parallel)" : "") << ", " << m.device << " ("
              << m.backend << "), ShardScope " << m.engineVersion << "\n";
  }
  for (size_t ti = 0; ti < r.result.traces.size(); ++ti) {
    const auto& t = r.result.traces[ti];
    std::cout << "trace " << ti << ": " << sampling(t.sampling) << "\n"
              << "  time " << timingText(t.timing) << "\n";
    for (size_t ii = 0; ii < t.invokes.size(); ++ii) {
      const auto& inv = t.invokes[ii];
      std::cout << "  invoke " << ii << ": prompt " << inv.promptIds.size() << " tokens ["
                << ids(inv.promptIds).substr(0, 80) << "]\n    generated [" << ids(inv.tokenIds)
                << "] (" << inv.finishReason << ")\n    text " << '"' << inv.text << '"' << "\n";
    }
    for (const auto& v : t.values) {
      std::cout << "  saved " << v.name << ": ";
      if (!v.isTensor())
        std::cout << *v.repr << "\n";
      else
        std::cout << dtypeName(v.tensor.dtype) << " " << v.tensor.shapeString()
                  << (v.note.empty() ? "" : "  (" + v.note + ")") << "\n";
    }
  }
  if (!r.result.printed.empty()) std::cout << "printed:\n" << r.result.printed;
  return 0;
}

int replayCommand(const std::vector<std::string>& args) {
  const Arguments a(args, {"session", "budget", "memory-budget-mb"}, {"help", "no-log"});
  if (a.has("help")) {
    std::cout << "usage: shardscope-cli replay S.db RUN [--no-log] [--budget STEPS] "
                 "[--memory-budget-mb MB]\n"
                 "Re-runs a recorded script on the same model (path, dtype, tp, device as "
                 "recorded) and\ncompares every saved value and generated text. The replay is "
                 "recorded as a new run\nunless --no-log. --budget and --memory-budget-mb bound "
                 "each block as in `run` (a session\nfrom someone else is untrusted input). Exit "
                 "status: 0 identical, 3 differences, 1 errors.\n";
    return 0;
  }
  if (a.positional().size() != 2) throw UsageError("replay needs a session file and a run id");
  store::SessionStore s(a.positional()[0], readerOptions(a));
  store::ReplayOptions o;
  o.record = !a.has("no-log");
  o.run.out = [](const std::string&) {};  // the script's prints were recorded the first time
  o.run.budget = a.getInt("budget", o.run.budget);
  o.run.memoryBudget = a.memoryBudgetBytes();
  const int64_t id = runId(a.positional()[1]);
  const store::ReplayReport report = store::replayRun(s, id, o);
  for (const auto& n : report.notes) std::cout << "note: " << n << "\n";
  for (const auto& v : report.values) {
    std::printf("  trace %d  %-32s %s\n", v.trace, v.name.c_str(), v.diff.detail.c_str());
  }
  for (const auto& t : report.texts) {
    std::printf(
        "  trace %d  invoke %d  text %s\n", t.trace, t.invoke,
        t.same ? "matches" : ("differs: \"" + t.before + "\" -> \"" + t.after + "\"").c_str());
  }
  std::cout << "replay of run " << id
            << (report.replayId ? " (recorded as run " + std::to_string(report.replayId) + ")" : "")
            << ": " << (report.identical() ? "identical" : "DIFFERS") << "\n";
  return report.identical() ? 0 : 3;
}

int diffCommand(const std::vector<std::string>& args) {
  const Arguments a(args, {"session"}, {"help"});
  if (a.has("help")) {
    std::cout
        << "usage: shardscope-cli diff S.db RUN_A RUN_B\n"
           "Compares two recorded runs: each saved value (max abs and relative difference of\n"
           "B against A) and each generation (tokens that changed), with a note when their\n"
           "models or scripts differ. The GUI's Compare in the session log shows the same.\n"
           "Exit status: 0 identical, 3 differences, 1 errors.\n";
    return 0;
  }
  if (a.positional().size() != 3) throw UsageError("diff needs a session file and two run ids");
  store::StoreOptions o = readerOptions(a);
  o.readOnly = true;
  const store::SessionStore s(a.positional()[0], o);
  const int64_t first = runId(a.positional()[1]), second = runId(a.positional()[2]);
  const store::ReplayReport report = store::compareRuns(s, first, second);
  for (const auto& n : report.notes) std::cout << "note: " << n << "\n";
  for (const auto& v : report.values)
    std::printf("  trace %d  %-32s %s\n", v.trace, v.name.c_str(), v.diff.detail.c_str());
  for (const auto& t : report.texts) {
    std::printf("  trace %d  invoke %d  text ", t.trace, t.invoke);
    if (t.same) {
      std::printf("identical (%zu tokens)\n", t.beforeIds.size());
      continue;
    }
    std::printf("%lld of %zu tokens changed: \"%s\" -> \"%s\"\n", (long long)t.changedTokens,
                std::max(t.beforeIds.size(), t.afterIds.size()), t.before.c_str(), t.after.c_str());
  }
  std::cout << "run " << second << " against run " << first << ": "
            << (report.identical() ? "identical" : "DIFFERS") << "\n";
  return report.identical() ? 0 : 3;
}

int exportCommand(const std::vector<std::string>& args) {
  const Arguments a(args, {"session"}, {"help"});
  if (a.has("help")) {
    std::cout << "usage: shardscope-cli export S.db RUN OUT.safetensors\n"
                 "Writes a run's saved tensors (their recorded dtype and shape) as a safetensors "
                 "file.\n";
    return 0;
  }
  if (a.positional().size() != 3)
    throw UsageError("export needs a session file, a run id and an output file");
  store::SessionStore s(a.positional()[0], readerOptions(a));
  const auto report = store::exportRun(s, runId(a.positional()[1]), a.positional()[2]);
  std::cout << "wrote " << report.written.size() << " tensors to " << a.positional()[2] << "\n";
  for (const auto& k : report.skipped) std::cout << "  skipped " << k << "\n";
  return 0;
}

}  // namespace shardscope::cli
