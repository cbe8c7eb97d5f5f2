// RunView's JSON, as the session log keeps it: each view round-trips; none is ''; a kind a newer
// ShardScope wrote reads as none; a view that is not a JSON object with a kind is a StoreError.
#include <QtTest>
#include <vector>

#include "core/store/run_view.h"
#include "core/store/store_error.h"

using namespace shardscope::store;

class TestRunView : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void roundTrips() {
    const std::vector<RunView> views = {
        RunView::of(RunView::Kind::Generate),     RunView::of(RunView::Kind::TopK),
        RunView::of(RunView::Kind::HeadAblation), RunView::of(RunView::Kind::LogitLens),
        RunView::of(RunView::Kind::Routing),      RunView::read("model.model.norm.output", 0),
        RunView::read("model.lm_head.output", 7), RunView::sweepLayer(0, 0),
        RunView::expertAblation(3, 127),          RunView::attentionPattern(35, 31),
    };
    for (const RunView& v : views) {
      const std::string json = runViewJson(v);
      QVERIFY(!json.empty());
      QVERIFY2(parseRunView(json) == v, json.c_str());
    }
    QCOMPARE(QString::fromStdString(runViewJson(RunView::sweepLayer(2, 151643))),
             QString(R"({"kind":"sweep-layer","layer":2,"target":151643})"));
    QCOMPARE(QString::fromStdString(runViewJson(RunView::read("m.output", 3))),
             QString(R"({"kind":"read","port":"m.output","step":3})"));
  }

  void noneIsEmpty() {
    QVERIFY(runViewJson(RunView{}).empty());
    QVERIFY(parseRunView("") == RunView{});
  }

  void aNewerKindReadsAsNone() {
    QVERIFY(parseRunView(R"({"kind":"a-view-of-tomorrow","layer":1})") == RunView{});
  }

  void damagedViewsAreRefused() {
    for (const char* bad : {"sweep layer 2", R"({"layer":2})", "[1]", R"({"kind":3})",
                            R"({"kind":"read","step":-5})", R"({"kind":"sweep-layer","layer":-2})"})
      QVERIFY_THROWS_EXCEPTION(StoreError, parseRunView(bad));
  }
};

QTEST_GUILESS_MAIN(TestRunView)
#include "tst_run_view.moc"
