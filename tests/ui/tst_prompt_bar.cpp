// The prompt bar alone (offscreen): the settings it hands to a run (one prompt a line, the default
// prompt when none), its setters, Run and Stop while busy, and a signal for each button.
#include <QCheckBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QtTest>

#include "ui/prompt_bar.h"

using namespace shardscope::ui;

namespace {

QPushButton* button(PromptBar& bar, const QString& text) {
  for (auto* b : bar.findChildren<QPushButton*>()) {
    if (b->text() == text) return b;
  }
  return nullptr;
}

}  // namespace

class TestPromptBar : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void settingsAndSetters() {
    PromptBar bar;
    GenerationSettings g = bar.settings();
    QCOMPARE(g.prompts, std::vector<std::string>({"The capital of France is"}));
    QCOMPARE(g.maxTokens, int64_t(8));
    bar.setPrompts({"one", "", "two"});
    bar.setMaxTokens(3);
    g = bar.settings();
    QCOMPARE(g.prompts, std::vector<std::string>({"one", "two"}));  // empty lines are no invoke
    QCOMPARE(g.maxTokens, int64_t(3));
    bar.setPrompts({});
    QCOMPARE(bar.settings().prompts, std::vector<std::string>({"The capital of France is"}));
    bar.setTarget("#42");
    QCOMPARE(bar.target(), QString("#42"));
    bar.setHeadCount(4);
    QCOMPARE(bar.attentionHead(), 0);
    QCOMPARE(bar.sweepLayers(), QString());
    QVERIFY(!bar.perHeadNorms()->isChecked());
  }

  void buttonsAskBySignal() {
    PromptBar bar;
    QPushButton* run = button(bar, "Run");
    QPushButton* stop = button(bar, "Stop");
    QVERIFY(run && stop);
    QVERIFY(run->isEnabled() && !stop->isEnabled());
    bar.setBusy(true);
    QVERIFY(!run->isEnabled() && stop->isEnabled());
    bar.setBusy(false);
    const std::vector<std::pair<QString, void (PromptBar::*)()>> buttons = {
        {"Run", &PromptBar::generateClicked},         {"Read", &PromptBar::readClicked},
        {"Zero heads", &PromptBar::zeroHeadsClicked}, {"Sweep", &PromptBar::sweepClicked},
        {"Logit lens", &PromptBar::logitLensClicked}, {"Top-k", &PromptBar::topKClicked},
        {"Attention", &PromptBar::attentionClicked}};
    for (const auto& [text, signal] : buttons) {
      QSignalSpy spy(&bar, signal);
      QPushButton* b = button(bar, text);
      QVERIFY2(b, qPrintable(text));
      b->click();
      QCOMPARE(spy.count(), 1);
    }
    bar.setBusy(true);
    QSignalSpy stopped(&bar, &PromptBar::stopClicked);
    stop->click();
    QCOMPARE(stopped.count(), 1);
  }
};

QTEST_MAIN(TestPromptBar)
#include "tst_prompt_bar.moc"
