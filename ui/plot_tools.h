// What every plot offers: export as PNG, SVG or PDF, a copy on the clipboard, and a hover tooltip
// with the value under the cursor (colour maps: the cell; graphs and bars: the nearest point).
#pragma once

#include <QPointF>
#include <QString>

class QCustomPlot;

namespace shardscope::ui {

// Writes `plot` in the format `path`'s suffix names (.png, .svg, .pdf); returns an error message,
// or empty on success. A plot not laid out yet is drawn at 800 x 600.
QString savePlot(QCustomPlot* plot, const QString& path);

// Puts the plot on the clipboard as an image.
void copyPlot(QCustomPlot* plot);

// The value under widget pixel `pixel` of `plot`, as one line; empty where there is none.
QString plotReadout(QCustomPlot* plot, const QPointF& pixel);

// Adds the right-click menu (Copy, Export as PNG/SVG/PDF) and the hover tooltip to `plot`.
void installPlotTools(QCustomPlot* plot);

}  // namespace shardscope::ui
