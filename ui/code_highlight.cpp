#include "ui/code_highlight.h"

#include <QSet>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>

namespace moe {
namespace {

struct Language {
  QSet<QString> keywords;
  QString line_comment;  // "" when none
  bool block_comments;   // /* ... */
  QString quotes;        // characters that open and close a string
};

QSet<QString> words(const char* list) {
  QSet<QString> out;
  for (const QString& w : QString::fromLatin1(list).split(' ', Qt::SkipEmptyParts)) out.insert(w);
  return out;
}

const Language& languageFor(const QString& kind) {
  static const Language cpp{
      words(
          "alignas auto bool break case catch char class const constexpr continue default delete do double "
          "else enum explicit extern false float for friend goto if include define inline int long namespace "
          "new noexcept nullptr operator private protected public return short signed sizeof static struct "
          "switch template this throw true try typedef typename union unsigned using virtual void volatile "
          "while"),
      "//", true, "\"'"};
  static const Language python{
      words("and as assert async await break class continue def del elif else except False finally for from "
            "global if import in is lambda None nonlocal not or pass raise return self True try while with "
            "yield"),
      "#", false, "\"'"};
  static const Language js{
      words("async await break case catch class const continue default delete do else export extends false "
            "finally for function if import in instanceof interface let new null return super switch this "
            "throw "
            "true try type typeof undefined var void while yield"),
      "//", true, "\"'`"};
  static const Language rust{
      words(
          "as async await break const continue crate else enum extern false fn for if impl in let loop match "
          "mod move mut pub ref return self Self static struct super trait true type unsafe use where while"),
      "//", true, "\""};
  static const Language go{
      words("break case chan const continue default defer else fallthrough false for func go goto if import "
            "interface map nil package range return select struct switch true type var"),
      "//", true, "\"'`"};
  static const Language java{
      words(
          "abstract boolean break byte case catch char class continue default do double else enum extends "
          "false final finally float for if implements import instanceof int interface long new null package "
          "private protected public return short static super switch this throw throws true try void while"),
      "//", true, "\"'"};
  static const Language sh{words("case do done echo elif else esac export fi for function if in local return "
                                 "then while"),
                           "#", false, "\"'"};
  static const Language json{words("true false null"), "", false, "\""};
  static const Language other{{}, "", false, "\"'"};
  if (kind == "cpp") return cpp;
  if (kind == "python") return python;
  if (kind == "js") return js;
  if (kind == "rust") return rust;
  if (kind == "go") return go;
  if (kind == "java") return java;
  if (kind == "sh") return sh;
  if (kind == "json") return json;
  return other;
}

bool identifierStart(QChar c) { return c.isLetter() || c == '_'; }
bool identifierChar(QChar c) { return c.isLetterOrNumber() || c == '_'; }

class BlockPainter {
 public:
  BlockPainter(const QTextBlock& block, const CodeColors& colors) : block_(block), colors_(colors) {}
  // Colours text[from, to) of the block.
  void paint(int from, int to, const QColor& color) {
    if (to <= from) return;
    QTextCursor cursor(block_);
    cursor.setPosition(block_.position() + from);
    cursor.setPosition(block_.position() + to, QTextCursor::KeepAnchor);
    QTextCharFormat format;
    format.setForeground(color);
    cursor.mergeCharFormat(format);
  }
  const CodeColors& colors() const { return colors_; }

 private:
  QTextBlock block_;
  const CodeColors& colors_;
};

// Colours the line text[begin, n) of block; `in_comment` carries a /* comment from
// line to line.
void highlightLine(BlockPainter& paint, const QString& text, int begin, int n, const Language& lang,
                   bool& in_comment) {
  const CodeColors& colors = paint.colors();
  int i = begin;
  while (i < n) {
    if (in_comment) {
      const int end = static_cast<int>(text.indexOf(QStringLiteral("*/"), i));
      const int stop = end < 0 ? n : end + 2;
      paint.paint(i, stop, colors.comment);
      in_comment = end < 0;
      i = stop;
      continue;
    }
    const QChar c = text[i];
    if (!lang.line_comment.isEmpty() && text.mid(i, lang.line_comment.size()) == lang.line_comment) {
      paint.paint(i, n, colors.comment);
      return;
    }
    if (lang.block_comments && text.mid(i, 2) == QStringLiteral("/*")) {
      in_comment = true;
      paint.paint(i, i + 2, colors.comment);
      i += 2;
      continue;
    }
    if (lang.quotes.contains(c)) {
      int j = i + 1;
      while (j < n && text[j] != c) j += text[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, n);
      paint.paint(i, j, colors.string);
      i = j;
      continue;
    }
    if (c.isDigit()) {
      int j = i + 1;
      while (j < n && (text[j].isLetterOrNumber() || text[j] == '.' || text[j] == '_')) ++j;
      paint.paint(i, j, colors.number);
      i = j;
      continue;
    }
    if (identifierStart(c)) {
      int j = i + 1;
      while (j < n && identifierChar(text[j])) ++j;
      if (lang.keywords.contains(text.mid(i, j - i))) paint.paint(i, j, colors.keyword);
      i = j;
      continue;
    }
    ++i;
  }
}

}  // namespace

CodeColors CodeColors::forBackground(const QColor& background) {
  if (background.lightnessF() < 0.5)  // dark theme: light, saturated colours
    return {QColor(0x56, 0x9c, 0xd6), QColor(0xce, 0x91, 0x78), QColor(0x8a, 0xb8, 0x7a),
            QColor(0xb5, 0xce, 0xa8)};
  return {QColor(0x00, 0x33, 0xb3), QColor(0xa3, 0x15, 0x15), QColor(0x3a, 0x7a, 0x2a),
          QColor(0x09, 0x73, 0x6e)};
}

QString codeLanguage(const QString& tag) {
  const QString t = tag.trimmed().toLower();
  if (t == "c" || t == "cpp" || t == "c++" || t == "cc" || t == "cxx" || t == "h" || t == "hpp" ||
      t == "cuda" || t == "cu")
    return "cpp";
  if (t == "python" || t == "py" || t == "python3") return "python";
  if (t == "js" || t == "javascript" || t == "ts" || t == "typescript" || t == "jsx" || t == "tsx")
    return "js";
  if (t == "rust" || t == "rs") return "rust";
  if (t == "go" || t == "golang") return "go";
  if (t == "java" || t == "kotlin" || t == "kt") return "java";
  if (t == "sh" || t == "bash" || t == "shell" || t == "zsh" || t == "console") return "sh";
  if (t == "json" || t == "jsonc") return "json";
  return {};
}

void highlightCodeBlocks(QTextDocument& doc, const CodeColors& colors) {
  bool in_comment = false;
  QTextBlock previous;
  for (QTextBlock block = doc.begin(); block.isValid(); block = block.next()) {
    const QTextBlockFormat format = block.blockFormat();
    if (!format.hasProperty(QTextFormat::BlockCodeFence)) {
      in_comment = false;
      previous = {};
      continue;
    }
    const QString lang = codeLanguage(format.stringProperty(QTextFormat::BlockCodeLanguage));
    if (!previous.isValid() || previous.blockFormat().stringProperty(QTextFormat::BlockCodeLanguage) !=
                                   format.stringProperty(QTextFormat::BlockCodeLanguage))
      in_comment = false;
    // The Markdown reader may keep a block's lines in one text block, split by
    // line separators: each is lexed as a line of its own.
    const QString text = block.text();
    BlockPainter paint(block, colors);
    int begin = 0;
    while (begin <= text.size()) {
      int end = static_cast<int>(text.indexOf(QChar::LineSeparator, begin));
      if (end < 0) end = static_cast<int>(text.size());
      highlightLine(paint, text, begin, end, languageFor(lang), in_comment);
      begin = end + 1;
    }
    previous = block;
  }
}

}  // namespace moe
