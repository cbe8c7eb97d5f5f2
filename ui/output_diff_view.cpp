#include "output_diff_view.h"

#include <QGridLayout>
#include <QLabel>
#include <QTextBrowser>

#include "core/model/tokenizer.h"

namespace shardscope::ui {

OutputDiffView::OutputDiffView(QWidget* parent)
    : QWidget(parent),
      baselineTitle_(new QLabel(tr("Baseline"), this)),
      ablatedTitle_(new QLabel(tr("Intervened"), this)),
      baseline_(new QTextBrowser(this)),
      ablated_(new QTextBrowser(this)),
      summary_(new QLabel(this)) {
  auto* layout = new QGridLayout(this);
  layout->addWidget(baselineTitle_, 0, 0);
  layout->addWidget(ablatedTitle_, 0, 1);
  layout->addWidget(baseline_, 1, 0);
  layout->addWidget(ablated_, 1, 1);
  layout->addWidget(summary_, 2, 0, 1, 2);
  summary_->setWordWrap(true);
}

namespace {

QString tokenHtml(const std::shared_ptr<const Tokenizer>& tok, int64_t id, bool changed) {
  const QString text =
      tok ? QString::fromStdString(tok->tokenPiece(id)) : QString::number(id) + " ";
  const QString escaped = text.toHtmlEscaped().replace("\n", "&#8629;<br>");
  return changed ? "<span style='background:#ffcc80'>" + escaped + "</span>" : escaped;
}

}  // namespace

void OutputDiffView::setComparison(const std::vector<int64_t>& baseline,
                                   const std::vector<int64_t>& ablated,
                                   const std::shared_ptr<const Tokenizer>& tokenizer,
                                   const QString& target, double baselineProbability,
                                   double ablatedProbability) {
  QString a, b;
  baselineTitle_->setText(tr("Baseline"));
  ablatedTitle_->setText(tr("Intervened"));
  changed_ = diffHtml(baseline, ablated, tokenizer, &a, &b);
  const size_t n = std::max(baseline.size(), ablated.size());
  baseline_->setHtml(a);
  ablated_->setHtml(b);
  baselineText_ = tokenizer ? QString::fromStdString(tokenizer->displayText(baseline, true)) : a;
  ablatedText_ = tokenizer ? QString::fromStdString(tokenizer->displayText(ablated, true)) : b;
  summary_->setText(tr("%1 of %2 generated tokens changed. P(%3) at the first step: %4 -> %5 "
                       "(%6%7)")
                        .arg(changed_)
                        .arg(n)
                        .arg(target)
                        .arg(baselineProbability, 0, 'f', 4)
                        .arg(ablatedProbability, 0, 'f', 4)
                        .arg(ablatedProbability >= baselineProbability ? "+" : "")
                        .arg(ablatedProbability - baselineProbability, 0, 'f', 4));
}

int OutputDiffView::diffHtml(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                             const std::shared_ptr<const Tokenizer>& tokenizer, QString* htmlA,
                             QString* htmlB) {
  int changed = 0;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const bool differs = i >= a.size() || i >= b.size() || a[i] != b[i];
    changed += differs;
    if (i < a.size()) *htmlA += tokenHtml(tokenizer, a[i], differs);
    if (i < b.size()) *htmlB += tokenHtml(tokenizer, b[i], differs);
  }
  return changed;
}

void OutputDiffView::setRunComparison(
    const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>& pairs,
    const std::shared_ptr<const Tokenizer>& tokenizer, const QString& before,
    const QString& after) {
  QString a, b;
  QStringList textsA, textsB;
  changed_ = 0;
  size_t total = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    QString ha, hb;
    changed_ += diffHtml(pairs[i].first, pairs[i].second, tokenizer, &ha, &hb);
    total += std::max(pairs[i].first.size(), pairs[i].second.size());
    a += QString("<p><b>invoke %1</b>: %2</p>").arg(i).arg(ha);
    b += QString("<p><b>invoke %1</b>: %2</p>").arg(i).arg(hb);
    if (tokenizer) {
      textsA << QString::fromStdString(tokenizer->displayText(pairs[i].first, true));
      textsB << QString::fromStdString(tokenizer->displayText(pairs[i].second, true));
    }
  }
  baselineTitle_->setText(before);
  ablatedTitle_->setText(after);
  baseline_->setHtml(a);
  ablated_->setHtml(b);
  baselineText_ = tokenizer ? textsA.join("\n") : a;
  ablatedText_ = tokenizer ? textsB.join("\n") : b;
  summary_->setText(pairs.empty() ? tr("Neither run generated text.")
                                  : tr("%1 of %2 generated tokens changed (%3 invoke(s)).")
                                        .arg(changed_)
                                        .arg(total)
                                        .arg(pairs.size()));
}

void OutputDiffView::setOutputs(const QStringList& texts) {
  QString html;
  for (int i = 0; i < texts.size(); ++i)
    html += QString("<p><b>invoke %1</b>: %2</p>").arg(i).arg(texts[i].toHtmlEscaped());
  baseline_->setHtml(html);
  ablated_->clear();
  baselineText_ = texts.join("\n");
  ablatedText_.clear();
  changed_ = 0;
  summary_->setText(tr("%1 generation(s).").arg(texts.size()));
}

QString OutputDiffView::summary() const {
  return summary_->text();
}

}  // namespace shardscope::ui
