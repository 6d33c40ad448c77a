#include "offload/routing/json_cursor.h"

#include <charconv>
#include <cmath>

namespace moe {
namespace {

constexpr int kMaxDepth = 256;

bool isDigit(char c) { return c >= '0' && c <= '9'; }

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void appendUtf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

}  // namespace

void JsonCursor::fail(const std::string& what) const {
  throw JsonError("JSON error at byte " + std::to_string(pos_) + ": " + what);
}

void JsonCursor::skipWhitespace() {
  while (pos_ < text_.size() &&
         (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t'))
    ++pos_;
}

char JsonCursor::peek() {
  skipWhitespace();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

void JsonCursor::expect(char c) {
  if (peek() != c) fail(std::string("expected '") + c + "'");
  ++pos_;
}

bool JsonCursor::consume(char c) {
  if (peek() != c) return false;
  ++pos_;
  return true;
}

void JsonCursor::expectEnd() {
  if (peek() != '\0') fail("text after the end of the value");
}

std::string JsonCursor::readString() {
  expect('"');
  std::string out;
  while (true) {
    if (pos_ >= text_.size()) fail("unterminated string");
    const char c = text_[pos_++];
    if (c == '"') return out;
    if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
    if (c != '\\') {
      out += c;
      continue;
    }
    if (pos_ >= text_.size()) fail("unterminated escape");
    const char e = text_[pos_++];
    switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        auto hex4 = [&] {
          if (pos_ + 4 > text_.size()) fail("short \\u escape");
          unsigned v = 0;
          for (int i = 0; i < 4; ++i) {
            const int h = hexValue(text_[pos_++]);
            if (h < 0) fail("bad \\u escape");
            v = v * 16 + unsigned(h);
          }
          return v;
        };
        unsigned cp = hex4();
        // A surrogate pair: \uD83D\uDE00 is one code point.
        if (cp >= 0xD800 && cp < 0xDC00 && pos_ + 1 < text_.size() && text_[pos_] == '\\' &&
            text_[pos_ + 1] == 'u') {
          pos_ += 2;
          const unsigned lo = hex4();
          if (lo >= 0xDC00 && lo < 0xE000)
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          else
            appendUtf8(out, cp), cp = lo;
        }
        appendUtf8(out, cp);
        break;
      }
      default: fail("bad escape");
    }
  }
}

void JsonCursor::skipString() {
  expect('"');
  while (pos_ < text_.size()) {
    const char c = text_[pos_++];
    if (c == '"') return;
    if (c == '\\') ++pos_;
  }
  fail("unterminated string");
}

void JsonCursor::skipNumber() {
  const size_t start = pos_;
  if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
  while (pos_ < text_.size() && (isDigit(text_[pos_]) || text_[pos_] == '.' || text_[pos_] == 'e' ||
                                 text_[pos_] == 'E' || text_[pos_] == '+' || text_[pos_] == '-'))
    ++pos_;
  if (pos_ == start || (pos_ == start + 1 && text_[start] == '-')) fail("expected a number");
}

double JsonCursor::readNumber() {
  skipWhitespace();
  const size_t start = pos_;
  skipNumber();
  double v = 0;
  const auto [end, ec] = std::from_chars(text_.data() + start, text_.data() + pos_, v);
  if (ec != std::errc() || end != text_.data() + pos_ || !std::isfinite(v)) {
    pos_ = start;
    fail("bad number");
  }
  return v;
}

long long JsonCursor::readInteger() {
  skipWhitespace();
  const size_t start = pos_;
  skipNumber();
  long long v = 0;
  const auto [end, ec] = std::from_chars(text_.data() + start, text_.data() + pos_, v);
  if (ec != std::errc() || end != text_.data() + pos_) {
    pos_ = start;
    fail("expected an integer");
  }
  return v;
}

void JsonCursor::skipLiteral(std::string_view word) {
  if (text_.substr(pos_, word.size()) != word) fail("unexpected character");
  pos_ += word.size();
}

void JsonCursor::skipValue() {
  if (++depth_ > kMaxDepth) fail("values nested too deeply");
  switch (peek()) {
    case '{': forEachMember([&](const std::string&) { skipValue(); }); break;
    case '[': forEachElement([&] { skipValue(); }); break;
    case '"': skipString(); break;
    case 't': skipLiteral("true"); break;
    case 'f': skipLiteral("false"); break;
    case 'n': skipLiteral("null"); break;
    case '\0': fail("unexpected end of the text");
    default: skipNumber();
  }
  --depth_;
}

}  // namespace moe
