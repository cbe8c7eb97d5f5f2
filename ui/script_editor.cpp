#include "script_editor.h"

#include <QFontDatabase>
#include <QTextBlock>

namespace shardscope::ui {

ScriptHighlighter::ScriptHighlighter(QTextDocument* document) : QSyntaxHighlighter(document) {
  const auto rule = [this](const char* pattern, const QColor& colour, bool bold = false) {
    QTextCharFormat f;
    f.setForeground(colour);
    if (bold) f.setFontWeight(QFont::Bold);
    rules_.push_back({QRegularExpression(pattern), f});
  };
  rule(
      R"(\b(with|as|for|in|if|elif|else|while|def|return|lambda|and|or|not|is|None|True|False|import|from|break|continue|pass|del|assert)\b)",
      QColor(0x1565c0), true);
  rule(
      R"(\b(VLLM|LanguageModel|print|range|len|list|dict|tuple|sum|min|max|abs|int|float|str|enumerate|zip|torch)\b)",
      QColor(0x6a1b9a));
  rule(
      R"(\.(save|input|inputs|output|logits|samples|invoke|trace|iter|head|q_head|k_head|v_head)\b)",
      QColor(0xef6c00));
  rule(R"(\b[0-9][0-9_]*(\.[0-9]+)?([eE][-+]?[0-9]+)?\b)", QColor(0x2e7d32));
  rule(R"("([^"\\]|\\.)*"|'([^'\\]|\\.)*')", QColor(0xc62828));
  rule(R"(#[^\n]*)", QColor(0x757575));
}

void ScriptHighlighter::highlightBlock(const QString& text) {
  for (const Rule& r : rules_) {
    auto it = r.pattern.globalMatch(text);
    while (it.hasNext()) {
      const auto m = it.next();
      setFormat(int(m.capturedStart()), int(m.capturedLength()), r.format);
    }
  }
}

ScriptEditor::ScriptEditor(QWidget* parent) : QPlainTextEdit(parent) {
  setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  // Generated scripts have long lines (a VLLM(...) header, f-strings): wrap them at the panel's
  // width, so the whole script reads without scrolling sideways.
  setLineWrapMode(QPlainTextEdit::WidgetWidth);
  setWordWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
  new ScriptHighlighter(document());
}

void ScriptEditor::markError(int line, int column) {
  errorLine_ = line;
  QList<QTextEdit::ExtraSelection> marks;
  if (line > 0) {
    QTextEdit::ExtraSelection mark;
    mark.format.setBackground(QColor(0xff, 0xcd, 0xd2));
    mark.format.setProperty(QTextFormat::FullWidthSelection, true);
    const QTextBlock block = document()->findBlockByNumber(line - 1);
    QTextCursor cursor(block);
    mark.cursor = cursor;
    marks << mark;
    cursor.movePosition(QTextCursor::Right, QTextCursor::MoveAnchor,
                        std::max(0, std::min(column - 1, block.length() - 1)));
    setTextCursor(cursor);
  }
  setExtraSelections(marks);
}

}  // namespace shardscope::ui
