// Syntax colours for the fenced code blocks of a rendered message: keywords,
// strings, comments and numbers, by a small per-language lexer (C and C++, Python,
// JavaScript and TypeScript, Rust, Go, Java, shell, JSON; other languages get
// strings, comments and numbers only). Colours follow the theme: a set for light
// backgrounds and one for dark ones.
#pragma once

#include <QColor>
#include <QString>

class QTextDocument;

namespace moe {

struct CodeColors {
  QColor keyword, string, comment, number;
  static CodeColors forBackground(const QColor& background);
};

// The kind of text a code block's language tag asks for: "cpp", "c", "python",
// "js", "rust", "go", "java", "sh", "json", or "" for a tag not known.
QString codeLanguage(const QString& tag);

// Colours every code block of doc (a document read with setMarkdown, whose code
// blocks carry QTextFormat::BlockCodeFence and their language tag) in place. The
// text is not changed.
void highlightCodeBlocks(QTextDocument& doc, const CodeColors& colors);

}  // namespace moe
