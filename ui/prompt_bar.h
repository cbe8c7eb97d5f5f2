// PromptBar: the bar above the result views. The prompts (one invoke a line), the knobs of a run
// (max tokens, temperature, seed, step, target token, sweep layers, attention head, per-head
// norms) and a button for each kind of run. It holds input only: its buttons ask, by signal, and
// the window runs.
#pragma once

#include <QWidget>

#include "script_builder.h"

class QCheckBox;
class QDoubleSpinBox;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace shardscope::ui {

class PromptBar : public QWidget {
  Q_OBJECT
 public:
  explicit PromptBar(QWidget* parent = nullptr);

  // The prompts and sampling knobs (no prompt: the default one).
  GenerationSettings settings() const;
  int64_t step() const;
  QString target() const;  // text (its first token), "#id", or empty: the greedy token
  QString sweepLayers() const;
  int attentionHead() const;
  QCheckBox* perHeadNorms() const { return perHeadNorms_; }

  void setPrompts(const QStringList& prompts);
  void setMaxTokens(int n);
  void setTarget(const QString& target);
  void setHeadCount(int64_t heads);
  // While the engine is busy only Stop is offered in place of Run.
  void setBusy(bool busy);

 Q_SIGNALS:
  void generateClicked();
  void stopClicked();
  void readClicked();
  void zeroHeadsClicked();
  void sweepClicked();
  void logitLensClicked();
  void topKClicked();
  void attentionClicked();

 private:
  QPlainTextEdit* prompts_;
  QSpinBox* maxTokens_;
  QDoubleSpinBox* temperature_;
  QSpinBox* seed_;
  QSpinBox* step_;
  QLineEdit* target_;
  QLineEdit* sweepLayers_;
  QSpinBox* attentionHead_;
  QCheckBox* perHeadNorms_;
  QPushButton* runButton_;
  QPushButton* stopButton_;
};

}  // namespace shardscope::ui
