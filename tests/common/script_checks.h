// The script suites' helpers (tst_script_safety, tst_script_language, tst_script_scopes): a runner
// on the demo model with a small memory budget, the error a script ends with, a host without a
// model, and the check that a data row's script fails with its message while the runner works on.
#pragma once

#include <QtTest/QtTest>

#include <memory>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "core/model/model_source.h"
#include "core/trace/interpreter.h"
#include "core/trace/script_runner.h"

namespace shardscope::test {

constexpr int64_t kTestMemoryBudget = int64_t(64) << 20;

// Options of a runner on the demo model (fp32, the test device and backend) whose scripts print
// into `lines`; notes are dropped.
inline trace::RunOptions demoRunOptions(std::vector<std::string>* lines, int tp = 1) {
  trace::RunOptions o;
  o.modelDirs["demo"] = ensureDemoModel().string();
  o.tp = tp;
  o.device = test::deviceKind();
  o.dtype = DType::F32;
  o.backend = test::groupBackend();
  o.out = [lines](const std::string& l) { lines->push_back(l); };
  o.note = [](const std::string&) {};
  return o;
}

// A demo-model runner with small budgets, so that a hostile script ends quickly.
inline std::unique_ptr<trace::ScriptRunner> makeRunner(std::vector<std::string>* lines,
                                                       int tp = 1) {
  trace::RunOptions o = demoRunOptions(lines, tp);
  o.budget = 2'000'000;
  o.memoryBudget = kTestMemoryBudget;
  return std::make_unique<trace::ScriptRunner>(o);
}

// The error a script ends with ("no error" when it ran to the end).
inline std::string errorOf(trace::ScriptRunner& runner, const std::string& script,
                           const std::string& file = "hostile.py") {
  try {
    runner.run(script, file);
  } catch (const trace::ScriptError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a ScriptError: ") + e.what();
  }
  return "no error";
}

// A host for driver-level code without a model (module and tracer access are the script's error).
class NoModelHost : public trace::Host {
 public:
  trace::Value moduleAttribute(trace::Interpreter& in, const trace::Value&,
                               const std::string&) override {
    in.fail("no model here");
  }
  void setModuleAttribute(trace::Interpreter& in, const trace::Value&, const std::string&,
                          const trace::Value&) override {
    in.fail("no model here");
  }
  trace::Value moduleIndex(trace::Interpreter& in, const trace::Value&, long long) override {
    in.fail("no model here");
  }
  std::optional<long long> moduleLength(trace::Interpreter& in, const trace::Value&) override {
    in.fail("no model here");
  }
  trace::Value callModule(trace::Interpreter& in, const trace::Value&, trace::CallArgs&) override {
    in.fail("no model here");
  }
  trace::Value tracerAttribute(trace::Interpreter& in, const trace::Value&,
                               const std::string&) override {
    in.fail("no tracer here");
  }
  void runWith(trace::Interpreter& in, const trace::Stmt&, const trace::Value&) override {
    in.fail("no trace here");
  }
  void iterateSteps(trace::Interpreter& in, const trace::Value&,
                    const std::function<bool(long long)>&) override {
    in.fail("no trace here");
  }
  void print(const std::string&) override {}
};

// The data row's script (columns script and message) fails with its message, not an internal
// error, and the runner still runs the next script.
inline void failsWithMessageAndRunnerWorksOn() {
  QFETCH(QString, script);
  QFETCH(QString, message);
  std::vector<std::string> lines;
  auto runner = makeRunner(&lines);
  const std::string e = errorOf(*runner, script.toStdString());
  QVERIFY2(e.find(message.toStdString()) != std::string::npos, e.c_str());
  QVERIFY2(e.find("internal error") == std::string::npos, e.c_str());
  runner->run("print(f'{2 ** 10:,}')\n", "good.py");  // the runner still works
  QCOMPARE(lines.back(), std::string("1,024"));
}

}  // namespace shardscope::test
