// The colour scales the views share: diverging blue-white-red for signed data (white = 0) and a
// sequential scale for non-negative data; cells without data are transparent.
#pragma once

#include <qcustomplot.h>

namespace shardscope::ui {

inline QCPColorGradient divergingScale() {
  QCPColorGradient g;
  g.setColorStopAt(0.0, QColor(0x21, 0x66, 0xac));
  g.setColorStopAt(0.5, QColor(0xf7, 0xf7, 0xf7));
  g.setColorStopAt(1.0, QColor(0xb2, 0x18, 0x2b));
  g.setNanHandling(QCPColorGradient::nhTransparent);
  return g;
}

inline QCPColorGradient sequentialScale() {
  QCPColorGradient g(QCPColorGradient::gpThermal);
  g.setNanHandling(QCPColorGradient::nhTransparent);
  return g;
}

}  // namespace shardscope::ui
