// TextStream: whole UTF-8 characters only, stop strings found across token
// boundaries and never shown, held-back text released at the end.
#include <gtest/gtest.h>

#include <string>

#include "inference/text_stream.h"

using moe::TextStream;

TEST(TextStream, asciiPassesThrough) {
  TextStream s;
  ASSERT_EQ(s.push("Hello"), std::string("Hello"));
  ASSERT_EQ(s.push(" world"), std::string(" world"));
  ASSERT_TRUE(s.finish().empty());
}
TEST(TextStream, splitUtf8IsHeldUntilComplete) {
  TextStream s;
  const std::string euro = "\xE2\x82\xAC";  // U+20AC in three bytes
  ASSERT_TRUE(s.push(euro.substr(0, 1)).empty());
  ASSERT_TRUE(s.push(euro.substr(1, 1)).empty());
  ASSERT_EQ(s.push(euro.substr(2)), euro);
  const std::string emoji = "\xF0\x9F\x98\x80";
  ASSERT_EQ(s.push("a" + emoji.substr(0, 2)), std::string("a"));
  ASSERT_EQ(s.push(emoji.substr(2)), emoji);
}
TEST(TextStream, incompleteTailBecomesReplacementChar) {
  TextStream s;
  ASSERT_TRUE(s.push("x\xE2\x82").size() == 1);
  ASSERT_EQ(s.finish(), std::string("\xEF\xBF\xBD"));
}
TEST(TextStream, stopStringAcrossTokens) {
  TextStream s({"<|im_end|>"});
  ASSERT_EQ(s.push("Hi there<|im"), std::string("Hi there"));
  ASSERT_TRUE(!s.stopped());
  ASSERT_EQ(s.push("_end|>ignored"), std::string());
  ASSERT_TRUE(s.stopped());
  ASSERT_EQ(s.matchedStop(), std::string("<|im_end|>"));
  ASSERT_TRUE(s.push("more").empty());
}
TEST(TextStream, falseStopPrefixIsReleased) {
  TextStream s({"User:"});
  ASSERT_EQ(s.push("a Us"), std::string("a "));
  ASSERT_EQ(s.push("ual day"), std::string("Usual day"));
  ASSERT_EQ(s.push("Us"), std::string());
  ASSERT_EQ(s.finish(), std::string("Us"));
  ASSERT_TRUE(!s.stopped());
}
TEST(TextStream, earliestOfSeveralStops) {
  TextStream s({"STOP", "\n\n"});
  ASSERT_EQ(s.push("line\n\nSTOP"), std::string("line"));
  ASSERT_EQ(s.matchedStop(), std::string("\n\n"));
}
TEST(TextStream, invalidBytesBecomeReplacementChars) {
  ASSERT_EQ(moe::sanitizeUtf8("a\x80"
                              "b"),
            std::string("a\xEF\xBF\xBD"
                        "b"));                                                        // stray continuation
  ASSERT_EQ(moe::sanitizeUtf8("\xC0\xAF"), std::string("\xEF\xBF\xBD\xEF\xBF\xBD"));  // overlong '/'
  ASSERT_EQ(moe::sanitizeUtf8("\xED\xA0\x80").substr(0, 3), std::string("\xEF\xBF\xBD"));  // surrogate
  ASSERT_EQ(moe::sanitizeUtf8("ok \xE2\x82\xAC"), std::string("ok \xE2\x82\xAC"));
  TextStream s;
  ASSERT_EQ(s.push("x\xFFy"), std::string("x\xEF\xBF\xBDy"));
}
TEST(TextStream, controlCharactersCannotReachTheTerminal) {
  const std::string rep = "\xEF\xBF\xBD";
  ASSERT_EQ(moe::sanitizeUtf8("a\x1B[2Jb"), "a" + rep + "[2Jb");  // ESC: clear screen
  ASSERT_EQ(moe::sanitizeUtf8("\x07\x7F"), rep + rep);            // BEL, DEL
  ASSERT_EQ(moe::sanitizeUtf8("\xC2\x9B"), rep);                  // C1 CSI
  ASSERT_EQ(moe::sanitizeUtf8("tab\tnl\ncr\r"), std::string("tab\tnl\ncr\r"));
}
TEST(TextStream, completeUtf8Prefix) {
  ASSERT_EQ(moe::completeUtf8Prefix(""), size_t(0));
  ASSERT_EQ(moe::completeUtf8Prefix("ab\xC3"), size_t(2));
  ASSERT_EQ(moe::completeUtf8Prefix("ab\xC3\xA9"), size_t(4));
}
