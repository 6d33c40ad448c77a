// A forward-only reader of JSON text (RFC 8259): it pulls the values a caller
// asks for and skips the rest, so a large file is read without building a tree.
// Every error names the byte offset where the text went wrong.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace moe {

class JsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class JsonCursor {
 public:
  explicit JsonCursor(std::string_view text) : text_(text) {}

  // The next character after whitespace ('\0' at the end of the text).
  char peek();
  // Steps past `c` (after whitespace) or throws.
  void expect(char c);
  // Steps past `c` when it comes next (after whitespace).
  bool consume(char c);
  std::string readString();  // escapes decoded, \uXXXX as UTF-8
  double readNumber();
  long long readInteger();  // a number with no fraction or exponent
  void skipValue();         // any value, nested ones included
  // After the text's one value only whitespace may follow.
  void expectEnd();

  // {"key": value, ...}: f(key) must read or skip the member's value.
  template <class F>
  void forEachMember(F&& f) {
    expect('{');
    if (consume('}')) return;
    do {
      if (peek() != '"') fail("expected a member name");
      const std::string key = readString();
      expect(':');
      f(key);
    } while (consume(','));
    expect('}');
  }
  // [value, ...]: f() must read or skip the element.
  template <class F>
  void forEachElement(F&& f) {
    expect('[');
    if (consume(']')) return;
    do f();
    while (consume(','));
    expect(']');
  }

  [[noreturn]] void fail(const std::string& what) const;
  size_t offset() const { return pos_; }

 private:
  void skipWhitespace();
  void skipString();
  void skipNumber();
  void skipLiteral(std::string_view word);

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;  // nesting of skipValue, bounded so hostile input cannot exhaust the stack
};

}  // namespace moe
