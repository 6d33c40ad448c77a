#include "inference/text_stream.h"

#include <algorithm>

namespace moe {

size_t completeUtf8Prefix(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the last lead byte and check
  // whether its sequence is complete.
  const size_t n = s.size();
  size_t i = n;
  int back = 0;
  while (i > 0 && back < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++back;
  if (i == 0) return back == 0 ? 0 : n;  // only continuation bytes: invalid, let it through
  const unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  size_t need = 1;
  if (lead >= 0xF8) return n;  // never a valid lead byte: nothing to wait for
  if (lead >= 0xF0)
    need = 4;
  else if (lead >= 0xE0)
    need = 3;
  else if (lead >= 0xC0)
    need = 2;
  else
    return n;  // ASCII lead: complete (stray continuation bytes pass as they are)
  const size_t have = n - (i - 1);
  return have >= need ? n : i - 1;
}

std::string sanitizeUtf8(std::string_view s) {
  static constexpr const char* kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    size_t len = 0;
    unsigned min_cp = 0;
    if (c < 0x80)
      len = 1;
    else if (c >= 0xC2 && c < 0xE0)
      len = 2, min_cp = 0x80;
    else if (c >= 0xE0 && c < 0xF0)
      len = 3, min_cp = 0x800;
    else if (c >= 0xF0 && c < 0xF5)
      len = 4, min_cp = 0x10000;
    bool ok = len > 0 && i + len <= s.size();
    unsigned cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (b(i + k) & 0xC0) == 0x80;
      cp = (cp << 6) | (b(i + k) & 0x3F);
    }
    ok = ok && cp >= min_cp && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    const bool control = (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || (cp >= 0x7F && cp < 0xA0);
    if (ok && control) {
      out += kReplacement;
      i += len;
    } else if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  return out;
}

TextStream::TextStream(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string TextStream::push(std::string_view bytes) {
  if (stopped_) return {};
  pending_.append(bytes);
  size_t first = std::string::npos;
  for (const auto& stop : stops_) {
    const size_t at = pending_.find(stop);
    if (at < first) first = at, matched_ = stop;
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = sanitizeUtf8(std::string_view(pending_).substr(0, first));
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a prefix of some stop string.
  size_t hold = 0;
  for (const auto& stop : stops_)
    for (size_t len = std::min(stop.size() - 1, pending_.size()); len > hold; --len)
      if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
  size_t emit = completeUtf8Prefix(std::string_view(pending_).substr(0, pending_.size() - hold));
  std::string out = sanitizeUtf8(std::string_view(pending_).substr(0, emit));
  pending_.erase(0, emit);
  return out;
}

std::string TextStream::finish() {
  std::string out;
  out.swap(pending_);
  const size_t ok = completeUtf8Prefix(out);
  if (ok < out.size()) out = out.substr(0, ok) + "\xEF\xBF\xBD";
  return sanitizeUtf8(out);
}

}  // namespace moe
