// TopKView: the k most probable next tokens as bars.
#pragma once

#include <QWidget>
#include <utility>
#include <vector>

class QCustomPlot;

namespace shardscope::ui {

class TopKView : public QWidget {
  Q_OBJECT
 public:
  explicit TopKView(QWidget* parent = nullptr);
  void setTokens(const std::vector<std::pair<QString, double>>& tokens, const QString& title);
  const std::vector<std::pair<QString, double>>& tokens() const { return tokens_; }
  QCustomPlot* plot() const { return plot_; }

 private:
  QCustomPlot* plot_;
  std::vector<std::pair<QString, double>> tokens_;
};

}  // namespace shardscope::ui
