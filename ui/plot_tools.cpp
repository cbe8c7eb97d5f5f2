#include "plot_tools.h"

#include <qcustomplot.h>
#include <QClipboard>
#include <QFileDialog>
#include <QGuiApplication>
#include <QMenu>
#include <QMessageBox>
#include <QSvgGenerator>
#include <QToolTip>

namespace shardscope::ui {
namespace {

// The plot's size, or a readable default for a plot that has never been laid out.
QSize drawSize(const QCustomPlot* plot) {
  const QSize s = plot->size();
  return s.width() >= 100 && s.height() >= 100 ? s : QSize(800, 600);
}

QString saveSvg(QCustomPlot* plot, const QString& path, QSize size) {
  QSvgGenerator svg;
  svg.setFileName(path);
  svg.setSize(size);
  svg.setViewBox(QRect(QPoint(0, 0), size));
  svg.setTitle(plot->window()->windowTitle());
  QCPPainter painter;
  if (!painter.begin(&svg)) return QObject::tr("Could not write %1").arg(path);
  plot->toPainter(&painter, size.width(), size.height());
  painter.end();
  return {};
}

// The text of an axis tick at `key` when the axis names its ticks (tokens, experts), else the key.
QString keyText(const QCPAxis* axis, double key) {
  const auto text = axis->ticker().dynamicCast<QCPAxisTickerText>();
  const double rounded = std::round(key);
  if (text && text->ticks().contains(rounded)) return text->ticks().value(rounded);
  return QString::number(key, 'g', 5);
}

QString colorMapReadout(const QCPColorMap* map, double x, double y) {
  int k = 0, l = 0;
  map->data()->coordToCell(x, y, &k, &l);
  if (k < 0 || l < 0 || k >= map->data()->keySize() || l >= map->data()->valueSize()) return {};
  double cx = 0, cy = 0;
  map->data()->cellToCoord(k, l, &cx, &cy);
  const QString what = map->colorScale() ? map->colorScale()->axis()->label() : QString();
  return QObject::tr("%1 %2, %3 %4: %5%6")
      .arg(map->keyAxis()->label().isEmpty() ? "x" : map->keyAxis()->label())
      .arg(keyText(map->keyAxis(), cx))
      .arg(map->valueAxis()->label().isEmpty() ? "y" : map->valueAxis()->label())
      .arg(keyText(map->valueAxis(), cy))
      .arg(what.isEmpty() ? QString() : what + " ")
      .arg(map->data()->cell(k, l), 0, 'g', 6);
}

// The nearest data point by key of a graph or bar chart, when the cursor is near it.
QString oneDimensionalReadout(QCPAbstractPlottable* p, double x) {
  QCPPlottableInterface1D* data = p->interface1D();
  if (!data || data->dataCount() == 0) return {};
  const int begin = data->findBegin(x, false);
  int best = -1;
  for (int i = std::max(begin - 1, 0); i < std::min(begin + 2, data->dataCount()); ++i) {
    if (best < 0 || std::abs(data->dataMainKey(i) - x) < std::abs(data->dataMainKey(best) - x))
      best = i;
  }
  if (best < 0 || std::abs(data->dataMainKey(best) - x) > 0.5) return {};
  const double key = data->dataMainKey(best);
  const QString label = p->keyAxis()->label();
  return QObject::tr("%1%2 %3: %4")
      .arg(p->name().isEmpty() || p->name() == label ? QString() : p->name() + ", ")
      .arg(p->keyAxis()->label().isEmpty() ? "x" : p->keyAxis()->label())
      .arg(keyText(p->keyAxis(), key))
      .arg(data->dataMainValue(best), 0, 'g', 6);
}

void exportWithDialog(QCustomPlot* plot, const QString& suffix, const QString& filter) {
  const QString path =
      QFileDialog::getSaveFileName(plot, QObject::tr("Export plot"), "plot." + suffix, filter);
  if (path.isEmpty()) return;
  const QString error = savePlot(plot, path);
  if (!error.isEmpty()) QMessageBox::warning(plot, QObject::tr("Export plot"), error);
}

}  // namespace

QString savePlot(QCustomPlot* plot, const QString& path) {
  const QSize size = drawSize(plot);
  const QString suffix = QFileInfo(path).suffix().toLower();
  bool ok = false;
  if (suffix == "png") {
    ok = plot->savePng(path, size.width(), size.height());
  } else if (suffix == "pdf") {
    ok = plot->savePdf(path, size.width(), size.height());
  } else if (suffix == "svg") {
    return saveSvg(plot, path, size);
  } else {
    return QObject::tr("Cannot export a plot as '.%1': choose .png, .svg or .pdf").arg(suffix);
  }
  return ok ? QString() : QObject::tr("Could not write %1").arg(path);
}

void copyPlot(QCustomPlot* plot) {
  const QSize size = drawSize(plot);
  QGuiApplication::clipboard()->setPixmap(plot->toPixmap(size.width(), size.height()));
}

QString plotReadout(QCustomPlot* plot, const QPointF& pixel) {
  for (int i = plot->plottableCount() - 1; i >= 0; --i) {
    QCPAbstractPlottable* p = plot->plottable(i);
    if (!p->visible() || !p->keyAxis() || !p->valueAxis()) continue;
    const double x = p->keyAxis()->pixelToCoord(pixel.x());
    const double y = p->valueAxis()->pixelToCoord(pixel.y());
    if (!p->keyAxis()->axisRect()->rect().contains(pixel.toPoint())) continue;
    QString text;
    if (auto* map = qobject_cast<QCPColorMap*>(p))
      text = colorMapReadout(map, x, y);
    else
      text = oneDimensionalReadout(p, x);
    if (!text.isEmpty()) return text;
  }
  return {};
}

void installPlotTools(QCustomPlot* plot) {
  plot->setMouseTracking(true);
  QObject::connect(plot, &QCustomPlot::mouseMove, plot, [plot](QMouseEvent* e) {
    const QString text = plotReadout(plot, e->position());
    if (text.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(e->globalPosition().toPoint(), text, plot);
  });
  plot->setContextMenuPolicy(Qt::CustomContextMenu);
  QObject::connect(plot, &QWidget::customContextMenuRequested, plot, [plot](const QPoint& at) {
    QMenu menu(plot);
    menu.addAction(QObject::tr("Copy"), plot, [plot] { copyPlot(plot); });
    menu.addSeparator();
    menu.addAction(QObject::tr("Export as PNG..."), plot,
                   [plot] { exportWithDialog(plot, "png", QObject::tr("PNG (*.png)")); });
    menu.addAction(QObject::tr("Export as SVG..."), plot,
                   [plot] { exportWithDialog(plot, "svg", QObject::tr("SVG (*.svg)")); });
    menu.addAction(QObject::tr("Export as PDF..."), plot,
                   [plot] { exportWithDialog(plot, "pdf", QObject::tr("PDF (*.pdf)")); });
    menu.exec(plot->mapToGlobal(at));
  });
}

}  // namespace shardscope::ui
