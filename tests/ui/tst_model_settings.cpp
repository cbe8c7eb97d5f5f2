// How a model is opened and what the panel says about it (offscreen): the Open model dialog shows
// the current pp, keeps the options it does not show (backend, expert parallelism), takes the CPU
// threads per rank ("auto" is 0, the engine's default) only where they apply (the CPU), and the
// engine panel prints the rank's thread count for a CPU model, none for a GPU one or for a remote
// engine that did not send it.
#include <QComboBox>
#include <QSpinBox>
#include <QtTest>

#include "common/qt_warnings.h"
#include "ui/engine_panel.h"
#include "ui/open_model_dialog.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

ModelInfo cpuModel(int threads) {
  ModelInfo m;
  m.spec = "demo";
  m.family = "qwen3";
  m.dtype = "float32";
  m.device = "cpu";
  m.backend = "local";
  m.tp = 2;
  m.numLayers = 2;
  m.numHeads = 4;
  m.numKvHeads = 2;
  m.intraOpThreads = threads;
  return m;
}

}  // namespace

class TestModelSettings : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { warnings_ = std::make_unique<test::QtWarnings>(); }
  void cleanupTestCase() { warnings_.reset(); }
  void cleanup() {
    const QString warnings = warnings_->take();
    QVERIFY2(warnings.isEmpty(), qPrintable("Qt warned:\n" + warnings));
  }

  void dialogTakesThreadsAndKeepsTheRest() {
    EngineOptions current;
    current.model = "demo";
    current.tp = 2;
    current.pp = 2;
    current.backend = GroupBackend::Local;
    current.expertParallel = true;
    current.threadsPerRank = 3;
    OpenModelDialog dialog(current, /*gpus=*/0);
    auto* stages = dialog.findChild<QSpinBox*>("pipelineStages");
    QVERIFY(stages);
    QCOMPARE(stages->value(), 2);
    stages->setValue(3);
    auto* threads = dialog.findChild<QSpinBox*>("threadsPerRank");
    QVERIFY(threads);
    QCOMPARE(threads->value(), 3);
    threads->setValue(0);
    QCOMPARE(threads->text(), QString("auto"));
    threads->setValue(2);
    const EngineOptions o = dialog.options();
    QCOMPARE(o.threadsPerRank, 2);
    QCOMPARE(o.pp, 3);
    QVERIFY(o.backend == GroupBackend::Local);  // not shown, kept
    QVERIFY(o.expertParallel);
    QCOMPARE(QString::fromStdString(o.model), QString("demo"));
    QCOMPARE(o.tp, 2);
  }

  void threadsApplyToTheCpuOnly() {
    EngineOptions current;
    current.device = DeviceKind::Cpu;
    OpenModelDialog dialog(current, /*gpus=*/1);
    auto* threads = dialog.findChild<QSpinBox*>("threadsPerRank");
    QVERIFY(threads);
    QVERIFY(threads->isEnabled());
    auto* device = dialog.findChild<QComboBox*>("device");
    QVERIFY(device);
    QVERIFY(device->findText("cuda") >= 0);  // offered with a GPU
    device->setCurrentText("cuda");
    QVERIFY(!threads->isEnabled());
    device->setCurrentText("cpu");
    QVERIFY(threads->isEnabled());
  }

  void panelPrintsTheThreadCount() {
    EnginePanel panel;
    ModelInfo one = cpuModel(1);
    panel.setModel(&one);
    QVERIFY2(panel.modelText().contains("1 CPU thread(s) per rank"), qPrintable(panel.modelText()));
    QVERIFY2(panel.modelText().contains("(local), 1 CPU thread(s) per rank<br>KV cache "),
             qPrintable(panel.modelText()));  // on the device line, before the cache's
    ModelInfo three = cpuModel(3);
    panel.setModel(&three);
    QVERIFY2(panel.modelText().contains("3 CPU thread(s) per rank"), qPrintable(panel.modelText()));
    ModelInfo old = cpuModel(0);  // a remote engine that does not send it
    panel.setModel(&old);
    QVERIFY2(!panel.modelText().contains("thread"), qPrintable(panel.modelText()));
    ModelInfo gpu = cpuModel(4);
    gpu.device = "cuda";
    panel.setModel(&gpu);
    QVERIFY2(!panel.modelText().contains("thread"), qPrintable(panel.modelText()));
    QVERIFY(panel.modelText().contains("tp=2"));
  }

 private:
  std::unique_ptr<test::QtWarnings> warnings_;
};

QTEST_MAIN(TestModelSettings)
#include "tst_model_settings.moc"
