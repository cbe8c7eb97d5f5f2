// How decoder layers split into pipeline stages: vLLM's get_pp_indices (vllm/distributed/utils.py)
// without VLLM_PP_LAYER_PARTITION, whose rows below are the splits it gives.
#include <QtTest>

#include "core/error.h"
#include "core/parallel/pipeline_stages.h"

using namespace shardscope;

class TestPipelineStages : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void splitsAsVllm_data() {
    QTest::addColumn<int>("layers");
    QTest::addColumn<int>("stages");
    QTest::addColumn<QList<int>>("sizes");
    QTest::newRow("even") << 20 << 4 << QList<int>{5, 5, 5, 5};
    QTest::newRow("one extra: second to last") << 11 << 2 << QList<int>{6, 5};
    QTest::newRow("two extra: before the last") << 10 << 4 << QList<int>{2, 3, 3, 2};
    QTest::newRow("three extra") << 23 << 4 << QList<int>{6, 6, 6, 5};
    QTest::newRow("20 in 3") << 20 << 3 << QList<int>{7, 7, 6};
    QTest::newRow("one a stage") << 4 << 4 << QList<int>{1, 1, 1, 1};
    QTest::newRow("one stage") << 7 << 1 << QList<int>{7};
  }
  void splitsAsVllm() {
    QFETCH(int, layers);
    QFETCH(int, stages);
    QFETCH(QList<int>, sizes);
    const PipelineStages p(layers, stages);
    QCOMPARE(p.count(), stages);
    int64_t next = 0;
    for (int s = 0; s < stages; ++s) {
      QCOMPARE(p.begin(s), next);
      QCOMPARE(p.end(s) - p.begin(s), int64_t(sizes[s]));
      for (int64_t l = p.begin(s); l < p.end(s); ++l) QCOMPARE(p.stageOfLayer(l), s);
      next = p.end(s);
    }
    QCOMPARE(next, int64_t(layers));
  }

  void refusesMoreStagesThanLayers() {
    try {
      PipelineStages(2, 4);
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(QString(e.what()).contains("at most 2"), e.what());
    }
    QVERIFY_THROWS_EXCEPTION(Error, PipelineStages(4, 0));
  }
};

QTEST_GUILESS_MAIN(TestPipelineStages)
#include "tst_pipeline_stages.moc"
