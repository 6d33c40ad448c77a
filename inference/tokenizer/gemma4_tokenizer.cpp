#include "inference/tokenizer/gemma4_tokenizer.h"

#include <cstdio>
#include <limits>
#include <queue>

namespace moe {
namespace {

const std::string kSpaceSymbol = "\xE2\x96\x81";  // U+2581

// Bytes of the UTF-8 character starting at s[i] (1 for a stray or truncated byte).
size_t charLength(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  return i + n <= s.size() ? n : 1;
}

// "<0xAB>" -> 0xAB; -1 for anything else.
int byteOfPiece(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  unsigned value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = piece[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    value = value * 16 + unsigned(d);
  }
  return int(value);
}

}  // namespace

Gemma4Tokenizer::Gemma4Tokenizer(const VocabData& vocab) {
  loadCommon(vocab);
  byte_ids_.fill(-1);
  token_bytes_.resize(pieces_.size());
  for (size_t id = 0; id < pieces_.size(); ++id) {
    const std::string& p = pieces_[id];
    const TokenType t = types_[id];
    ids_by_text_[p] = int32_t(id);
    if (t == TokenType::Byte) {
      if (const int b = byteOfPiece(p); b >= 0) {
        byte_ids_[size_t(b)] = int32_t(id);
        token_bytes_[id] = std::string(1, char(b));
      }
      continue;
    }
    if (t == TokenType::Control) continue;  // decodes to nothing
    std::string text = p;
    for (size_t pos; (pos = text.find(kSpaceSymbol)) != std::string::npos;)
      text.replace(pos, kSpaceSymbol.size(), " ");
    token_bytes_[id] = std::move(text);
  }
  if (vocab.merges.size() > size_t(std::numeric_limits<int32_t>::max()))
    throw TokenizerError("tokenizer.ggml.merges: too many merges");
  ranks_.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& m = vocab.merges[rank];
    // The space that separates the two sides (a side may itself start with one).
    const size_t sep = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sep == std::string::npos || sep + 1 >= m.size())
      throw TokenizerError("tokenizer.ggml.merges[" + std::to_string(rank) + "] is not \"left right\"");
    ranks_.emplace(m, int32_t(rank));  // the first of duplicate merges keeps its rank
  }
}

std::string Gemma4Tokenizer::tokenBytes(int32_t id) const { return token_bytes_.at(size_t(id)); }

void Gemma4Tokenizer::encodeRun(std::string_view run, bool /*at_text_start*/,
                                std::vector<int32_t>& out) const {
  std::string escaped;
  escaped.reserve(run.size() + run.size() / 2);
  for (char c : run) {
    if (c == ' ')
      escaped += kSpaceSymbol;
    else
      escaped += c;
  }
  // Runs of newlines and runs of anything else.
  size_t start = 0;
  while (start < escaped.size()) {
    const bool newlines = escaped[start] == '\n';
    size_t end = start;
    while (end < escaped.size() && (escaped[end] == '\n') == newlines) ++end;
    appendRun(std::string_view(escaped).substr(start, end - start), out);
    start = end;
  }
}

void Gemma4Tokenizer::appendRun(std::string_view run, std::vector<int32_t>& out) const {
  if (run.front() == '\n')  // a newline run that is a token stays whole
    if (const auto it = ids_by_text_.find(std::string(run)); it != ids_by_text_.end()) {
      out.push_back(it->second);
      return;
    }
  // The symbols as a linked list and a heap of candidate pairs (rank, then position):
  // O(n log n) for a long line (pasted text, minified code).
  struct Symbol {
    std::string text;
    int prev, next;
    int version = 0;  // bumped when the symbol grows; -1 once merged into its left
  };
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < run.size();) {
    const size_t n = charLength(run, i);
    const int index = int(symbols.size());
    symbols.push_back({std::string(run.substr(i, n)), index - 1, index + 1});
    i += n;
  }
  symbols.back().next = -1;
  struct Candidate {
    int32_t rank;
    int left, right, left_version, right_version;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int left) {
    if (left < 0 || symbols[size_t(left)].next < 0) return;
    const Symbol& a = symbols[size_t(left)];
    const Symbol& b = symbols[size_t(a.next)];
    if (const auto it = ranks_.find(a.text + " " + b.text); it != ranks_.end())
      heap.push({it->second, left, a.next, a.version, b.version});
  };
  for (int i = 0; i + 1 < int(symbols.size()); ++i) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& a = symbols[size_t(c.left)];
    if (a.version != c.left_version || a.next != c.right ||
        symbols[size_t(c.right)].version != c.right_version)
      continue;  // stale: one side grew or went
    Symbol& b = symbols[size_t(c.right)];
    a.text += b.text;
    ++a.version;
    b.version = -1;
    a.next = b.next;
    if (b.next >= 0) symbols[size_t(b.next)].prev = c.left;
    consider(a.prev);
    consider(c.left);
  }
  for (int i = 0; i >= 0; i = symbols[size_t(i)].next) {
    const std::string& s = symbols[size_t(i)].text;
    if (const auto it = ids_by_text_.find(s); it != ids_by_text_.end()) {
      out.push_back(it->second);
      continue;
    }
    for (unsigned char b : s) {
      const int32_t id = byte_ids_[b] >= 0 ? byte_ids_[b] : unk_;
      if (id < 0) throw TokenizerError("text has a byte the vocabulary cannot spell and no unknown token");
      out.push_back(id);
    }
  }
}

}  // namespace moe
