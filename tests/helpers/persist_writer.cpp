// Child process for test_persist_kill: writes a chat the way the app does and
// reports on stdout, after each commit, exactly what it committed, so the test
// can SIGKILL it at any point and check that nothing reported was lost.
//
//   persist_writer <db> <finished_messages> [<chunk_bytes> [<checkpoints>]]
// stdout (texts hex-encoded, so any byte survives); "pending" lines announce a
// write before it starts, the others confirm it after its commit:
//   conv <id>                       the conversation was created
//   pending <role> <hex text>       about to write the next finished message
//   msg <id> <role> <hex text>      a finished user/assistant message
//   reply <id>                      a streaming reply was begun
//   pending-ckpt <hex chunk>        about to checkpoint with this chunk appended
//   ckpt <id> <hex chunk>           a checkpoint: the reply's text is now all chunks so far
// After the messages it checkpoints a growing reply until killed, or `checkpoints`
// times (default 200,000, a cap so a test that fails to kill still ends) and exits 3.
// chunk_bytes > 0 makes every chunk that long (big transactions, so a kill
// lands in the middle of one).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "app/core/app_database.h"
#include "app/core/conversation_store.h"

namespace {

std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() * 2);
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 0xF];
  }
  return out;
}

void report(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);  // the line leaves the process before the next write starts
}

// Varied lengths and the characters that break naive code: quotes, backslashes,
// newlines, multi-byte UTF-8.
std::string messageText(int i) {
  std::string s = "message " + std::to_string(i) +
                  " \xC2\xAB"
                  "quote\xC2\xBB \"q\" \\ \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80\n";
  const int extra = (i * 53) % 700;
  for (int k = 0; static_cast<int>(s.size()) < extra; ++k)
    s += "word" + std::to_string(k) + (k % 9 ? " " : ".\n");
  return s;
}

std::string chunk(int k, int bytes) {
  std::string s = "tok" + std::to_string(k) + (k % 5 ? " \xC3\xA9" : "\n") + " ";
  for (int w = 0; static_cast<int>(s.size()) < bytes; ++w) s += "w" + std::to_string(k * 7 + w) + " ";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: persist_writer <db> <finished_messages> [<chunk_bytes> [<checkpoints>]]\n");
    return 2;
  }
  try {
    moe::AppDatabase adb = moe::AppDatabase::open(argv[1]);
    moe::ConversationStore store(adb);
    const int n = std::atoi(argv[2]);
    const int chunk_bytes = argc >= 4 ? std::atoi(argv[3]) : 0;
    const int checkpoints = argc == 5 ? std::atoi(argv[4]) : 200000;
    const int64_t conv = store.createConversation("kill test", "system prompt", "{}", "/m/x.gguf");
    report("conv " + std::to_string(conv));
    for (int i = 0; i < n; ++i) {
      const std::string text = messageText(i);
      const char* role = i % 2 ? "assistant" : "user";
      report(std::string("pending ") + role + " " + hex(text));
      int64_t id = 0;
      if (i % 2 == 0) {
        id = store.addMessage(conv, moe::Role::User, text);
      } else {
        id = store.beginReply(conv);
        moe::ReplyStats stats;
        stats.completion_tokens = i;
        store.finishReply(id, text, moe::MessageState::Complete, stats);
      }
      report("msg " + std::to_string(id) + " " + role + " " + hex(text));
    }
    const int64_t reply = store.beginReply(conv);
    report("reply " + std::to_string(reply));
    std::string text;
    for (int k = 0; k < checkpoints; ++k) {
      const std::string next = chunk(k, chunk_bytes);
      report("pending-ckpt " + hex(next));
      text += next;
      store.checkpointReply(reply, text);
      report("ckpt " + std::to_string(reply) + " " + hex(next));
    }
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "persist_writer: %s\n", e.what());
    return 1;
  }
}
