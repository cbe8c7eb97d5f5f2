// Every plot of the GUI, offscreen: exported as PNG, SVG and PDF (files written, non-empty, with
// each format's magic bytes), copied to the clipboard, and read out under the cursor.
#include <qcustomplot.h>
#include <QClipboard>
#include <QFile>
#include <QGuiApplication>
#include <QImage>
#include <QtTest>

#include "common/qt_warnings.h"
#include "common/test_support.h"
#include "ui/expert_chart.h"
#include "ui/head_grid_view.h"
#include "ui/heatmap_view.h"
#include "ui/logit_lens_view.h"
#include "ui/plot_tools.h"
#include "ui/routing_view.h"
#include "ui/top_k_view.h"

using namespace shardscope;
using namespace shardscope::ui;

namespace {

Matrix ramp(int64_t rows, int64_t cols) {
  Matrix m{rows, cols, {}};
  for (int64_t i = 0; i < rows * cols; ++i) m.data.push_back(double(i) - 3.0);
  return m;
}

QByteArray head(const QString& path, int n) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return f.read(n);
}

// The pixel of plot coordinates (x, y) on `plot`'s main axes.
QPointF pixelOf(const QCustomPlot* plot, double x, double y) {
  return {plot->xAxis->coordToPixel(x), plot->yAxis->coordToPixel(y)};
}

}  // namespace

class TestPlotTools : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { warnings_ = std::make_unique<test::QtWarnings>(); }  // after Qt Test's
  void cleanupTestCase() { warnings_.reset(); }
  void init() {
    window_ = std::make_unique<QWidget>();
    window_->resize(900, 700);
  }
  void cleanup() {
    window_.reset();
    const QString warnings = warnings_->take();
    QVERIFY2(warnings.isEmpty(), qPrintable("Qt warned:\n" + warnings));
  }

  void exportsEveryFormat_data() {
    QTest::addColumn<QString>("suffix");
    QTest::addColumn<QByteArray>("magic");
    QTest::newRow("png") << "png" << QByteArray("\x89PNG\r\n\x1a\n");
    QTest::newRow("svg") << "svg" << QByteArray("<?xml");
    QTest::newRow("pdf") << "pdf" << QByteArray("%PDF-");
  }
  void exportsEveryFormat() {
    QFETCH(QString, suffix);
    QFETCH(QByteArray, magic);
    auto* view = new HeatmapView(window_.get());
    view->resize(800, 600);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    view->setMatrix("activations", ramp(5, 12), {"The", " capital", " of", " France", " is"},
                    "feature");
    const QString path =
        QString::fromStdString((dir_.path() / ("plot." + suffix.toStdString())).string());
    QCOMPARE(savePlot(view->plot(), path), QString());
    QVERIFY(QFileInfo(path).size() > 1000);
    QCOMPARE(head(path, magic.size()), magic);
    if (suffix == "svg") {
      QFile f(path);
      QVERIFY(f.open(QIODevice::ReadOnly));
      const QByteArray svg = f.readAll();
      QVERIFY(svg.contains("<svg") && svg.contains("</svg>"));
      QVERIFY(svg.contains("capital"));  // the token labels are drawn as text
    }
    if (suffix == "png") {
      const QImage image(path);
      QCOMPARE(image.size(), view->plot()->size());
    }
    QVERIFY(!savePlot(view->plot(), QString::fromStdString((dir_.path() / "plot.bmp").string()))
                 .isEmpty());
  }

  // A plot never shown (a tab not opened yet) still exports at a readable size, without warnings.
  void exportsAPlotNeverShown() {
    TopKView view;
    view.setTokens({{" Paris", 0.5}, {" Lyon", 0.2}}, "next token");
    const QString path = QString::fromStdString((dir_.path() / "hidden.png").string());
    QCOMPARE(savePlot(view.plot(), path), QString());
    QCOMPARE(QImage(path).size(), QSize(800, 600));
  }

  void copiesToTheClipboard() {
    auto* view = new TopKView(window_.get());
    view->resize(600, 400);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    view->setTokens({{" Paris", 0.5}, {" Lyon", 0.2}, {" the", 0.1}}, "next token");
    QGuiApplication::clipboard()->clear();
    copyPlot(view->plot());
    const QImage image = QGuiApplication::clipboard()->image();
    QCOMPARE(image.size(), view->plot()->size());
    // Not blank: the bars are drawn in a colour other than the background's.
    QSet<QRgb> colours;
    for (int x = 0; x < image.width(); x += 7) colours.insert(image.pixel(x, image.height() / 2));
    QVERIFY(colours.size() > 2);
  }

  void readsOutEveryPlot() {
    window_->show();
    auto* heat = new HeatmapView(window_.get());
    auto* grid = new HeadGridView("hint", window_.get());
    auto* lens = new LogitLensView(window_.get());
    auto* topK = new TopKView(window_.get());
    auto* routing = new RoutingView(window_.get());
    for (QWidget* w : std::initializer_list<QWidget*>{heat, grid, lens, topK, routing}) {
      w->resize(700, 500);
      w->show();
    }
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    heat->setMatrix("z", ramp(5, 12), {"The", " capital", " of", " France", " is"}, "feature");
    QCOMPARE(plotReadout(heat->plot(), pixelOf(heat->plot(), 4, 2)),
             QString("feature 4, token  of: 25"));
    grid->setShape(2, 4);
    grid->setEffects(ramp(2, 4), "change");
    QVERIFY(plotReadout(grid->plot(), pixelOf(grid->plot(), 3, 1)).endsWith(": 4"));
    lens->setLens(Matrix{2, 3, {0.1, 0.2, 0.3, 0.4, 0.5, 0.625}},
                  {{"a", "b", "c"}, {"d", "e", "f"}}, {"The", " capital", " of"});
    QCOMPARE(plotReadout(lens->plot(), pixelOf(lens->plot(), 2, 1)),
             QString("position  of, layer 1: top-token probability 0.625"));
    topK->setTokens({{" Paris", 0.5}, {" Lyon", 0.25}}, "next token");
    QCOMPARE(plotReadout(topK->plot(), pixelOf(topK->plot(), 1.2, 0.1)),
             QString("next token  Lyon: 0.25"));
    ExpertRouting r;
    r.layers = {0, 1};
    r.tokens = 2;
    r.topK = 1;
    r.experts = {{3, 7}, {5, 1}};
    r.weights = {{1, 1}, {1, 1}};
    routing->setRouting(r, {"The", " cat"}, 8);
    QCOMPARE(plotReadout(routing->plot(), pixelOf(routing->plot(), 1, 1)),
             QString("token  cat, layer 1: top expert 1"));
    // Router probabilities peaking at each token's chosen expert (layer 0: 3 and 7; layer 1: 5
    // and 1), the rest 0.05 or 0.1.
    r.numExperts = 8;
    const auto peakAt = [](int64_t e) {
      std::vector<double> p = {0.1, 0.05, 0.05, 0.1, 0.1, 0.05, 0.05, 0.1};
      p[size_t(e)] = 0.4;
      return p;
    };
    for (size_t layer = 0; layer < 2; ++layer) {
      std::vector<double> p = peakAt(r.experts[layer][0]);
      const std::vector<double> second = peakAt(r.experts[layer][1]);
      p.insert(p.end(), second.begin(), second.end());
      r.probabilities.push_back(p);
    }
    routing->setRouting(r, {"The", " cat"}, 8);  // the chart shows layer 0, token 0 first
    QCustomPlot* bars = routing->chart();
    QCOMPARE(plotReadout(bars, pixelOf(bars, 3, 0.2)), QString("chosen, expert 3: 0.4"));
    QCOMPARE(plotReadout(bars, pixelOf(bars, 2, 0.02)), QString("not chosen, expert 2: 0.05"));
    // Outside the axes there is nothing to read.
    QVERIFY(plotReadout(heat->plot(), QPointF(1, 1)).isEmpty());
  }

 private:
  std::unique_ptr<test::QtWarnings> warnings_;
  test::TempDir dir_;
  std::unique_ptr<QWidget> window_;
};

QTEST_MAIN(TestPlotTools)
#include "tst_plot_tools.moc"
