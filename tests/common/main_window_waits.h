// Waiting on a MainWindow in the offscreen GUI suites (tst_main_window, tst_engine_gui,
// tst_run_comparison): the event loop keeps running while the controller loads a model or runs
// a script, and a suite asserts only once it is idle again.
#pragma once

#include <QtTest>

#include "ui/main_window.h"

namespace shardscope::test {

using ui::MainWindow;

// Until a model is loaded and the controller idle; false when `seconds` pass first.
inline bool waitLoaded(MainWindow& w, int seconds = 300) {
  QTest::qWait(20);
  for (int i = 0; i < seconds * 10 && (w.controller()->busy() || !w.controller()->hasModel()); ++i)
    QTest::qWait(100);
  QTest::qWait(50);
  return w.controller()->hasModel() && !w.controller()->busy();
}

// Until the controller is idle again (all queued results drawn); false when `seconds` pass first.
inline bool waitIdle(MainWindow& w, int seconds = 300) {
  QTest::qWait(20);
  for (int i = 0; i < seconds * 20 && w.controller()->busy(); ++i) QTest::qWait(50);
  QTest::qWait(50);
  return !w.controller()->busy();
}

}  // namespace shardscope::test
