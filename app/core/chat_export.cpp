#include "app/core/chat_export.h"

#include <charconv>
#include <cmath>
#include <ctime>

namespace moe {

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is invalid
// (bad lead or continuation byte, truncated, overlong, a surrogate, > U+10FFFF).
size_t utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  uint32_t cp = 0, min = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0)
    n = 2, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0)
    n = 3, cp = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0)
    n = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void appendEscapedControl(std::string& out, unsigned char c) {
  switch (c) {
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    case '\b': out += "\\b"; return;
    case '\f': out += "\\f"; return;
    default: {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 0xF];
    }
  }
}

// Text for a Markdown file that a terminal or an editor shows as it is: each invalid
// UTF-8 byte and each control character (C0 but tab, newline and carriage return;
// DEL; C1, e.g. U+009B, a terminal's CSI) becomes U+FFFD.
std::string markdownText(std::string_view s) {
  static const char* kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8SequenceLength(s, i);
    const auto c = static_cast<unsigned char>(s[i]);
    const bool c0 = n == 1 && (c < 0x20 || c == 0x7f) && c != '\t' && c != '\n' && c != '\r';
    const bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0;
    if (n == 0 || c0 || c1) {
      out += kReplacement;
      i += n == 0 ? 1 : n;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string jsonNumber(int64_t v) { return std::to_string(v); }

// Shortest text that reads back as the same double; JSON has no NaN/Inf, so null.
std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

template <typename T>
std::string jsonOptional(const std::optional<T>& v) {
  return v ? jsonNumber(*v) : "null";
}

// A small pretty-printer for one flat object per line group.
class ObjectWriter {
 public:
  ObjectWriter(std::string& out, int indent) : out_(out), pad_(static_cast<size_t>(indent), ' ') {}
  void raw(std::string_view key, const std::string& json_value) {
    out_ += first_ ? "{\n" : ",\n";
    first_ = false;
    out_ += pad_ + "  " + jsonQuote(key) + ": " + json_value;
  }
  void str(std::string_view key, std::string_view value) { raw(key, jsonQuote(value)); }
  void close() { out_ += first_ ? "{}" : "\n" + pad_ + "}"; }

 private:
  std::string& out_;
  std::string pad_;
  bool first_ = true;
};

std::string messageJson(const Message& m) {
  std::string out;
  ObjectWriter w(out, 4);
  w.raw("id", jsonNumber(m.id));
  w.raw("position", jsonNumber(m.position));
  w.str("role", toString(m.role));
  w.str("state", toString(m.state));
  w.str("text", m.text);
  w.raw("created_at", jsonNumber(m.created_at));
  w.raw("updated_at", jsonNumber(m.updated_at));
  w.raw("prompt_tokens", jsonOptional(m.stats.prompt_tokens));
  w.raw("completion_tokens", jsonOptional(m.stats.completion_tokens));
  w.raw("ttft_ms", jsonOptional(m.stats.ttft_ms));
  w.raw("prefill_tps", jsonOptional(m.stats.prefill_tps));
  w.raw("decode_tps", jsonOptional(m.stats.decode_tps));
  w.raw("stop_reason", m.stats.stop_reason.empty() ? "null" : jsonQuote(m.stats.stop_reason));
  w.raw("turn", jsonNumber(m.turn));
  w.raw("shown", m.shown ? "true" : "false");
  w.raw("alternative", jsonNumber(int64_t(m.alternative)));
  w.raw("alternatives", jsonNumber(int64_t(m.alternatives)));
  if (m.role == Role::Assistant) {
    w.raw("model_name", m.origin.model_name.empty() ? "null" : jsonQuote(m.origin.model_name));
    w.raw("model_sha256", m.origin.model_sha256.empty() ? "null" : jsonQuote(m.origin.model_sha256));
    // Kept as a string, like the conversation's: the export stays valid JSON whatever it holds.
    w.raw("sampling_json", m.origin.sampling_json.empty() ? "null" : jsonQuote(m.origin.sampling_json));
    // A reply kept by edit-and-resend: the user's message as it read when it answered.
    w.raw("answered", m.answered.empty() ? "null" : jsonQuote(m.answered));
  }
  w.close();
  return out;
}

// "model `name`, SHA-256 `0123456789abcdef…`, sampling `{...}`", or empty when nothing is known.
std::string originLine(const ReplyOrigin& o) {
  std::string line;
  auto part = [&](const char* what, const std::string& value) {
    if (value.empty()) return;
    line += (line.empty() ? "" : ", ") + std::string(what) + " `" + markdownText(value) + "`";
  };
  part("model", o.model_name);
  part("SHA-256", o.model_sha256.size() > 16 ? o.model_sha256.substr(0, 16) + "…" : o.model_sha256);
  part("sampling", o.sampling_json);
  return line;
}

const char* markdownHeading(Role role) {
  switch (role) {
    case Role::System: return "System";
    case Role::User: return "User";
    case Role::Assistant: return "Assistant";
  }
  return "Message";
}

}  // namespace

std::string jsonQuote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      appendEscapedControl(out, c);
      ++i;
    } else if (size_t n = utf8SequenceLength(s, i)) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the one bad byte; resynchronise on the next
      ++i;
    }
  }
  out += '"';
  return out;
}

std::string exportFileName(std::string_view title, std::string_view extension) {
  const std::string_view refused = "/\\:*?\"<>|";
  std::string name;
  bool space = false;
  for (size_t i = 0; i < title.size();) {
    const size_t n = utf8SequenceLength(title, i);
    if (n == 0) {  // an invalid byte: dropped
      ++i;
      continue;
    }
    const unsigned char c = static_cast<unsigned char>(title[i]);
    if (n == 1 && (c < 0x20 || c == 0x7f || c == ' ' || refused.find(title[i]) != std::string_view::npos)) {
      space = !name.empty();
      ++i;
      continue;
    }
    const size_t extra = space ? 1 : 0;
    if (name.size() + extra + n > kMaxExportNameBytes) break;
    if (space) name += ' ';
    space = false;
    name.append(title.substr(i, n));
    i += n;
  }
  // A leading dot hides the file; Windows drops a trailing one.
  while (!name.empty() && (name.back() == '.' || name.back() == ' ')) name.pop_back();
  const size_t first = name.find_first_not_of(". ");
  name = first == std::string::npos ? std::string() : name.substr(first);
  if (name.empty()) name = "chat";
  return name + "." + std::string(extension);
}

std::string formatUtc(int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string conversationToJson(const Conversation& conv, const std::vector<Message>& messages) {
  std::string out;
  ObjectWriter w(out, 0);
  w.str("format", "moechat-conversation");
  w.raw("version", "2");
  w.raw("id", jsonNumber(conv.id));
  w.str("title", conv.title);
  w.raw("created_at", jsonNumber(conv.created_at));
  w.raw("updated_at", jsonNumber(conv.updated_at));
  w.str("system_prompt", conv.system_prompt);
  // Kept as a string: the app wrote it, but an export must never be invalid JSON because of it.
  w.str("sampling_json", conv.sampling_json);
  w.str("model_path", conv.model_path);
  std::string list = "[";
  for (size_t i = 0; i < messages.size(); ++i) {
    list += i ? ",\n    " : "\n    ";
    list += messageJson(messages[i]);
  }
  list += messages.empty() ? "]" : "\n  ]";
  w.raw("messages", list);
  w.close();
  out += '\n';
  return out;
}

std::string conversationToMarkdown(const Conversation& conv, const std::vector<Message>& messages) {
  std::string out =
      "# " + (conv.title.empty() ? std::string("Untitled conversation") : markdownText(conv.title)) + "\n\n";
  out += "- Created: " + formatUtc(conv.created_at) + "\n";
  out += "- Updated: " + formatUtc(conv.updated_at) + "\n";
  if (!conv.model_path.empty()) out += "- Model: `" + markdownText(conv.model_path) + "`\n";
  out += "\n";
  if (!conv.system_prompt.empty()) out += "## System prompt\n\n" + markdownText(conv.system_prompt) + "\n\n";
  for (const Message& m : messages) {
    out += "## ";
    out += markdownHeading(m.role);
    if (m.alternatives > 1) {
      out += " (reply " + std::to_string(m.alternative) + " of " + std::to_string(m.alternatives);
      out += m.shown ? ", the one the chat shows)" : ")";
    }
    out += "\n\n" + markdownText(m.text) + "\n\n";
    if (m.state != MessageState::Complete) out += std::string("*(reply ") + toString(m.state) + ")*\n\n";
    if (!m.answered.empty())
      out += "*The answer to an earlier wording of the message:* " + markdownText(m.answered) + "\n\n";
    if (m.role == Role::Assistant)
      if (const std::string origin = originLine(m.origin); !origin.empty())
        out += "*Written by " + origin + "*\n\n";
  }
  return out;
}

}  // namespace moe
