// A conversation's prompt ids with the tokenised text kept from one reply to the
// next, so that a reply tokenises only what is new in the conversation.
//
// The tokenizer cuts a prompt at its markers (Tokenizer::runs) and encodes each run
// of text between two markers on its own: the run's ids depend only on its text and
// on whether it begins the prompt. So a run met in the last prompt need not be
// encoded again; the cache keeps each run's ids under its text. The template still
// renders the whole conversation every time (string concatenation), which is what
// keeps the ids exactly encodeChat's in every family, also where a turn's text
// depends on the rest of the conversation: Qwen3.5 and MiniMax carry an earlier
// reply's reasoning only after the last user message, Mixtral folds the system prompt
// into the first user turn kept, OLMoE ends the last reply differently. Such a turn
// renders to another text and is encoded again; every other run is found.
//
// Nothing needs invalidating by hand: an edited message, another template or another
// option (the Think switch) renders other text and misses. The ids are only valid
// for the tokenizer the cache was made with: it lives and dies with the loaded model
// (EngineSession). One thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "inference/tokenizer/chat_template.h"
#include "inference/tokenizer/tokenizer.h"

namespace moe {

class ChatTokenCache {
 public:
  // What went to the tokenizer, and what was taken from the cache instead, in runs of
  // text and their bytes. Markers are counted in neither (they are looked up, not
  // encoded).
  struct Counters {
    uint64_t runs_encoded = 0, bytes_encoded = 0;
    uint64_t runs_reused = 0, bytes_reused = 0;
  };

  // A prompt fitted to a token budget: its ids and how many messages were left out.
  struct Fitted {
    std::vector<int32_t> ids;
    int dropped = 0;
  };

  explicit ChatTokenCache(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // encodeChat(tokenizer, family, messages, add_generation_prompt, options), id for id.
  std::vector<int32_t> encode(ChatFamily family, const std::vector<ChatMessage>& messages,
                              bool add_generation_prompt, const ChatOptions& options = {});
  // encode(...).size(), without assembling the ids.
  size_t count(ChatFamily family, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
               const ChatOptions& options = {});
  // The prompt (with the generation prompt) of `messages` in at most `budget` tokens:
  // the oldest messages after a leading system prompt are left out one by one until
  // it fits; the system prompt and the last message always stay, so a prompt that is
  // too long on its own is returned as it is (the generator says so). Each try is
  // counted from the kept runs; only a turn that renders to new text is encoded.
  Fitted fit(ChatFamily family, const std::vector<ChatMessage>& messages, const ChatOptions& options,
             size_t budget);

  // Forgets the runs no prompt used since the last call (an edited message's old
  // text, a turn left out, the other side of a switched option), so the cache holds
  // about one conversation. Call once per reply, after its prompt is made.
  void forgetUnused();
  void clear() {
    runs_[0].clear();
    runs_[1].clear();
  }
  size_t size() const { return runs_[0].size() + runs_[1].size(); }  // runs kept
  const Counters& counters() const { return counters_; }

 private:
  struct Entry {
    std::vector<int32_t> ids;
    uint64_t used = 0;  // the round it was last used in
  };
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using RunMap = std::unordered_map<std::string, Entry, TextHash, std::equal_to<>>;

  // The prompt's runs, each text run's ids from the cache (encoded on a miss);
  // visit(marker id) or visit(ids of a run).
  template <typename Visit>
  void forEachRun(ChatFamily family, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                  const ChatOptions& options, Visit&& visit);
  const std::vector<int32_t>& idsOf(const PromptRun& run);

  const Tokenizer& tokenizer_;
  RunMap runs_[2];  // by at_text_start: sentencepiece encodes a run that begins the text apart
  uint64_t round_ = 1;
  Counters counters_;
};

}  // namespace moe
