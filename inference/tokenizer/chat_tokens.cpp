#include "inference/tokenizer/chat_tokens.h"

#include <span>

namespace moe {

template <typename Visit>
void ChatTokenCache::forEachRun(ChatFamily family, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt, const ChatOptions& options, Visit&& visit) {
  // As encodeChat: the template's pieces, BOS where the vocabulary adds one, then the
  // runs in order.
  const ChatPrompt prompt = chatPrompt(family, messages, add_generation_prompt, options);
  const std::vector<TextPiece> pieces = prompt.pieces();
  if (tokenizer_.addBosDefault() && tokenizer_.bos() >= 0) {
    const int32_t bos = tokenizer_.bos();
    visit(std::span<const int32_t>(&bos, 1));
  }
  for (const PromptRun& run : tokenizer_.runs(pieces)) {
    if (run.marker >= 0)
      visit(std::span<const int32_t>(&run.marker, 1));
    else
      visit(std::span<const int32_t>(idsOf(run)));
  }
}

const std::vector<int32_t>& ChatTokenCache::idsOf(const PromptRun& run) {
  RunMap& map = runs_[run.at_text_start ? 1 : 0];
  const std::string_view key = run.text;  // the whole text: an edit anywhere in it is another run
  auto it = map.find(key);
  if (it != map.end()) {
    ++counters_.runs_reused;
    counters_.bytes_reused += run.text.size();
  } else {
    Entry entry;
    tokenizer_.encodeRun(run.text, run.at_text_start, entry.ids);
    ++counters_.runs_encoded;
    counters_.bytes_encoded += run.text.size();
    it = map.emplace(std::string(key), std::move(entry)).first;
  }
  it->second.used = round_;
  return it->second.ids;
}

std::vector<int32_t> ChatTokenCache::encode(ChatFamily family, const std::vector<ChatMessage>& messages,
                                            bool add_generation_prompt, const ChatOptions& options) {
  std::vector<int32_t> out;
  forEachRun(family, messages, add_generation_prompt, options,
             [&](std::span<const int32_t> ids) { out.insert(out.end(), ids.begin(), ids.end()); });
  return out;
}

size_t ChatTokenCache::count(ChatFamily family, const std::vector<ChatMessage>& messages,
                             bool add_generation_prompt, const ChatOptions& options) {
  size_t n = 0;
  forEachRun(family, messages, add_generation_prompt, options,
             [&](std::span<const int32_t> ids) { n += ids.size(); });
  return n;
}

ChatTokenCache::Fitted ChatTokenCache::fit(ChatFamily family, const std::vector<ChatMessage>& messages,
                                           const ChatOptions& options, size_t budget) {
  Fitted out;
  const std::vector<ChatMessage>* kept = &messages;
  std::vector<ChatMessage> shortened;  // a copy once a message is left out
  while (count(family, *kept, true, options) > budget) {
    // Leave out the oldest message after the system prompt; the last one always stays.
    const size_t first = (!kept->empty() && kept->front().role == "system") ? 1 : 0;
    if (kept->size() - first <= 1) break;  // too long on its own
    if (kept != &shortened) {
      shortened = messages;
      kept = &shortened;
    }
    shortened.erase(shortened.begin() + static_cast<std::ptrdiff_t>(first));
    ++out.dropped;
  }
  out.ids = encode(family, *kept, true, options);
  return out;
}

void ChatTokenCache::forgetUnused() {
  for (RunMap& map : runs_) std::erase_if(map, [&](const auto& run) { return run.second.used < round_; });
  ++round_;
}

}  // namespace moe
