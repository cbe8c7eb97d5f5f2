// OutputDiffView: baseline and intervened generations side by side, tokens that differ
// highlighted, and the change in the chosen target token's probability at the first step.
#pragma once

#include <QWidget>
#include <memory>
#include <vector>

class QTextBrowser;
class QLabel;

namespace shardscope {
class Tokenizer;
}

namespace shardscope::ui {

class OutputDiffView : public QWidget {
  Q_OBJECT
 public:
  explicit OutputDiffView(QWidget* parent = nullptr);

  void setComparison(const std::vector<int64_t>& baseline, const std::vector<int64_t>& ablated,
                     const std::shared_ptr<const Tokenizer>& tokenizer, const QString& target,
                     double baselineProbability, double ablatedProbability);
  // Generations of plain runs (no comparison): one line per invoke.
  void setOutputs(const QStringList& texts);
  // Two runs' generations, invoke by invoke (`pairs[i]` = run A's and run B's ids), changed
  // tokens highlighted; the columns are titled `before` and `after`.
  void setRunComparison(
      const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>& pairs,
      const std::shared_ptr<const Tokenizer>& tokenizer, const QString& before,
      const QString& after);

  QString baselineText() const { return baselineText_; }
  QString ablatedText() const { return ablatedText_; }
  int changedTokens() const { return changed_; }
  QString summary() const;

 private:
  // The two token sequences as HTML, differing positions highlighted; returns how many differ.
  static int diffHtml(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                      const std::shared_ptr<const Tokenizer>& tokenizer, QString* htmlA,
                      QString* htmlB);

  QLabel* baselineTitle_;
  QLabel* ablatedTitle_;
  QTextBrowser* baseline_;
  QTextBrowser* ablated_;
  QLabel* summary_;
  QString baselineText_, ablatedText_;
  int changed_ = 0;
};

}  // namespace shardscope::ui
