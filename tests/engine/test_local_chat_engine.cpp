// The app's engine (app/core/local_chat_engine.h) with the demo models: the trained
// demo ends its reply at its end token like any model, the random-weight demo runs
// to its length limit, and a chat longer than the context is answered without its
// oldest messages, which the reply's figures count (the window says so).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "app/core/local_chat_engine.h"
#include "app/core/reply_reader.h"
#include "support/greedy_params.h"
#include "support/temp_dir.h"
#include "synth/synthetic_model.h"

namespace {

using moe::ChatMessage;

const char* const kTrainedDemo = MOECHAT_TEST_DATA "/../../resources/models/moechat-demo-brown-q8_0.gguf";

moe::EngineLoadOptions demo(moe::DemoModel which, int n_ctx = 512) {
  moe::EngineLoadOptions o;
  o.demo = true;
  o.demo_model = which;
  o.backend = "cpu";
  o.policy = "resident";
  o.threads = 1;
  o.n_ctx = n_ctx;
  return o;
}

// The tiny qwen35moe written into dir, on the CPU with every expert in place.
moe::EngineLoadOptions tinyQwen35(const moe::test::TempDir& dir) {
  moe::EngineLoadOptions o;
  o.model_path = dir.file("qwen35moe.gguf");
  moe::synth::writeModel(moe::synth::tinySpec("qwen35moe"), o.model_path);
  o.backend = "cpu";
  o.policy = "resident";
  o.threads = 1;
  o.n_ctx = 256;
  return o;
}

using moe::test::greedy;

class LocalChatEngineTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("MOECHAT_DEMO_MODEL", kTrainedDemo, 1); }
  std::string reply(moe::LocalChatEngine& engine, const std::vector<ChatMessage>& messages, int max_tokens,
                    moe::EngineReplyStats* stats) {
    std::string text;
    std::atomic<bool> cancel{false};
    *stats = engine.reply(
        messages, greedy(max_tokens), [&](std::string_view t) { text += t; }, cancel);
    return text;
  }
};

TEST_F(LocalChatEngineTest, trainedDemoStopsAtItsEndToken) {
  moe::LocalChatEngine engine;
  engine.load(demo(moe::DemoModel::kTrained), {});
  moe::EngineReplyStats st;
  const std::string text =
      reply(engine, {{"user", "Tell me a story about an old farmer and his dog."}}, 300, &st);
  EXPECT_EQ(st.stop_reason, "end-token") << text;
  EXPECT_LT(st.completion_tokens, 300);
  EXPECT_GT(st.completion_tokens, 5) << text;
  EXPECT_EQ(st.dropped_messages, 0);
}

TEST_F(LocalChatEngineTest, randomDemoRunsToItsLimit) {
  moe::LocalChatEngine engine;
  engine.load(demo(moe::DemoModel::kRandom), {});
  moe::EngineReplyStats st;
  reply(engine, {{"user", "Hello"}}, 24, &st);
  EXPECT_EQ(st.stop_reason, "length");
  EXPECT_EQ(st.completion_tokens, 24);
}

// 512 tokens of context: thirty long turns do not fit with room for the reply; the
// oldest go (never the system prompt or the last message) and are counted.
TEST_F(LocalChatEngineTest, historyThatDoesNotFitIsLeftOutAndCounted) {
  moe::LocalChatEngine engine;
  engine.load(demo(moe::DemoModel::kTrained), {});
  std::vector<ChatMessage> chat = {{"system", "You tell short stories."}};
  const std::string long_turn =
      "The farmer walked along the river with his old dog, and the two of them talked about the weather, "
      "the harvest and the town.";
  for (int i = 0; i < 30; ++i) chat.push_back({i % 2 ? "assistant" : "user", long_turn});
  chat.push_back({"user", "What happened next?"});
  moe::EngineReplyStats st;
  reply(engine, chat, 64, &st);
  EXPECT_GT(st.dropped_messages, 0);
  EXPECT_LE(st.prompt_tokens + 64, 512);
  EXPECT_GT(st.completion_tokens, 0);
  reply(engine, {chat.front(), chat.back()}, 64, &st);
  EXPECT_EQ(st.dropped_messages, 0);
}

// The engine keeps the conversation's tokenised text (inference/tokenizer/chat_tokens.h):
// a follow-up reply tokenises what is new since the last one, a regenerated reply (the
// same history again) nothing, an edited message its turn again, and after a load
// (another tokenizer, maybe) the whole conversation.
TEST_F(LocalChatEngineTest, aFollowUpReplyTokenisesOnlyTheNewText) {
  moe::LocalChatEngine engine;
  engine.load(demo(moe::DemoModel::kTrained), {});
  std::vector<ChatMessage> chat = {{"system", "You tell short stories."},
                                   {"user", "Tell me a story about an old farmer."}};
  auto all_text = [&] {  // the messages' bytes, every one of them in the prompt
    int64_t n = 0;
    for (const auto& m : chat) n += static_cast<int64_t>(m.content.size());
    return n;
  };
  moe::EngineReplyStats st;
  for (const char* next : {"And his dog?", "What happened at the river?", "How did it end?"}) {
    chat.push_back({"assistant", reply(engine, chat, 8, &st)});
    chat.push_back({"user", next});
  }
  reply(engine, chat, 8, &st);
  // The demo's template is Mixtral's, its "[INST]", "[/INST]" and "</s>" tokens of the
  // vocabulary: the last reply and the new question are the only new runs of text.
  const size_t fresh = chat[chat.size() - 2].content.size() + chat.back().content.size();
  EXPECT_GT(st.tokenized_bytes, 0);
  EXPECT_LE(st.tokenized_bytes, static_cast<int64_t>(fresh) + 8);
  EXPECT_LT(st.tokenized_bytes, all_text() / 2);

  reply(engine, chat, 8, &st);  // regenerated
  EXPECT_EQ(st.tokenized_bytes, 0);
  chat[3].content = "A new question about the weather?";  // an edit of an earlier message
  reply(engine, chat, 8, &st);
  EXPECT_GE(st.tokenized_bytes, static_cast<int64_t>(chat[3].content.size()));
  EXPECT_LT(st.tokenized_bytes, all_text() / 2);

  engine.load(demo(moe::DemoModel::kTrained), {});
  reply(engine, chat, 8, &st);
  EXPECT_GE(st.tokenized_bytes, all_text());
}

}  // namespace

// A Qwen3.5 model (the tiny qwen35moe): the chat template "qwen35" and its reply read
// as the app shows it. Random weights never close the reasoning block the prompt
// opened, so the whole reply is the quoted Thinking block; the next prompt carries
// the earlier reply without it.
TEST_F(LocalChatEngineTest, qwen35ReplyIsShownAsThinking) {
  const moe::test::TempDir dir;
  moe::LocalChatEngine engine;
  const moe::LoadedModelInfo info = engine.load(tinyQwen35(dir), {});
  EXPECT_EQ(info.chat_template, "qwen35");
  moe::EngineReplyStats st;
  const std::string first = reply(engine, {{"user", "Hello"}}, 12, &st);
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(first.starts_with(moe::kThinkingHeader) && first.find("\n> ") == moe::kThinkingHeader.size())
      << first;
  reply(engine, {{"user", "Hello"}, {"assistant", first}, {"user", "Again"}}, 4, &st);
  EXPECT_GT(st.prompt_tokens, 0);
}

// The thinking switch off (ChatOptions::thinking, the app's Think button): the prompt
// closes an empty reasoning block, so the reply is the answer, not a Thinking block,
// and the prompt holds the closing markup's tokens more. The demo's template has no switch.
TEST_F(LocalChatEngineTest, qwen35WithThinkingOffAnswersAtOnce) {
  const moe::test::TempDir dir;
  moe::LocalChatEngine engine;
  EXPECT_TRUE(engine.load(tinyQwen35(dir), {}).thinking_switch);
  moe::EngineReplyStats thinking, answering;
  reply(engine, {{"user", "Hello"}}, 4, &thinking);
  moe::ChatOptions off;
  off.thinking = false;
  engine.setChatOptions(off);
  const std::string answer = reply(engine, {{"user", "Hello"}}, 12, &answering);
  ASSERT_FALSE(answer.empty());
  EXPECT_FALSE(answer.starts_with(moe::kThinkingHeader)) << answer;
  EXPECT_GT(answering.prompt_tokens, thinking.prompt_tokens);

  moe::LocalChatEngine demo_engine;
  EXPECT_FALSE(demo_engine.load(demo(moe::DemoModel::kTrained), {}).thinking_switch);
}
