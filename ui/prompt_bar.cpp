#include "prompt_bar.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>

namespace shardscope::ui {

PromptBar::PromptBar(QWidget* parent) : QWidget(parent) {
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(0, 0, 0, 0);
  prompts_ = new QPlainTextEdit(this);
  prompts_->setPlaceholderText(tr("One prompt a line (each is an invoke)"));
  prompts_->setPlainText("The capital of France is");
  prompts_->setMaximumHeight(60);
  maxTokens_ = new QSpinBox(this);
  maxTokens_->setRange(1, 4096);
  maxTokens_->setValue(8);
  temperature_ = new QDoubleSpinBox(this);
  temperature_->setRange(0, 5);
  temperature_->setSingleStep(0.1);
  seed_ = new QSpinBox(this);
  seed_->setRange(0, 1'000'000);
  step_ = new QSpinBox(this);
  step_->setRange(0, 4095);
  target_ = new QLineEdit(this);
  target_->setPlaceholderText(tr("greedy token"));
  target_->setToolTip(
      tr("Target token: text (its first token) or #id; empty: the model's own "
         "top token"));
  sweepLayers_ = new QLineEdit(this);
  sweepLayers_->setPlaceholderText(tr("all layers"));
  sweepLayers_->setToolTip(tr("Layers to sweep, e.g. 0-3 or 1,5"));
  attentionHead_ = new QSpinBox(this);
  attentionHead_->setRange(0, 1023);
  perHeadNorms_ = new QCheckBox(tr("Per-head norms"), this);
  perHeadNorms_->setToolTip(tr("Show head-sharded ports as tokens x heads of L2 norms"));
  runButton_ = new QPushButton(tr("Run"), this);
  runButton_->setToolTip(tr("Generate from every prompt (Ctrl+G)"));
  stopButton_ = new QPushButton(tr("Stop"), this);
  stopButton_->setEnabled(false);
  auto* read = new QPushButton(tr("Read"), this);
  auto* ablate = new QPushButton(tr("Zero heads"), this);
  auto* sweep = new QPushButton(tr("Sweep"), this);
  auto* lens = new QPushButton(tr("Logit lens"), this);
  auto* topk = new QPushButton(tr("Top-k"), this);
  auto* attn = new QPushButton(tr("Attention"), this);
  // The prompts above, then the knobs and the buttons in rows of their own: beside the docks of
  // a laptop-sized window the bar is about 700 px wide, and squeezed below its rows' widths Qt
  // would clip every label and button.
  grid->addWidget(prompts_, 0, 0);
  auto* sampling = new QHBoxLayout;
  auto* targets = new QHBoxLayout;
  const auto labelled = [&](QHBoxLayout* row, const QString& label, QWidget* w) {
    row->addWidget(new QLabel(label, this));
    row->addWidget(w);
  };
  labelled(sampling, tr("Max tokens"), maxTokens_);
  labelled(sampling, tr("Temperature"), temperature_);
  labelled(sampling, tr("Seed"), seed_);
  labelled(sampling, tr("Step"), step_);
  sampling->addStretch(1);
  sampling->addWidget(runButton_);
  sampling->addWidget(stopButton_);
  labelled(targets, tr("Target"), target_);
  labelled(targets, tr("Sweep layers"), sweepLayers_);
  labelled(targets, tr("Head"), attentionHead_);
  targets->addWidget(perHeadNorms_);
  targets->addStretch(1);
  grid->addLayout(sampling, 1, 0);
  grid->addLayout(targets, 2, 0);
  auto* buttons = new QHBoxLayout;
  for (QPushButton* b : {read, ablate, sweep, lens, topk, attn}) buttons->addWidget(b);
  buttons->addStretch(1);
  grid->addLayout(buttons, 3, 0);
  connect(runButton_, &QPushButton::clicked, this, &PromptBar::generateClicked);
  connect(stopButton_, &QPushButton::clicked, this, &PromptBar::stopClicked);
  connect(read, &QPushButton::clicked, this, &PromptBar::readClicked);
  connect(ablate, &QPushButton::clicked, this, &PromptBar::zeroHeadsClicked);
  connect(sweep, &QPushButton::clicked, this, &PromptBar::sweepClicked);
  connect(lens, &QPushButton::clicked, this, &PromptBar::logitLensClicked);
  connect(topk, &QPushButton::clicked, this, &PromptBar::topKClicked);
  connect(attn, &QPushButton::clicked, this, &PromptBar::attentionClicked);
}

GenerationSettings PromptBar::settings() const {
  GenerationSettings g;
  for (const QString& line : prompts_->toPlainText().split('\n', Qt::SkipEmptyParts))
    g.prompts.push_back(line.toStdString());
  if (g.prompts.empty()) g.prompts.push_back("The capital of France is");
  g.maxTokens = maxTokens_->value();
  g.temperature = temperature_->value();
  g.seed = uint64_t(seed_->value());
  return g;
}

int64_t PromptBar::step() const {
  return step_->value();
}

QString PromptBar::target() const {
  return target_->text();
}

QString PromptBar::sweepLayers() const {
  return sweepLayers_->text();
}

int PromptBar::attentionHead() const {
  return attentionHead_->value();
}

void PromptBar::setPrompts(const QStringList& prompts) {
  prompts_->setPlainText(prompts.join('\n'));
}

void PromptBar::setMaxTokens(int n) {
  maxTokens_->setValue(n);
}

void PromptBar::setTarget(const QString& target) {
  target_->setText(target);
}

void PromptBar::setHeadCount(int64_t heads) {
  attentionHead_->setMaximum(int(heads - 1));
}

void PromptBar::setBusy(bool busy) {
  stopButton_->setEnabled(busy);
  runButton_->setEnabled(!busy);
}

}  // namespace shardscope::ui
