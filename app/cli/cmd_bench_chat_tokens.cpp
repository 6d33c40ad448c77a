// bench --chat-tokens: what the tokenizer is given per reply over a conversation of
// --turns turns with a model file's tokenizer and chat template, the whole history
// encoded every time (encodeChat, once more per message left out to fit --budget)
// against the kept runs (ChatTokenCache, what the app and `chat` use). Per reply: the
// runs of text and their bytes passed to the tokenizer, and the time of each way
// (microseconds, one pass; a rough figure). The ids are checked equal on the way.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/core/demo_model.h"
#include "inference/tokenizer/chat_tokens.h"
#include "models/gguf.h"

namespace moe::cli {
namespace {

const char* const kWords[] = {"the",  "farmer", "walked", "along",   "river", "with", "his",   "old",
                              "dog",  "and",    "talked", "about",   "the",   "rain", "in",    "spring",
                              "when", "a",      "stone",  "bridge,", "fell",  "into", "water", "slowly."};

// Deterministic English-like text of about `bytes` bytes.
std::string text(int seed, size_t bytes) {
  std::string out;
  for (int i = 0; out.size() < bytes; ++i) {
    if (!out.empty()) out += ' ';
    out += kWords[(seed * 7 + i * 5 + i / 3) % (sizeof kWords / sizeof kWords[0])];
  }
  return out;
}

struct Way {
  uint64_t calls = 0, runs = 0, bytes = 0;
  double us = 0;
};

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

// Today's loop before the cache (LocalChatEngine's): encodeChat over the whole
// history, and again after each message left out.
std::vector<int32_t> wholeHistory(const Tokenizer& tok, ChatFamily family, std::vector<ChatMessage> kept,
                                  size_t budget, Way* way) {
  for (;;) {
    for (const PromptRun& r : tok.runs(chatPrompt(family, kept, true).pieces()))
      if (r.marker < 0) ++way->runs, way->bytes += r.text.size();
    ++way->calls;
    auto ids = encodeChat(tok, family, kept, true);
    if (ids.size() <= budget) return ids;
    const size_t first = (!kept.empty() && kept.front().role == "system") ? 1 : 0;
    if (kept.size() - first <= 1) return ids;
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(first));
  }
}

}  // namespace

int runBenchChatTokens(const std::vector<std::string>& argv) {
  const Args args(argv, {"--turns", "--budget", "--message-bytes", "--reply-bytes"},
                  {"--chat-tokens", "--json"});
  const int turns = args.intOr("--turns", 20);
  const int budget_arg = args.intOr("--budget", 0);  // prompt tokens; 0: no limit
  const int message_bytes = args.intOr("--message-bytes", 200),
            reply_bytes = args.intOr("--reply-bytes", 800);
  if (turns < 1 || budget_arg < 0 || message_bytes < 1 || reply_bytes < 1)
    throw UsageError("--turns, --message-bytes and --reply-bytes must be >= 1, --budget >= 0");
  const std::string path =
      args.positionals().empty() ? requireTrainedDemoModel() : args.positionals().front();
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  const auto tok = Tokenizer::fromGguf(file);
  const ChatFamily family = chatFamilyFor(file);
  const size_t budget = budget_arg > 0 ? size_t(budget_arg) : SIZE_MAX;

  ChatTokenCache cache(*tok);
  std::vector<ChatMessage> chat = {{"system", "You are a helpful assistant who tells short stories."}};
  Way before_total, after_total;
  const bool json = args.flag("--json");
  if (!json)
    std::printf("%s, chat template %s, %d turns%s\n%5s %8s | %-31s | %-31s\n", path.c_str(),
                chatFamilyName(family), turns,
                budget_arg ? (", budget " + std::to_string(budget_arg)).c_str() : "", "", "",
                "the whole history encoded", "the runs kept (ChatTokenCache)");
  if (!json)
    std::printf("%5s %8s | %6s %6s %9s %9s | %6s %6s %9s %9s\n", "turn", "tokens", "calls", "runs", "bytes",
                "us", "calls", "runs", "bytes", "us");
  for (int turn = 0; turn < turns; ++turn) {
    chat.push_back({"user", text(turn, size_t(message_bytes))});
    Way before, after;
    auto t0 = std::chrono::steady_clock::now();
    const auto want = wholeHistory(*tok, family, chat, budget, &before);
    before.us = since(t0);

    const ChatTokenCache::Counters c0 = cache.counters();
    t0 = std::chrono::steady_clock::now();
    const ChatTokenCache::Fitted got = cache.fit(family, chat, {}, budget);
    cache.forgetUnused();
    after.us = since(t0);
    after.calls = 1;
    after.runs = cache.counters().runs_encoded - c0.runs_encoded;
    after.bytes = cache.counters().bytes_encoded - c0.bytes_encoded;
    if (got.ids != want) throw std::runtime_error("turn " + std::to_string(turn) + ": the ids differ");

    for (auto [total, way] : {std::pair{&before_total, &before}, std::pair{&after_total, &after}}) {
      total->calls += way->calls, total->runs += way->runs, total->bytes += way->bytes, total->us += way->us;
    }
    if (json)
      std::printf(
          "{\"turn\": %d, \"tokens\": %zu, \"before\": {\"calls\": %llu, \"runs\": %llu, \"bytes\": %llu, "
          "\"us\": "
          "%.1f}, \"after\": {\"runs\": %llu, \"bytes\": %llu, \"us\": %.1f}}\n",
          turn, got.ids.size(), (unsigned long long)before.calls, (unsigned long long)before.runs,
          (unsigned long long)before.bytes, before.us, (unsigned long long)after.runs,
          (unsigned long long)after.bytes, after.us);
    else
      std::printf("%5d %8zu | %6llu %6llu %9llu %9.0f | %6llu %6llu %9llu %9.0f\n", turn, got.ids.size(),
                  (unsigned long long)before.calls, (unsigned long long)before.runs,
                  (unsigned long long)before.bytes, before.us, (unsigned long long)after.calls,
                  (unsigned long long)after.runs, (unsigned long long)after.bytes, after.us);
    chat.push_back({"assistant", text(turn + 1000, size_t(reply_bytes))});
  }
  if (!json)
    std::printf("%5s %8s | %6llu %6llu %9llu %9.0f | %6llu %6llu %9llu %9.0f\n", "all", "",
                (unsigned long long)before_total.calls, (unsigned long long)before_total.runs,
                (unsigned long long)before_total.bytes, before_total.us,
                (unsigned long long)after_total.calls, (unsigned long long)after_total.runs,
                (unsigned long long)after_total.bytes, after_total.us);
  return 0;
}

}  // namespace moe::cli
