// A data function's `tp` column, a row a tensor-parallel size ("tp=1", "tp=2"): the suites that
// check a run at tp=1 and the same run split over ranks.
#pragma once

#include <QTest>

#include <initializer_list>

namespace shardscope::test {

inline void addTpRows(std::initializer_list<int> sizes = {1, 2}) {
  QTest::addColumn<int>("tp");
  for (int tp : sizes) QTest::addRow("tp=%d", tp) << tp;
}

}  // namespace shardscope::test
