// Turns the bytes of generated tokens into text that is safe to show: only
// whole UTF-8 characters, and never a prefix of a stop string until it is
// known not to become one. Stops (and swallows the stop string) when one appears.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace moe {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop_strings = {});

  // Appends token bytes; returns the text that can be shown now.
  std::string push(std::string_view bytes);
  // End of generation: returns what was held back (a stop-string prefix that
  // never completed; an incomplete UTF-8 tail becomes U+FFFD).
  std::string finish();
  bool stopped() const { return stopped_; }
  const std::string& matchedStop() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // held back: incomplete UTF-8 or a possible stop-string start
  bool stopped_ = false;
  std::string matched_;
};

// s with every byte that does not belong to a well-formed UTF-8 sequence
// (stray continuation bytes, overlong forms, surrogates) replaced by U+FFFD, and
// every control character but tab, newline and carriage return (C0, DEL, C1)
// replaced too: model output must not be able to drive a terminal (ESC sequences).
std::string sanitizeUtf8(std::string_view s);

// Length of the longest prefix of s that ends on a UTF-8 character boundary.
size_t completeUtf8Prefix(std::string_view s);

}  // namespace moe
