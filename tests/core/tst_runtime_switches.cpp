// RuntimeSwitches: each SHARDSCOPE_* switch's default, its settings, and the error a value it does
// not take gives; reload() leaves earlier readings valid.
#include <QtTest>
#include <algorithm>
#include <string>
#include <vector>

#include "common/scoped_switch.h"
#include "core/error.h"
#include "core/runtime_switches.h"

using namespace shardscope;
using test::ScopedSwitch;

namespace {

// The message of the Error reading the environment gives with `variable` set to `value`.
std::string refusal(const char* variable, const char* value) {
  qputenv(variable, value);
  std::string message;
  try {
    RuntimeSwitches::fromEnvironment();
  } catch (const Error& e) {
    message = e.what();
  }
  qunsetenv(variable);
  return message;
}

}  // namespace

class TestRuntimeSwitches : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    // The suite's process starts with none of them set (ctest's environment does not set them).
    for (const char* v : {"SHARDSCOPE_BATCH_CALLS", "SHARDSCOPE_PDL", "SHARDSCOPE_CAPTURE_STREAM",
                          "SHARDSCOPE_GRAPH_WARMUPS", "SHARDSCOPE_ALL_REDUCE"})
      QVERIFY2(!qEnvironmentVariableIsSet(v), v);
  }

  void defaultsWhenUnset() {
    const RuntimeSwitches s = RuntimeSwitches::fromEnvironment();
    QVERIFY(s.batchCalls && s.decodeAhead && s.segmentFusedFirst && s.batchPromptAttention);
    QVERIFY(s.fusedDecode && s.fusedAttention && s.fusedMoeNorm && s.moeOneToken && s.moeWide);
    QVERIFY(s.programmaticLaunch);
    QVERIFY(!s.fullNormGemvGrid && !s.groupAttentionBlocks);
    QCOMPARE(s.graphWarmups, 0);
    QCOMPARE(s.collectiveTimeoutSeconds, 0.0);
    QVERIFY(s.captureStream == CaptureStreamSource::Leased);
    QVERIFY(s.allReduce == AllReduceAlgorithm::Auto);
  }

  void onOffSwitches_data() {
    QTest::addColumn<QString>("variable");
    for (const char* v :
         {"SHARDSCOPE_BATCH_CALLS", "SHARDSCOPE_DECODE_AHEAD", "SHARDSCOPE_SEGMENT_FUSED",
          "SHARDSCOPE_BATCH_PROMPT_ATTENTION", "SHARDSCOPE_FUSED_DECODE",
          "SHARDSCOPE_FUSED_ATTENTION", "SHARDSCOPE_FUSED_MOE_NORM", "SHARDSCOPE_MOE_ONE_TOKEN",
          "SHARDSCOPE_MOE_WIDE", "SHARDSCOPE_PDL"})
      QTest::newRow(v) << v;
  }
  // Each on/off switch: 0 turns exactly it off, 1 and the empty string leave the defaults.
  void onOffSwitches() {
    QFETCH(QString, variable);
    const auto flags = [](const RuntimeSwitches& s) {
      return std::vector<bool>{s.batchCalls,           s.decodeAhead, s.segmentFusedFirst,
                               s.batchPromptAttention, s.fusedDecode, s.fusedAttention,
                               s.fusedMoeNorm,         s.moeOneToken, s.moeWide,
                               s.programmaticLaunch};
    };
    const std::vector<bool> defaults = flags(RuntimeSwitches::fromEnvironment());
    std::vector<bool> off;
    {
      const ScopedSwitch zero(variable.toStdString(), "0");
      off = flags(RuntimeSwitches::current());
    }
    QCOMPARE(std::count(off.begin(), off.end(), false), 1);
    for (const char* same : {"1", ""}) {
      const ScopedSwitch on(variable.toStdString(), same);
      QVERIFY(flags(RuntimeSwitches::current()) == defaults);
    }
    QVERIFY(flags(RuntimeSwitches::current()) == defaults);  // put back
  }

  void namedSettings() {
    {
      const ScopedSwitch s("SHARDSCOPE_CAPTURE_STREAM", "pool");
      QVERIFY(RuntimeSwitches::current().captureStream == CaptureStreamSource::Pool);
    }
    {
      const ScopedSwitch s("SHARDSCOPE_ATTENTION_BLOCKS", "group");
      QVERIFY(RuntimeSwitches::current().groupAttentionBlocks);
    }
    {
      const ScopedSwitch s("SHARDSCOPE_NORM_GEMV_GRID", "full");
      QVERIFY(RuntimeSwitches::current().fullNormGemvGrid);
    }
    for (AllReduceAlgorithm a : {AllReduceAlgorithm::Auto, AllReduceAlgorithm::Peer,
                                 AllReduceAlgorithm::Nccl, AllReduceAlgorithm::NcclSymmetric}) {
      const ScopedSwitch s("SHARDSCOPE_ALL_REDUCE", toString(a));
      QVERIFY2(RuntimeSwitches::current().allReduce == a, toString(a));
    }
    {
      const ScopedSwitch s("SHARDSCOPE_GRAPH_WARMUPS", "5");
      QCOMPARE(RuntimeSwitches::current().graphWarmups, 5);
    }
    {
      const ScopedSwitch s("SHARDSCOPE_COLLECTIVE_TIMEOUT", "2.5");
      QCOMPARE(RuntimeSwitches::current().collectiveTimeoutSeconds, 2.5);
    }
    QVERIFY(RuntimeSwitches::current().captureStream == CaptureStreamSource::Leased);
  }

  // A value a switch does not take is an Error with the variable, the value and what it takes
  // (where a switch's `yes` once meant "off" without a word).
  void badValuesAreRefused_data() {
    QTest::addColumn<QString>("variable");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("takes");
    QTest::newRow("on/off") << "SHARDSCOPE_PDL"
                            << "off"
                            << "takes 0, 1";
    QTest::newRow("grid") << "SHARDSCOPE_NORM_GEMV_GRID"
                          << "yes"
                          << "takes sm, full";
    QTest::newRow("all-reduce") << "SHARDSCOPE_ALL_REDUCE"
                                << "ring"
                                << "takes auto, peer, nccl, nccl-symmetric";
    QTest::newRow("stream") << "SHARDSCOPE_CAPTURE_STREAM"
                            << "new"
                            << "takes leased, pool";
    QTest::newRow("warmups 0") << "SHARDSCOPE_GRAPH_WARMUPS"
                               << "0"
                               << "a positive integer";
    QTest::newRow("warmups 1.5") << "SHARDSCOPE_GRAPH_WARMUPS"
                                 << "1.5"
                                 << "a positive integer";
    QTest::newRow("warmups 1e30") << "SHARDSCOPE_GRAPH_WARMUPS"
                                  << "1e30"
                                  << "below 2^31";
    QTest::newRow("timeout") << "SHARDSCOPE_COLLECTIVE_TIMEOUT"
                             << "3s"
                             << "a positive number";
    QTest::newRow("timeout < 0") << "SHARDSCOPE_COLLECTIVE_TIMEOUT"
                                 << "-1"
                                 << "a positive number";
  }
  void badValuesAreRefused() {
    QFETCH(QString, variable);
    QFETCH(QString, value);
    QFETCH(QString, takes);
    const std::string message = refusal(variable.toUtf8().constData(), value.toUtf8().constData());
    QVERIFY2(message.find((variable + "=" + value).toStdString()) != std::string::npos,
             message.c_str());
    QVERIFY2(message.find(takes.toStdString()) != std::string::npos, message.c_str());
  }

  // A refused setting leaves the environment and the settings as they were.
  void aRefusedSettingChangesNothing() {
    const CaptureStreamSource before = RuntimeSwitches::current().captureStream;
    QVERIFY_THROWS_EXCEPTION(Error, ScopedSwitch("SHARDSCOPE_CAPTURE_STREAM", "both"));
    QVERIFY(!qEnvironmentVariableIsSet("SHARDSCOPE_CAPTURE_STREAM"));
    QVERIFY(RuntimeSwitches::current().captureStream == before);
  }

  // A reference to the settings stays valid, and unchanged, after a reload.
  void earlierReadingsStayValid() {
    const RuntimeSwitches& before = RuntimeSwitches::current();
    QVERIFY(before.programmaticLaunch);
    {
      const ScopedSwitch off("SHARDSCOPE_PDL", "0");
      QVERIFY(!RuntimeSwitches::current().programmaticLaunch);
      QVERIFY(before.programmaticLaunch);
    }
    QVERIFY(RuntimeSwitches::current().programmaticLaunch);
  }
};

QTEST_GUILESS_MAIN(TestRuntimeSwitches)
#include "tst_runtime_switches.moc"
