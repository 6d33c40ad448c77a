// The conversation's tokenised text kept between replies (inference/tokenizer/
// chat_tokens.h): in every chat family, on each vocabulary kind, a conversation of
// twenty turns (a system prompt, edits of earlier turns, the Think switch, a
// regenerated reply, turns left out to fit a small context) gets exactly the ids of
// encodeChat over the whole history, while a follow-up reply tokenises only the
// text that is new: the last reply and the new message, plus a few bytes of the
// template's own text.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "inference/tokenizer/chat_tokens.h"
#include "support/chat_vocab.h"

using namespace moe;

namespace {

// The vocabularies: each kind with every family's markers as control tokens, and a
// gpt2 vocabulary with only its own (ChatML's): there most families' markup is
// plain text, so runs span several turns and a tokenizer merge may cross a turn.
enum class Vocab { Bpe, Spm, Gemma4, BpePlain };
const char* vocabName(Vocab v) {
  switch (v) {
    case Vocab::Bpe: return "bpe";
    case Vocab::Spm: return "spm";
    case Vocab::Gemma4: return "gemma4";
    case Vocab::BpePlain: return "bpe_plain";
  }
  return "?";
}
std::unique_ptr<Tokenizer> tokenizerOf(Vocab v) {
  switch (v) {
    case Vocab::Bpe: return test::tokenizerWithEveryMarker(false);
    case Vocab::Spm: return test::tokenizerWithEveryMarker(true);
    case Vocab::Gemma4: return test::withEveryMarker(buildGemma4Vocab(600));
    case Vocab::BpePlain: return Tokenizer::fromVocab(buildGpt2Vocab(400, "qwen2"));
  }
  return nullptr;
}

const char* const kWords[] = {"the", "farmer", "walked", "along", "river",   "with",    "his",  "old",
                              "dog", "and",    "talked", "about", "weather", "harvest", "town", "of"};

std::string words(int seed, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += std::string(i ? " " : "") + kWords[(seed * 7 + i * 3) % 16];
  return out;
}

// The user's message of a turn: some with spaces and newlines around (the templates
// that trim), one with a typed marker (text, never a marker).
std::string question(int turn) {
  std::string q = "Question " + std::to_string(turn) + ": " + words(turn, 3 + turn % 5) + "?";
  if (turn % 4 == 1) q = "  " + q + "\n";
  if (turn == 6) q += " <|im_start|>system";
  return q;
}

// The model's reply as the chat shows it: every third one with the quoted Thinking
// block the reasoning families strip from earlier turns.
std::string reply(int turn) {
  const std::string answer = "Answer " + std::to_string(turn) + ". " + words(turn + 5, 4 + turn % 6) + ".";
  if (turn % 3 != 0) return answer;
  return "> **Thinking**\n> " + words(turn + 1, 3) + "\n> \n> " + words(turn + 2, 2) + "\n\n" + answer;
}

using Param = std::tuple<ChatFamily, Vocab>;

class ChatTokens : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    family_ = std::get<0>(GetParam());
    tok_ = tokenizerOf(std::get<1>(GetParam()));
  }
  // The cached ids are encodeChat's; returns the bytes tokenised for them.
  uint64_t expectSameIds(ChatTokenCache& cache, const std::vector<ChatMessage>& chat, const ChatOptions& opts,
                         const std::string& when) {
    const uint64_t before = cache.counters().bytes_encoded;
    EXPECT_EQ(cache.encode(family_, chat, true, opts), encodeChat(*tok_, family_, chat, true, opts)) << when;
    EXPECT_EQ(cache.count(family_, chat, true, opts), encodeChat(*tok_, family_, chat, true, opts).size())
        << when;
    return cache.counters().bytes_encoded - before;
  }
  ChatFamily family_{};
  std::unique_ptr<Tokenizer> tok_;
};

// Twenty turns with a system prompt; on the way an earlier question is edited (to
// text of the same length, and to a longer one), an earlier reply is edited, the
// Think switch goes off and on, and every reply is regenerated (the same history
// again, which tokenises nothing).
TEST_P(ChatTokens, idsEqualTheWholeHistorysOverAConversation) {
  ChatTokenCache cache(*tok_);
  std::vector<ChatMessage> chat = {{"system", "You are a careful assistant."}};
  ChatOptions opts;
  for (int turn = 0; turn < 20; ++turn) {
    const std::string when = "turn " + std::to_string(turn);
    chat.push_back({"user", question(turn)});
    if (turn == 5 || turn == 11) opts.thinking = !opts.thinking;
    if (turn == 8) chat[1].content[11] = chat[1].content[11] == 'a' ? 'b' : 'a';  // same length
    if (turn == 12) chat[3].content += " And one more thing.";
    if (turn == 15) chat[2].content = reply(40);
    expectSameIds(cache, chat, opts, when);
    cache.forgetUnused();
    EXPECT_EQ(expectSameIds(cache, chat, opts, when + ", regenerated"), 0u) << when;
    cache.forgetUnused();
    chat.push_back({"assistant", reply(turn)});
  }
}

// A question asked first and again later: the same run of text at the prompt's start
// and after a marker, which sentencepiece encodes differently (the dummy prefix).
TEST_P(ChatTokens, aRunThatBeginsThePromptIsKeptApart) {
  ChatTokenCache cache(*tok_);
  std::vector<ChatMessage> chat = {{"user", "Again?"}};
  const ChatOptions opts;
  expectSameIds(cache, chat, opts, "first");
  chat.push_back({"assistant", "Yes."});
  chat.push_back({"user", "Again?"});
  expectSameIds(cache, chat, opts, "asked again");
}

// Today's loop, the specification: the whole history encoded, and once more after
// each message left out, until it fits.
ChatTokenCache::Fitted fitWholeHistory(const Tokenizer& t, ChatFamily family, std::vector<ChatMessage> kept,
                                       const ChatOptions& opts, size_t budget) {
  ChatTokenCache::Fitted out;
  for (;;) {
    out.ids = encodeChat(t, family, kept, true, opts);
    if (out.ids.size() <= budget) return out;
    const size_t first = (!kept.empty() && kept.front().role == "system") ? 1 : 0;
    if (kept.size() - first <= 1) return out;
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(first));
    ++out.dropped;
  }
}

// Turns left out to fit budgets from one token short of the whole prompt down to less
// than the last message: the same messages go, and the same ids remain, with and
// without a system prompt.
TEST_P(ChatTokens, fittingLeavesOutWhatTheWholeHistoryLoopDid) {
  for (bool system : {true, false}) {
    ChatTokenCache cache(*tok_);
    std::vector<ChatMessage> chat;
    if (system) chat.push_back({"system", "You are a careful assistant."});
    for (int turn = 0; turn < 20; ++turn) {
      chat.push_back({"user", question(turn)});
      chat.push_back({"assistant", reply(turn)});
    }
    chat.push_back({"user", question(20)});
    const ChatOptions opts;
    const size_t whole = encodeChat(*tok_, family_, chat, true, opts).size();
    for (size_t budget : {whole, whole - 1, whole * 2 / 3, whole / 3, whole / 10, size_t(3)}) {
      const ChatTokenCache::Fitted want = fitWholeHistory(*tok_, family_, chat, opts, budget);
      const ChatTokenCache::Fitted got = cache.fit(family_, chat, opts, budget);
      EXPECT_EQ(got.dropped, want.dropped)
          << "budget " << budget << (system ? " with" : " without") << " system";
      EXPECT_EQ(got.ids, want.ids) << "budget " << budget << (system ? " with" : " without") << " system";
      cache.forgetUnused();
    }
  }
}

// The cache holds the runs of the last reply's prompt and no more: an edited
// message's old text and the other side of the Think switch are forgotten.
TEST_P(ChatTokens, forgetUnusedKeepsTheLastPromptsRuns) {
  ChatTokenCache cache(*tok_);
  std::vector<ChatMessage> chat = {{"system", "You are a careful assistant."}};
  ChatOptions opts;
  for (int turn = 0; turn < 8; ++turn) {
    chat.push_back({"user", question(turn)});
    if (turn == 4) chat[1].content = "An edited first question.";
    opts.thinking = turn % 2 == 0;
    cache.encode(family_, chat, true, opts);
    cache.forgetUnused();
    std::set<std::pair<std::string, bool>> runs;
    const ChatPrompt prompt = chatPrompt(family_, chat, true, opts);
    for (const PromptRun& r : tok_->runs(prompt.pieces()))
      if (r.marker < 0) runs.insert({r.text, r.at_text_start});
    EXPECT_EQ(cache.size(), runs.size()) << "turn " << turn;
    chat.push_back({"assistant", reply(turn)});
  }
}

std::string paramName(const testing::TestParamInfo<Param>& info) {
  return std::string(chatFamilyName(std::get<0>(info.param))) + "_" + vocabName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, ChatTokens,
                         testing::Combine(testing::ValuesIn(test::kChatFamilies),
                                          testing::Values(Vocab::Bpe, Vocab::Spm, Vocab::Gemma4,
                                                          Vocab::BpePlain)),
                         paramName);

// The bytes of text whose runs the whole-history path encodes for this prompt.
uint64_t wholePromptBytes(const Tokenizer& t, ChatFamily family, const std::vector<ChatMessage>& chat) {
  uint64_t n = 0;
  for (const PromptRun& r : t.runs(chatPrompt(family, chat, true).pieces())) n += r.text.size();
  return n;
}

class ChatTokensSaving : public testing::TestWithParam<ChatFamily> {};

// With the family's markers in the vocabulary, a follow-up reply tokenises the last
// reply and the new message, plus at most 40 bytes of the template's own text around
// them (role names, newlines): the same at turn 2 as at turn 20, while the
// whole-history path's bytes grow with the conversation. DeepSeek's turns are
// separated by plain text ("User: ", "Assistant:"): the previous question shares a
// run with the reply after it (and the first one with the system prompt too) and is
// tokenised again with it.
TEST_P(ChatTokensSaving, aFollowUpTokenisesOnlyTheNewText) {
  const ChatFamily family = GetParam();
  const auto t = test::tokenizerWithEveryMarker(false);
  ChatTokenCache cache(*t);
  std::vector<ChatMessage> chat = {{"system", "You are a careful assistant."}};
  uint64_t whole = 0, cached = 0;
  for (int turn = 0; turn < 20; ++turn) {
    chat.push_back({"user", question(turn)});
    const uint64_t before = cache.counters().bytes_encoded;
    cache.encode(family, chat, true);
    cache.forgetUnused();
    const uint64_t encoded = cache.counters().bytes_encoded - before;
    if (turn > 0) {
      uint64_t fresh = reply(turn - 1).size() + question(turn).size();
      if (family == ChatFamily::DeepSeek)  // and the system prompt, in the first run
        fresh += question(turn - 1).size() + (turn == 1 ? chat.front().content.size() : 0);
      EXPECT_LE(encoded, fresh + 40) << chatFamilyName(family) << " turn " << turn;
    }
    whole += wholePromptBytes(*t, family, chat);
    cached += encoded;
    chat.push_back({"assistant", reply(turn)});
  }
  // Twenty replies: the whole history tokenised each time, against what was new.
  EXPECT_GT(whole, 5 * cached) << chatFamilyName(family) << ": " << whole << " bytes against " << cached;
}

// ChatML, exactly: the reply's turn "assistant\n" + reply and the message's turn
// "user\n" + message (the markers and the "\n" between turns are found).
TEST(ChatTokensCount, chatmlFollowUpIsTheReplyAndTheMessage) {
  const auto t = test::tokenizerWithEveryMarker(false);
  ChatTokenCache cache(*t);
  std::vector<ChatMessage> chat = {{"system", "Be brief."}, {"user", "Hello there"}};
  cache.encode(ChatFamily::ChatML, chat, true);
  cache.forgetUnused();
  chat.push_back({"assistant", "Hi, how can I help?"});
  chat.push_back({"user", "Tell me about the river."});
  const ChatTokenCache::Counters before = cache.counters();
  cache.encode(ChatFamily::ChatML, chat, true);
  EXPECT_EQ(cache.counters().runs_encoded - before.runs_encoded, 2u);
  EXPECT_EQ(cache.counters().bytes_encoded - before.bytes_encoded,
            std::string("assistant\nHi, how can I help?").size() +
                std::string("user\nTell me about the river.").size());
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, ChatTokensSaving, testing::ValuesIn(test::kChatFamilies),
                         [](const auto& info) { return std::string(chatFamilyName(info.param)); });

}  // namespace
