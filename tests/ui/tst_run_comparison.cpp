// Run comparison in the window (offscreen, demo model at tp=2): two runs of a script, one with a
// head of layer 0 zeroed, picked in the session log and compared. The Compare tab shows what
// `shardscope-cli diff` prints (per value: identical or max abs / relative; changed tokens), and
// its heatmap is run B's value minus run A's as the session file holds them.
#include <QItemSelectionModel>
#include <QProcess>
#include <QPushButton>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QtTest>

#include "common/main_window_waits.h"
#include "common/qt_warnings.h"
#include "common/test_support.h"
#include "core/store/session_store.h"
#include "ui/heatmap_view.h"
#include "ui/main_window.h"
#include "ui/output_diff_view.h"
#include "ui/run_comparison_view.h"
#include "ui/script_editor.h"
#include "ui/session_log_model.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

// Scales head 3 of layer 0 by `scale` at every step; saves a value before the edit (identical in
// both runs), one after it and the logits (different once the head is zeroed).
std::string script(const char* scale) {
  return std::string(
             "model = VLLM(\"demo\", tensor_parallel_size=2)\n"
             "with model.trace(\"The capital of France is\", temperature=0.0, max_tokens=6) as "
             "tracer:\n"
             "    for step in tracer.iter[:]:\n"
             "        attn = model.model.layers[0].self_attn\n"
             "        if step == 0:\n"
             "            qkv = attn.qkv_proj.output[0].save()\n"
             "        attn.o_proj.head(attn.o_proj.input, 3)[:] *= ") +
         scale +
         "\n"
         "        if step == 0:\n"
         "            z = model.model.layers[1].self_attn.o_proj.input.save()\n"
         "            logits = model.logits.save()\n";
}

int64_t runScript(MainWindow& w, const std::string& text) {
  w.editor()->setPlainText(QString::fromStdString(text));
  QSignalSpy shown(&w, &MainWindow::resultShown);
  w.runEditorScript();
  if (!shown.wait(300000) || !test::waitLoaded(w)) return 0;
  return shown.takeFirst().at(0).toLongLong();
}

void selectRuns(MainWindow& w, std::initializer_list<int64_t> ids) {
  QTableView* log = w.sessionLogView();
  log->clearSelection();
  for (int64_t id : ids) {
    log->selectionModel()->select(w.sessionLog()->index(w.sessionLog()->rowOfRun(id), 0),
                                  QItemSelectionModel::Select | QItemSelectionModel::Rows);
  }
}

std::vector<double> elements(const HostTensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.element(i));
  return out;
}

}  // namespace

class TestRunComparison : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    warnings_ = std::make_unique<test::QtWarnings>();  // after Qt Test's own handler
  }
  void cleanupTestCase() { warnings_.reset(); }
  void cleanup() {
    const QString warnings = warnings_->take();
    QVERIFY2(warnings.isEmpty(), qPrintable("Qt warned:\n" + warnings));
  }

  void comparesTwoRunsAsTheCliDoes() {
    const auto db = dir_.path() / "s.db";
    StartOptions o;
    o.model.model = "demo";
    o.model.tp = 2;
    o.sessionFile = QString::fromStdString(db.string());
    o.restoreState = false;
    MainWindow w(o);
    w.show();
    QVERIFY(test::waitLoaded(w));
    const int64_t a = runScript(w, script("1.0"));
    const int64_t b = runScript(w, script("0.0"));
    QVERIFY(a > 0 && b > a);

    auto* compare = w.findChild<QPushButton*>("compareRuns");
    QVERIFY(compare);
    selectRuns(w, {a});
    QTest::mouseClick(compare, Qt::LeftButton);
    QVERIFY2(w.statusText().contains("Select two runs"), qPrintable(w.statusText()));
    selectRuns(w, {b, a});
    QTest::mouseClick(compare, Qt::LeftButton);
    RunComparisonView* view = w.comparison();
    QCOMPARE(w.tabs()->currentWidget(), static_cast<QWidget*>(view));
    QCOMPARE(view->report().runId, a);

    // The CLI's report of the same two runs.
    QProcess p;
    p.start(SHARDSCOPE_CLI,
            {"diff", QString::fromStdString(db.string()), QString::number(a), QString::number(b)});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 3);  // differences
    const QString cli = QString::fromUtf8(p.readAllStandardOutput());

    QTableWidget* table = view->table();
    QCOMPARE(table->rowCount(), 3);
    QMap<QString, int> rowOf;
    for (int row = 0; row < table->rowCount(); ++row) {
      const QString name = table->item(row, RunComparisonView::NameColumn)->text();
      const QString detail = table->item(row, RunComparisonView::DetailColumn)->text();
      rowOf[name] = row;
      const QRegularExpression line(
          "trace 0  " + name + " +" + QRegularExpression::escape(detail) + "$",
          QRegularExpression::MultilineOption);
      QVERIFY2(line.match(cli).hasMatch(), qPrintable(name + ": " + detail + "\n" + cli));
    }
    QCOMPARE(table->item(rowOf["qkv"], RunComparisonView::DetailColumn)->text(),
             QString("bit-identical"));
    QCOMPARE(table->item(rowOf["qkv"], RunComparisonView::MaxAbsColumn)->text(), QString("-"));
    for (const char* name : {"z", "logits"}) {
      const auto& v = view->report().values[size_t(rowOf[name])];
      QVERIFY2(!v.diff.identical && v.diff.maxAbs > 0 && v.diff.relative > 0, name);
      QCOMPARE(table->item(rowOf[name], RunComparisonView::MaxAbsColumn)->text(),
               QString::number(v.diff.maxAbs, 'g', 4));
    }
    // Head 3 zeroed: its 32 columns of layer 0's o_proj.input are gone, so layer 1 sees another
    // input; the heatmap is B - A as stored (the demo's 7 prompt tokens x 8 heads of 32).
    table->setCurrentCell(rowOf["z"], RunComparisonView::NameColumn);
    store::SessionStore s(db, {.readOnly = true});
    const auto za = elements(s.value(a, "z").tensor), zb = elements(s.value(b, "z").tensor);
    const Matrix& shown = view->heatmap()->matrix();
    QCOMPARE(shown.rows, int64_t(7));
    QCOMPARE(shown.cols, int64_t(256));
    for (size_t i = 0; i < za.size(); ++i) QCOMPARE(shown.data[i], zb[i] - za[i]);

    // Generations: the same changed-token count as the CLI's.
    const QRegularExpression changed(R"(invoke 0  text (\d+) of (\d+) tokens changed)");
    const auto m = changed.match(cli);
    if (m.hasMatch()) {
      QCOMPARE(view->generations()->changedTokens(), m.captured(1).toInt());
    } else {
      QVERIFY2(cli.contains("invoke 0  text identical (6 tokens)"), qPrintable(cli));
      QCOMPARE(view->generations()->changedTokens(), 0);
    }
    QVERIFY(view->summary().contains("2 of 3 values differ"));

    // The difference plot exports like any other.
    const QString svg = QString::fromStdString((dir_.path() / "diff.svg").string());
    QCOMPARE(w.savePlot(svg), QString());
    QVERIFY(QFileInfo(svg).size() > 1000);

    // A run against itself: identical everywhere.
    w.compareRuns(a, a);
    QVERIFY(view->report().identical());
    QVERIFY(view->summary().contains("0 of 3 values differ"));
  }

 private:
  std::unique_ptr<test::QtWarnings> warnings_;
  test::TempDir dir_;
};

QTEST_MAIN(TestRunComparison)
#include "tst_run_comparison.moc"
