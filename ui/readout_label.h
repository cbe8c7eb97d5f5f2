// Labels whose text changes as the user works (status, hover read-outs, job names) must not widen
// the window: a QLabel's minimum width is its text's, so each longer text would raise the main
// window's minimum size (the window grows, and the platform is sent a size-hint change). These
// take the width the layout gives them and cut what does not fit.
#pragma once

#include <QLabel>

namespace shardscope::ui {

inline void keepLabelFromWidening(QLabel* label) {
  label->setSizePolicy(QSizePolicy::Ignored, label->sizePolicy().verticalPolicy());
  label->setMinimumWidth(1);
}

}  // namespace shardscope::ui
