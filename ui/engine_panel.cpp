#include "engine_panel.h"

#include <QLabel>
#include <QLocale>
#include <QProgressBar>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "readout_label.h"

namespace shardscope::ui {

int64_t weightBytesPerRank(const ModelInfo& model) {
  const int64_t element = model.dtype == "float32" ? 4 : 2;
  int64_t bytes = 0;
  for (const ModuleInfo& m : model.modules) {
    for (const ParameterInfo& p : m.parameters) {
      int64_t n = 1;
      for (int64_t s : p.shardShape) n *= s;
      bytes += n * element;
    }
  }
  return bytes;
}

EnginePanel::EnginePanel(QWidget* parent)
    : QWidget(parent),
      model_(new QLabel(this)),
      engine_(new QLabel(this)),
      ranks_(new QTreeWidget(this)),
      job_(new QLabel(this)),
      progress_(new QProgressBar(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(model_);
  layout->addWidget(engine_);
  layout->addWidget(ranks_, 1);
  layout->addWidget(job_);
  layout->addWidget(progress_);
  model_->setWordWrap(true);
  engine_->setWordWrap(true);
  engine_->setObjectName("engineWhere");
  keepLabelFromWidening(job_);
  ranks_->setHeaderLabels({tr("Rank"), tr("Device"), tr("Weights")});
  ranks_->setRootIsDecorated(false);
  setModel(nullptr);
  setJob({}, 0, 0);
}

void EnginePanel::setModel(const ModelInfo* m) {
  ranks_->clear();
  if (!m) {
    model_->setText(tr("No model loaded."));
    return;
  }
  // The thread count matters on the CPU only; a remote engine of an older build sends 0.
  const QString threads = m->device == "cpu" && m->intraOpThreads > 0
                              ? tr(", %n CPU thread(s) per rank", nullptr, m->intraOpThreads)
                              : QString();
  model_->setText(tr("<b>%1</b><br>%2, %3 layers, %4 heads (%5 KV), %6, tp=%7%8, %9 (%10)%11"
                     "<br>KV cache %12 per token per rank")
                      .arg(QString::fromStdString(m->spec).toHtmlEscaped())
                      .arg(QString::fromStdString(m->family))
                      .arg(m->numLayers)
                      .arg(m->numHeads)
                      .arg(m->numKvHeads)
                      .arg(QString::fromStdString(m->dtype))
                      .arg(m->tp)
                      .arg(m->dcp > 1 ? QString(" dcp=%1").arg(m->dcp) : QString())
                      .arg(QString::fromStdString(m->device))
                      .arg(QString::fromStdString(m->backend))
                      .arg(threads)
                      .arg(QLocale().formattedDataSize(qint64(m->kvCacheBytesPerToken + 0.5))));
  const QString bytes = QLocale().formattedDataSize(weightBytesPerRank(*m));
  for (int r = 0; r < m->tp; ++r) {
    QString device = m->device == "cpu"     ? QString("cpu")
                     : m->backend == "nccl" ? QString("cuda:%1").arg(r)
                                            : QString("cuda");
    // Rank processes (an engine server): each on its host, its GPU the host's next one.
    if (size_t(r) < m->rankHosts.size())
      device = QString("%1 on %2").arg(device, QString::fromStdString(m->rankHosts[size_t(r)]));
    new QTreeWidgetItem(ranks_, {QString::number(r), device, bytes});
  }
}

void EnginePanel::setJob(const QString& what, int64_t step, int64_t total) {
  job_->setText(what.isEmpty() ? tr("Idle.") : what);
  progress_->setVisible(!what.isEmpty());
  progress_->setRange(0, int(std::max<int64_t>(total, 1)));
  progress_->setValue(int(std::min(step, std::max<int64_t>(total, 1))));
}

void EnginePanel::setEngine(const QString& where, bool lost) {
  engine_->setStyleSheet(lost ? "color: #c62828" : "");
  engine_->setText(
      lost ? tr("Engine lost: %1. File > Reconnect to engine once it runs again.").arg(where)
           : where);
}

QString EnginePanel::engineText() const {
  return engine_->text();
}

QString EnginePanel::modelText() const {
  return model_->text();
}

QString EnginePanel::jobText() const {
  return job_->text();
}

int EnginePanel::rankRows() const {
  return ranks_->topLevelItemCount();
}

}  // namespace shardscope::ui
