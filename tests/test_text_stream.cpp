// TextStream: whole UTF-8 characters only, stop strings found across token
// boundaries and never shown, held-back text released at the end.
#include <QtTest>

#include "inference/text_stream.h"

using moe::TextStream;

class TextStreamTest : public QObject {
  Q_OBJECT
 private slots:
  void asciiPassesThrough() {
    TextStream s;
    QCOMPARE(QString::fromStdString(s.push("Hello")), QString("Hello"));
    QCOMPARE(QString::fromStdString(s.push(" world")), QString(" world"));
    QVERIFY(s.finish().empty());
  }
  void splitUtf8IsHeldUntilComplete() {
    TextStream s;
    const std::string euro = "\xE2\x82\xAC";  // U+20AC in three bytes
    QVERIFY(s.push(euro.substr(0, 1)).empty());
    QVERIFY(s.push(euro.substr(1, 1)).empty());
    QCOMPARE(s.push(euro.substr(2)), euro);
    const std::string emoji = "\xF0\x9F\x98\x80";
    QCOMPARE(s.push("a" + emoji.substr(0, 2)), std::string("a"));
    QCOMPARE(s.push(emoji.substr(2)), emoji);
  }
  void incompleteTailBecomesReplacementChar() {
    TextStream s;
    QVERIFY(s.push("x\xE2\x82").size() == 1);
    QCOMPARE(s.finish(), std::string("\xEF\xBF\xBD"));
  }
  void stopStringAcrossTokens() {
    TextStream s({"<|im_end|>"});
    QCOMPARE(s.push("Hi there<|im"), std::string("Hi there"));
    QVERIFY(!s.stopped());
    QCOMPARE(s.push("_end|>ignored"), std::string());
    QVERIFY(s.stopped());
    QCOMPARE(s.matchedStop(), std::string("<|im_end|>"));
    QVERIFY(s.push("more").empty());
  }
  void falseStopPrefixIsReleased() {
    TextStream s({"User:"});
    QCOMPARE(s.push("a Us"), std::string("a "));
    QCOMPARE(s.push("ual day"), std::string("Usual day"));
    QCOMPARE(s.push("Us"), std::string());
    QCOMPARE(s.finish(), std::string("Us"));
    QVERIFY(!s.stopped());
  }
  void earliestOfSeveralStops() {
    TextStream s({"STOP", "\n\n"});
    QCOMPARE(s.push("line\n\nSTOP"), std::string("line"));
    QCOMPARE(s.matchedStop(), std::string("\n\n"));
  }
  void invalidBytesBecomeReplacementChars() {
    QCOMPARE(moe::sanitizeUtf8("a\x80"
                               "b"),
             std::string("a\xEF\xBF\xBD"
                         "b"));                                                        // stray continuation
    QCOMPARE(moe::sanitizeUtf8("\xC0\xAF"), std::string("\xEF\xBF\xBD\xEF\xBF\xBD"));  // overlong '/'
    QCOMPARE(moe::sanitizeUtf8("\xED\xA0\x80").substr(0, 3), std::string("\xEF\xBF\xBD"));  // surrogate
    QCOMPARE(moe::sanitizeUtf8("ok \xE2\x82\xAC"), std::string("ok \xE2\x82\xAC"));
    TextStream s;
    QCOMPARE(s.push("x\xFFy"), std::string("x\xEF\xBF\xBDy"));
  }
  void controlCharactersCannotReachTheTerminal() {
    const std::string rep = "\xEF\xBF\xBD";
    QCOMPARE(moe::sanitizeUtf8("a\x1B[2Jb"), "a" + rep + "[2Jb");  // ESC: clear screen
    QCOMPARE(moe::sanitizeUtf8("\x07\x7F"), rep + rep);            // BEL, DEL
    QCOMPARE(moe::sanitizeUtf8("\xC2\x9B"), rep);                  // C1 CSI
    QCOMPARE(moe::sanitizeUtf8("tab\tnl\ncr\r"), std::string("tab\tnl\ncr\r"));
  }
  void completeUtf8Prefix() {
    QCOMPARE(moe::completeUtf8Prefix(""), size_t(0));
    QCOMPARE(moe::completeUtf8Prefix("ab\xC3"), size_t(2));
    QCOMPARE(moe::completeUtf8Prefix("ab\xC3\xA9"), size_t(4));
  }
};

QTEST_APPLESS_MAIN(TextStreamTest)
#include "test_text_stream.moc"
