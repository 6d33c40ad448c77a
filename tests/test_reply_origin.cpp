// What wrote each reply (schema v5): the model file's name and SHA-256 and the
// sampling with its seed, stored with the reply, kept by a duplicate, and carried by
// both exports together with every alternative reply of a turn, marked.
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include "app/core/app_database.h"
#include "app/core/chat_export.h"
#include "app/core/conversation_store.h"

using moe::AppDatabase;
using moe::ConversationStore;
using moe::MessageState;
using moe::ReplyOrigin;
using moe::Role;

class ReplyOriginTest : public QObject {
  Q_OBJECT

 private slots:
  void repliesKeepWhatWroteThem() {
    QTemporaryDir dir;
    AppDatabase db = AppDatabase::open(dir.filePath("moechat.db").toStdString());
    ConversationStore store(db);
    const int64_t conv = store.createConversation("Origins");
    store.addMessage(conv, Role::User, "question");
    const ReplyOrigin first{"olmoe-q4_k.gguf", std::string(64, 'a'), R"({"temperature":0.8,"seed":"7"})"};
    const ReplyOrigin second{"qwen3-30b.gguf", std::string(64, 'b'), R"({"temperature":0.2,"seed":"9"})"};
    const int64_t a = store.beginReply(conv, first);
    QVERIFY(store.finishReply(a, "first answer", MessageState::Complete, {}));
    const int64_t b = store.beginAlternative(a, second);
    QVERIFY(store.finishReply(b, "second answer", MessageState::Complete, {}));

    const auto ma = store.message(a), mb = store.message(b);
    QVERIFY(ma && mb);
    QCOMPARE(ma->origin.model_name, first.model_name);
    QCOMPARE(ma->origin.model_sha256, first.model_sha256);
    QCOMPARE(ma->origin.sampling_json, first.sampling_json);
    QCOMPARE(mb->origin.model_name, second.model_name);
    QVERIFY(store.messages(conv).front().origin.empty());  // the user's message has none

    // The chat shows the second reply; the export carries both, in order, marked.
    QCOMPARE(store.messages(conv).size(), size_t(2));
    const auto all = store.messagesWithAlternatives(conv);
    QCOMPARE(all.size(), size_t(3));
    QCOMPARE(all[1].id, a);
    QCOMPARE(all[2].id, b);
    const auto c = *store.get(conv);

    const QJsonObject root =
        QJsonDocument::fromJson(QByteArray::fromStdString(moe::conversationToJson(c, all))).object();
    QCOMPARE(root["version"].toInt(), 2);
    const QJsonArray msgs = root["messages"].toArray();
    QCOMPARE(msgs.size(), qsizetype(3));
    const QJsonObject ja = msgs[1].toObject(), jb = msgs[2].toObject();
    QCOMPARE(ja["shown"].toBool(), false);
    QCOMPARE(jb["shown"].toBool(), true);
    QCOMPARE(ja["alternative"].toInt(), 1);
    QCOMPARE(jb["alternative"].toInt(), 2);
    QCOMPARE(jb["alternatives"].toInt(), 2);
    QCOMPARE(ja["turn"].toInteger(), jb["turn"].toInteger());
    QCOMPARE(ja["model_name"].toString(), QString("olmoe-q4_k.gguf"));
    QCOMPARE(jb["model_sha256"].toString(), QString(64, 'b'));
    QCOMPARE(jb["sampling_json"].toString(), QString::fromStdString(second.sampling_json));
    QVERIFY(!msgs[0].toObject().contains("model_name"));  // user messages carry none

    const std::string md = moe::conversationToMarkdown(c, all);
    const size_t at_first = md.find("## Assistant (reply 1 of 2)\n\nfirst answer");
    const size_t at_second = md.find("## Assistant (reply 2 of 2, the one the chat shows)\n\nsecond answer");
    QVERIFY2(at_first != std::string::npos && at_second != std::string::npos && at_first < at_second,
             md.c_str());
    QVERIFY2(md.find("*Written by model `olmoe-q4_k.gguf`, SHA-256 `aaaaaaaaaaaaaaaa…`, sampling "
                     "`{\"temperature\":0.8,\"seed\":\"7\"}`*") != std::string::npos,
             md.c_str());

    // A duplicate keeps what wrote the reply it copies.
    const int64_t copy = store.duplicate(conv);
    const auto copied = store.messages(copy);
    QCOMPARE(copied.size(), size_t(2));
    QCOMPARE(copied[1].origin.model_name, second.model_name);
    QCOMPARE(copied[1].origin.sampling_json, second.sampling_json);
  }
};

QTEST_GUILESS_MAIN(ReplyOriginTest)
#include "test_reply_origin.moc"
