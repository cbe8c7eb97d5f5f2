// ScriptEditor: the trace script of the current request, editable, with Python-style syntax
// highlighting and the line of the last error marked.
#pragma once

#include <QPlainTextEdit>
#include <QRegularExpression>
#include <QSyntaxHighlighter>

namespace shardscope::ui {

class ScriptHighlighter : public QSyntaxHighlighter {
  Q_OBJECT
 public:
  explicit ScriptHighlighter(QTextDocument* document);

 protected:
  void highlightBlock(const QString& text) override;

 private:
  struct Rule {
    QRegularExpression pattern;
    QTextCharFormat format;
  };
  std::vector<Rule> rules_;
};

class ScriptEditor : public QPlainTextEdit {
  Q_OBJECT
 public:
  explicit ScriptEditor(QWidget* parent = nullptr);
  // Marks `line` (1-based) as the error's line and moves the cursor there; 0 clears the mark.
  void markError(int line, int column);
  int errorLine() const { return errorLine_; }

 private:
  int errorLine_ = 0;
};

}  // namespace shardscope::ui
