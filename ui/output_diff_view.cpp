#include "output_diff_view.h"

#include <QGridLayout>
#include <QLabel>
#include <QTextBrowser>

#include "core/model/tokenizer.h"

namespace shardscope::ui {

OutputDiffView::OutputDiffView(QWidget* parent)
    : QWidget(parent),
      baseline_(new QTextBrowser(this)),
      ablated_(new QTextBrowser(this)),
      summary_(new QLabel(this)) {
  auto* layout = new QGridLayout(this);
  layout->addWidget(new QLabel(tr("Baseline"), this), 0, 0);
  layout->addWidget(new QLabel(tr("Intervened"), this), 0, 1);
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
  changed_ = 0;
  const size_t n = std::max(baseline.size(), ablated.size());
  for (size_t i = 0; i < n; ++i) {
    const bool differs = i >= baseline.size() || i >= ablated.size() || baseline[i] != ablated[i];
    changed_ += differs;
    if (i < baseline.size()) a += tokenHtml(tokenizer, baseline[i], differs);
    if (i < ablated.size()) b += tokenHtml(tokenizer, ablated[i], differs);
  }
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
