// gpt-oss's harmony replies as the chat shows them (app/core/harmony_reply.h): the
// analysis channel as a quoted "Thinking" block, the final channel's answer after it,
// no markers, whatever pieces the stream arrives in; a reply without channels as it
// came; the harmony prompt carries earlier answers without their Thinking block; and
// a control token reaches the stream as its text only when asked.
#include <QtTest>

#include <string>
#include <vector>

#include "app/core/harmony_reply.h"
#include "inference/tokenizer/chat_template.h"
#include "support/engine_fixture.h"

using namespace moe;

namespace {

const std::string kStream =
    "<|channel|>analysis<|message|>The user greets.\nSo greet back.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?";
const std::string kShown = "> **Thinking**\n> The user greets.\n> So greet back.\n\nHello! How can I help?";

std::string readAll(const std::vector<std::string>& pieces) {
  HarmonyReply reply;
  std::string out;
  for (const auto& p : pieces) out += reply.push(p);
  return out + reply.finish();
}

}  // namespace

class HarmonyReplyTest : public QObject {
  Q_OBJECT
 private slots:
  void channelsBecomeAThinkingBlockAndTheAnswer() {
    QCOMPARE(readAll({kStream}), kShown);
    std::vector<std::string> chars;
    for (char c : kStream) chars.emplace_back(1, c);
    QCOMPARE(readAll(chars), kShown);
    for (size_t cut = 0; cut <= kStream.size(); ++cut)  // every place a marker can be cut
      QCOMPARE(readAll({kStream.substr(0, cut), kStream.substr(cut)}), kShown);
  }

  void otherChannelsAndMarkers() {
    // The answer straight away; commentary (tool preambles) counts as thinking; a
    // marker moechat does not know is structure, not text.
    QCOMPARE(readAll({"<|channel|>final<|message|>Just this."}), std::string("Just this."));
    QCOMPARE(readAll({"<|channel|>commentary to=functions.x <|constrain|>json<|message|>{}<|call|>"}),
             std::string("> **Thinking**\n> {}"));
    QCOMPARE(readAll({"<|channel|>final<|message|>a<|unknown|>b"}), std::string("ab"));
  }

  void textWithoutChannelsIsShownAsItCame() {
    QCOMPARE(readAll({"plain reply, 1 < 2 and a <| lone opener"}),
             std::string("plain reply, 1 < 2 and a <| lone opener"));
    QCOMPARE(readAll({"ends in <", "|half"}), std::string("ends in <|half"));
  }

  void thePromptCarriesEarlierAnswersWithoutTheirThinking() {
    const std::vector<ChatMessage> conv = {{"user", "Hi"}, {"assistant", kShown}, {"user", "Why?"}};
    const std::string prompt = applyChatTemplate(ChatFamily::Harmony, conv, true);
    QVERIFY2(prompt.find("<|channel|>final<|message|>Hello! How can I help?<|end|>") != std::string::npos,
             prompt.c_str());
    QVERIFY(prompt.find("Thinking") == std::string::npos);
    // A reply that merely quotes something keeps it.
    const std::vector<ChatMessage> quoted = {{"user", "Hi"}, {"assistant", "> a quote\n\nmine"}};
    QVERIFY(applyChatTemplate(ChatFamily::Harmony, quoted, true).find("> a quote\n\nmine") !=
            std::string::npos);
  }

  void controlTokensReachTheStreamAsTextOnlyWhenAsked() {
    EngineFixture f(synth::tinySpec("qwen3moe"));
    const Tokenizer& tok = f.model->tokenizer();
    int controls = 0;
    for (int32_t id = 0; id < tok.vocabSize(); ++id) {
      if (tok.type(id) != TokenType::Control) continue;
      ++controls;
      QCOMPARE(tok.tokenBytes(id), std::string());
      QCOMPARE(tok.tokenText(id), tok.piece(id));
    }
    QVERIFY(controls > 0);
  }
};

QTEST_GUILESS_MAIN(HarmonyReplyTest)
#include "test_harmony_reply.moc"
