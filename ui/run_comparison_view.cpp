#include "run_comparison_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include "heatmap_view.h"
#include "output_diff_view.h"
#include "result_math.h"

namespace shardscope::ui {
namespace {

QTableWidgetItem* cell(const QString& text) {
  auto* item = new QTableWidgetItem(text);
  item->setFlags(item->flags() & ~Qt::ItemIsEditable);
  return item;
}

QString number(double x) {
  return QString::number(x, 'g', 4);
}

}  // namespace

RunComparisonView::RunComparisonView(QWidget* parent)
    : QWidget(parent),
      summary_(new QLabel(tr("Select two runs in the session log and press Compare."), this)),
      table_(new QTableWidget(0, ColumnCount, this)),
      heatmap_(new HeatmapView(this)),
      generations_(new OutputDiffView(this)) {
  summary_->setWordWrap(true);
  table_->setHorizontalHeaderLabels(
      {tr("Trace"), tr("Value"), tr("Max abs"), tr("Relative"), tr("Detail")});
  table_->horizontalHeader()->setSectionResizeMode(DetailColumn, QHeaderView::Stretch);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->verticalHeader()->hide();
  auto* split = new QSplitter(Qt::Vertical, this);
  auto* top = new QSplitter(Qt::Horizontal, split);
  top->addWidget(table_);
  top->addWidget(heatmap_);
  split->addWidget(top);
  split->addWidget(generations_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(summary_);
  layout->addWidget(split, 1);
  connect(table_, &QTableWidget::currentCellChanged, this,
          [this](int row, int, int, int) { selectValue(row); });
}

void RunComparisonView::setComparison(store::RunRecord a, store::RunRecord b,
                                      store::ReplayReport report,
                                      const std::shared_ptr<const Tokenizer>& tokenizer) {
  a_ = std::move(a);
  b_ = std::move(b);
  report_ = std::move(report);
  int differing = 0;
  table_->setRowCount(int(report_.values.size()));
  for (int row = 0; row < int(report_.values.size()); ++row) {
    const store::ValueComparison& v = report_.values[size_t(row)];
    const bool numeric = !v.missing && v.diff.comparable && !v.diff.identical;
    differing += !v.diff.identical;
    table_->setItem(row, TraceColumn, cell(QString::number(v.trace)));
    table_->setItem(row, NameColumn, cell(QString::fromStdString(v.name)));
    table_->setItem(row, MaxAbsColumn, cell(numeric ? number(v.diff.maxAbs) : "-"));
    table_->setItem(row, RelativeColumn, cell(numeric ? number(v.diff.relative) : "-"));
    table_->setItem(row, DetailColumn, cell(QString::fromStdString(v.diff.detail)));
  }
  table_->resizeColumnsToContents();
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> texts;
  int changedTexts = 0;
  for (const store::TextComparison& t : report_.texts) {
    texts.emplace_back(t.beforeIds, t.afterIds);
    changedTexts += !t.same;
  }
  generations_->setRunComparison(texts, tokenizer, tr("Run %1").arg(a_.summary.id),
                                 tr("Run %1").arg(b_.summary.id));
  QString text = tr("Run %1 (%2) against run %3 (%4): %5 of %6 values differ, %7 of %8 "
                    "generations changed.")
                     .arg(b_.summary.id)
                     .arg(QString::fromStdString(b_.summary.title))
                     .arg(a_.summary.id)
                     .arg(QString::fromStdString(a_.summary.title))
                     .arg(differing)
                     .arg(report_.values.size())
                     .arg(changedTexts)
                     .arg(report_.texts.size());
  for (const auto& n : report_.notes) text += "\n" + tr("Note: %1").arg(QString::fromStdString(n));
  summary_->setText(text);
  heatmap_->clear();
  if (!report_.values.empty()) table_->setCurrentCell(0, NameColumn);
}

const trace::SavedValue* RunComparisonView::valueOf(const store::RunRecord& r, int trace,
                                                    const std::string& name) const {
  if (trace < 0 || size_t(trace) >= r.result.traces.size()) return nullptr;
  for (const auto& v : r.result.traces[size_t(trace)].values) {
    if (v.name == name && v.hasData()) return &v;
  }
  return nullptr;
}

void RunComparisonView::selectValue(int row) {
  if (row < 0 || size_t(row) >= report_.values.size()) return;
  const store::ValueComparison& v = report_.values[size_t(row)];
  const trace::SavedValue* before = valueOf(a_, v.trace, v.name);
  const trace::SavedValue* after = valueOf(b_, v.trace, v.name);
  const QString title = tr("%1 (trace %2): run %3 - run %4")
                            .arg(QString::fromStdString(v.name))
                            .arg(v.trace)
                            .arg(b_.summary.id)
                            .arg(a_.summary.id);
  if (!before || !after || !before->isTensor() || !v.diff.comparable) {
    heatmap_->setMatrix(title + " - " + QString::fromStdString(v.diff.detail), Matrix{}, {}, {});
    return;
  }
  const Matrix d = difference(asMatrix(before->tensor), asMatrix(after->tensor));
  QStringList rows;
  for (int64_t r = 0; r < d.rows; ++r) rows << QString::number(r);
  heatmap_->setMatrix(title, d, rows, tr("column"));
}

QString RunComparisonView::summary() const {
  return summary_->text();
}

}  // namespace shardscope::ui
