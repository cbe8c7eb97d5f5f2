// The randomised soak test, short and seeded for CI (issue 14): generated trace scripts
// (tests/soak/trace_script_generator.h) run at tp=1 and tp=2 through local process groups in
// f32 and compared (tests/soak/soak_compare.h): every saved value, the printed lines, the errors,
// and the generated ids up to near-ties; on the demo model, and on a small random Qwen3-MoE in
// both expert layouts (router logits ablated or scaled, experts' partial sums read and written).
// A script that hangs ends the process with the script printed (exit 124). The other rows prove
// the comparison can fail: a changed script, a changed error, ids that differ without a
// near-tie, and a watchdog that fires.
//
// SHARDSCOPE_SOAK_SEED and SHARDSCOPE_SOAK_SCRIPTS change the run (default: seed 14, 20 scripts;
// the MoE rows seed 16 and SHARDSCOPE_SOAK_MOE_SCRIPTS, 16);
// `bench/soak_trace --script-seed N --print` replays one script by the seed this test prints.
#include <QtTest>

#include <ATen/Context.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/random_model.h"
#include "common/test_support.h"
#include "core/trace/ast.h"
#include "soak/soak_session.h"
#include "soak/trace_script_generator.h"

using namespace shardscope;
using namespace shardscope::soak;

namespace {

uint64_t envNumber(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

SoakConfig ciConfig() {
  SoakConfig c;
  c.device = test::device();
  c.backend = test::backend();
  c.dtype = "f32";
  c.compare.tolerance = defaultTolerance("f32");
  c.timeoutSeconds = 120;
  return c;
}

// A script whose saved values depend on a write: `extra` goes before the read.
std::string readScript(const std::string& extra) {
  return "model = VLLM(\"demo\")\n"
         "with model.trace(\"The capital of France is\", max_tokens=2, ignore_eos=True) as "
         "tracer:\n"
         "    r0 = []\n"
         "    lg0 = []\n"
         "    for i0 in tracer.iter[:]:\n" +
         extra +
         "        x0 = model.model.layers[1].mlp.output\n"
         "        r0.append(x0.clone())\n"
         "        lg0.append(model.logits.clone())\n"
         "    r0 = r0.save()\n"
         "    lg0 = lg0.save()\n"
         "print(len(r0), len(lg0))\n";
}

HostTensor row(std::vector<float> values) {
  HostTensor t;
  t.dtype = DType::F32;
  t.shape = {1, int64_t(values.size())};
  t.bytes.resize(values.size() * sizeof(float));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// A one-trace outcome whose invoke generated `ids` after the logits rows `rows`.
RunOutcome synthetic(std::vector<int64_t> ids, std::vector<std::vector<float>> rows) {
  RunOutcome o;
  trace::TraceRecord t;
  t.sampling.temperature = 0;
  trace::InvokeRecord inv;
  inv.promptIds = {1, 2};
  inv.tokenIds = std::move(ids);
  t.invokes.push_back(inv);
  for (size_t s = 0; s < rows.size(); ++s) {
    trace::SavedValue v;
    v.name = logitsListName(0) + "[" + std::to_string(s) + "]";
    v.tensor = row(rows[s]);
    t.values.push_back(v);
  }
  trace::SavedValue later;  // a value of a later step: it saw the generated ids
  later.name = "r0[0]";
  later.tensor = row({float(t.invokes[0].tokenIds.back())});
  t.values.push_back(later);
  o.result.traces.push_back(t);
  return o;
}

}  // namespace

class TestSoak : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void generatorIsDeterministicAndParses() {
    std::map<std::string, int> errors;
    std::set<std::string> features;
    for (uint64_t i = 0; i < 300; ++i) {
      const GeneratedScript g = generateTraceScript(scriptSeed(7, i));
      QCOMPARE(generateTraceScript(g.seed).text, g.text);
      try {
        trace::parseProgram(g.text, "generated.py");
      } catch (const std::exception& e) {
        QFAIL((std::string(e.what()) + "\n" + g.text).c_str());
      }
      ++errors[g.error];
      for (const char* f :
           {"stop", "patch", "iter-range", "logit-lens", "call-mlp", "write", "head-accessor",
            "step-condition", "seeded", "3x", "direct-save", "append-view", "forced-sample",
            "call-norm", "comprehension", "driver-function"}) {
        if (g.summary.find(f) != std::string::npos) features.insert(f);
      }
    }
    QVERIFY(generateTraceScript(1).text != generateTraceScript(2).text);
    QCOMPARE(invokeOfValue("r2[0]"), 2);
    QCOMPARE(invokeOfValue("lg1[3]"), 1);
    QCOMPARE(invokeOfValue("v0_7"), 0);
    QCOMPARE(invokeOfValue("out2"), 2);
    QCOMPARE(invokeOfValue("logits"), -1);
    for (const char* kind : {"ran-past", "unknown-module", "wrong-shape", "layer-out-of-range"})
      QVERIFY2(errors.count(kind), kind);
    QVERIFY2(errors[""] > 200, "most scripts hold no deliberate error");
    QCOMPARE(int(features.size()), 16);
  }

  // A model of two experts: however many router writes a script holds, the last expert is never
  // ablated, so no token's logits are all -inf (the softmax would be NaN at every size).
  void expertAblationsLeaveAFiniteLogit() {
    GeneratorOptions options;
    options.model.experts = 2;
    options.model.sparse = std::vector<bool>(size_t(options.model.layers), true);
    int ablations = 0;
    for (uint64_t i = 0; i < 400; ++i) {
      const GeneratedScript g = generateTraceScript(scriptSeed(11, i), options);
      QVERIFY2(g.text.find("[:, 1] = float(\"-inf\")") == std::string::npos, g.text.c_str());
      for (size_t pos = g.text.find("[:, 0] = float(\"-inf\")"); pos != std::string::npos;
           pos = g.text.find("[:, 0] = float(\"-inf\")", pos + 1))
        ++ablations;
    }
    QVERIFY2(ablations > 20, "the scripts still ablate the other expert");
  }

  void scriptsAgreeAtTp1AndTp2() {
    if (test::backend() == "nccl" && at::getNumGPUs() < 2) QSKIP("NCCL needs one GPU per rank");
    SoakSession session(ciConfig());
    const int failures = runScripts(session, envNumber("SHARDSCOPE_SOAK_SEED", 14),
                                    int(envNumber("SHARDSCOPE_SOAK_SCRIPTS", 20)), {});
    QCOMPARE(failures, 0);
  }

  // Qwen3-MoE (a small random one, layer 1 dense among sparse ones): the router's logits read as
  // probabilities, ablated (-inf), scaled or shifted, and the experts' partial sums read and
  // written, in both expert layouts.
  void moeScriptsAgreeAtTp1AndTp2_data() {
    QTest::addColumn<bool>("expertParallel");
    QTest::newRow("default") << false;
    QTest::newRow("expert parallel") << true;
  }
  void moeScriptsAgreeAtTp1AndTp2() {
    QFETCH(bool, expertParallel);
    if (test::backend() == "nccl" && at::getNumGPUs() < 2) QSKIP("NCCL needs one GPU per rank");
    test::TempDir dir;
    SoakConfig c = ciConfig();
    c.modelSpec = test::randomModelSpec(dir.path(), "qwen3-moe-small.json");
    nlohmann::json config = nlohmann::json::parse(std::ifstream(dir.path() / "config.json"));
    config["mlp_only_layers"] = {1};
    std::ofstream(dir.path() / "config.json") << config.dump();
    GeneratorOptions options;
    options.model = modelShapeOf(c.modelSpec);
    options.expertParallel = expertParallel;
    QCOMPARE(options.model.sparse, (std::vector<bool>{true, false, true}));
    QCOMPARE(options.model.experts, 16);
    SoakSession session(c);
    const int failures = runScripts(session, envNumber("SHARDSCOPE_SOAK_SEED", 16),
                                    int(envNumber("SHARDSCOPE_SOAK_MOE_SCRIPTS", 16)), options);
    QCOMPARE(failures, 0);
    qInfo("scripts naming mlp.gate: %d, mlp.experts: %d", routerScripts_, expertScripts_);
    QVERIFY2(routerScripts_ >= 4 && expertScripts_ >= 4,
             "the scripts should name mlp.gate and mlp.experts ports");
  }

 private:
  // Runs `count` generated scripts from `seed` at both sizes; returns how many disagreed (or
  // failed without meaning to). Counts the scripts naming each MoE port.
  int runScripts(SoakSession& session, uint64_t seed, int count, const GeneratorOptions& options) {
    int failures = 0, nearTies = 0, errorsCompared = 0, unexpected = 0;
    routerScripts_ = expertScripts_ = 0;
    for (int i = 0; i < count; ++i) {
      const GeneratedScript g = generateTraceScript(scriptSeed(seed, uint64_t(i)), options);
      routerScripts_ += g.text.find(".mlp.gate.output") != std::string::npos;
      expertScripts_ += g.text.find(".mlp.experts.output") != std::string::npos;
      const std::string label = "soak-" + std::to_string(g.seed);
      const ScriptReport r = session.run(g.text, label);
      const Comparison& c = r.comparison;
      nearTies += int(c.nearTies.size());
      errorsCompared += c.errorsCompared;
      qInfo("script %d seed %llu %s: %.2f s + %.2f s, %d values, max rel %.2g, %zu near-ties%s%s",
            i, (unsigned long long)g.seed, g.summary.c_str(), r.reference.seconds,
            r.candidate.seconds, c.valuesCompared, c.maxRelativeError, c.nearTies.size(),
            r.reference.error.empty() ? "" : ", error: ", r.reference.error.substr(0, 160).c_str());
      const bool unplanned = !r.reference.error.empty() && g.error.empty();
      unexpected += unplanned;
      if (!c.ok() || unplanned) {
        ++failures;
        std::string text = unplanned ? "an error in a script meant to be valid\n" : "";
        for (const auto& m : c.mismatches) text += "  " + m + "\n";
        qWarning("script seed %llu FAILED:\n%s%s", (unsigned long long)g.seed, text.c_str(),
                 g.text.c_str());
      }
    }
    qInfo("%d scripts, seed %llu: %d failed, %d near-ties, %d errors compared, %d unexpected",
          count, (unsigned long long)seed, failures, nearTies, errorsCompared, unexpected);
    return failures;
  }
  int routerScripts_ = 0, expertScripts_ = 0;

 private Q_SLOTS:

  void aChangedValueIsAMismatch() {
    SoakSession session(ciConfig());
    const RunOutcome plain = session.runReference(readScript(""), "plain");
    const RunOutcome same = session.runCandidate(readScript(""), "plain");
    QVERIFY(compareOutcomes(plain, same).ok());
    const RunOutcome scaled = session.runCandidate(
        readScript("        model.model.layers[1].mlp.output *= 1.01\n"), "plain");
    const Comparison c = compareOutcomes(plain, scaled);
    QVERIFY(!c.ok());
    bool named = false;
    for (const auto& m : c.mismatches) named |= m.find("r0[0]") != std::string::npos;
    QVERIFY2(named, c.mismatches[0].c_str());
  }

  void aChangedErrorIsAMismatch() {
    SoakSession session(ciConfig());
    const RunOutcome a = session.runReference(
        readScript("        model.model.layers[1].mlp.output = torch.zeros(3, 3)\n"), "bad");
    const RunOutcome b = session.runCandidate(
        readScript("        model.model.layers[1].mlp.output = torch.zeros(3, 4)\n"), "bad");
    QVERIFY(!a.error.empty());
    QVERIFY(compareOutcomes(a, a).ok());
    QVERIFY(compareOutcomes(a, a).errorsCompared);
    QVERIFY(!compareOutcomes(a, b).ok());
    const RunOutcome fine = session.runCandidate(readScript(""), "bad");
    QVERIFY(!compareOutcomes(a, fine).ok());
  }

  void idsDifferOnlyAtNearTies() {
    // Step 1's top two logits are 0.5 apart in the reference; the candidate's differ by 0.3.
    const RunOutcome ref = synthetic({3, 1}, {{0, 0, 0, 9}, {0, 5.0f, 4.5f, 0}});
    const RunOutcome tie = synthetic({3, 2}, {{0, 0, 0, 9}, {0, 4.7f, 4.8f, 0}});
    Comparison c = compareOutcomes(ref, tie, {0.1});
    QVERIFY2(c.ok(), c.ok() ? "" : c.mismatches[0].c_str());
    QCOMPARE(int(c.nearTies.size()), 1);
    QVERIFY(c.valuesSkipped > 0);  // r0[0] ran on different tokens
    // The same ids change with logits that agree far better than the gap (so the candidate's id
    // is not its own argmax): a mismatch.
    const RunOutcome close = synthetic({3, 2}, {{0, 0, 0, 9}, {0, 5.0f, 4.49f, 0}});
    c = compareOutcomes(ref, close, {0.1});
    QVERIFY(!c.ok());
    QVERIFY2(c.mismatches[0].find("does not follow from its logits") != std::string::npos,
             c.mismatches[0].c_str());
    // Logits beyond the tolerance are a mismatch even when the gap is small.
    c = compareOutcomes(ref, tie, {1e-4});
    QVERIFY(!c.ok());
    QVERIFY(compareOutcomes(ref, ref).ok());
  }

  void watchdogFiresOnlyPastItsDeadline() {
    std::atomic<int> fired{0};
    std::string what;
    {
      Watchdog dog([&](const std::string& w) {
        what = w;
        ++fired;
      });
      dog.arm(5, "slow");
      dog.disarm();
      dog.arm(0.05, "the script");
      QTRY_COMPARE_WITH_TIMEOUT(fired.load(), 1, 5000);
      dog.arm(10, "disarmed in time");
      dog.disarm();
    }
    QCOMPARE(fired.load(), 1);
    QCOMPARE(what, std::string("the script"));
  }
};

QTEST_GUILESS_MAIN(TestSoak)
#include "tst_soak.moc"
