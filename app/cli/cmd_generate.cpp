// generate and chat: stream text from the model to the terminal.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>

#include "app/cli/commands.h"
#include "app/cli/model_options.h"
#include "app/cli/offload_options.h"
#include "app/core/model_shape.h"
#include "app/core/reply_reader.h"
#include "inference/tokenizer/chat_template.h"
#include "offload/learned_predictor.h"

namespace moe::cli {
namespace {

std::atomic<bool> g_cancel{false};
extern "C" void onInterrupt(int) { g_cancel.store(true); }

// While it lives, Ctrl-C stops the current reply instead of killing the process;
// afterwards (at chat's prompt) Ctrl-C does what it did before.
class ReplyInterrupts {
 public:
  ReplyInterrupts() {
    g_cancel.store(false);
    previous_ = std::signal(SIGINT, onInterrupt);
  }
  ~ReplyInterrupts() { std::signal(SIGINT, previous_ == SIG_ERR ? SIG_DFL : previous_); }
  ReplyInterrupts(const ReplyInterrupts&) = delete;
  ReplyInterrupts& operator=(const ReplyInterrupts&) = delete;

 private:
  void (*previous_)(int) = SIG_DFL;
};

void printText(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

void printStats(const GenerationStats& st) {
  std::fprintf(stderr,
               "\n\nprefill: %d tokens (%d reused from cache) in %.3f s = %.1f tok/s; TTFT %.3f s\n"
               "decode:  %d tokens generated; %d decode steps in %.3f s = %.1f tok/s; stopped: %s\n",
               st.prompt_tokens, st.reused_tokens, st.prefill_seconds, st.prefillTokensPerSecond(),
               st.ttft_seconds, st.generated_tokens, st.decode_steps, st.decode_seconds,
               st.decodeTokensPerSecond(), stopReasonName(st.reason));
}

std::set<std::string> generateValueOptions() {
  auto v = modelValueOptions();
  auto s = samplingValueOptions();
  v.insert(s.begin(), s.end());
  v.insert({"--prompt", "--max-tokens", "--stop", "--system", "--predictor"});
  auto o = offloadValueOptions();
  v.insert(o.begin(), o.end());
  return v;
}

std::set<std::string> generateFlags() {
  auto f = modelFlags();
  f.insert({"--chat", "--ignore-eos", "--stats", "--verbose", "--no-think"});
  auto o = offloadFlags();
  f.insert(o.begin(), o.end());
  return f;
}

const std::map<std::string, std::string> kAliases = {{"-p", "--prompt"}, {"-n", "--max-tokens"}};

GenerationParams generationParams(const Args& args, const EngineSession& session) {
  GenerationParams p;
  p.max_tokens = args.intOr("--max-tokens", 256);
  if (p.max_tokens < 1) throw UsageError("--max-tokens must be >= 1");
  p.sampler = samplerParams(args);
  p.stop_strings = args.values("--stop");
  // Random weights reach the end token by chance: the random demo runs to the limit.
  p.stop_at_end_token = !(args.flag("--ignore-eos") || session.isRandomDemo());
  return p;
}

// --predictor FILE (a set from `train`): replaces skip-gate under proactive. The
// set is checked against the model's shape (hashing a multi-GB file to compare
// SHA-256s would delay every start).
void attachLearnedPredictor(const std::string& file, SessionOptions& so) {
  if (so.policy != OffloadPolicy::kProactive) throw UsageError("--predictor needs --policy proactive");
  PredictorSet set = PredictorSet::load(file);
  const ModelShape shape = describeModel(so.model_path, so.demo);
  so.predictor_distance = set.distance;
  so.predictor =
      std::make_shared<LearnedPredictor>(std::move(set), shape.config.n_embd, shape.config.n_expert);
}

// The model, the offload policy (--policy ...) with an optional learned predictor
// and, with --verbose, the CPU-versus-copy log.
SessionOptions offloadSessionOptions(const Args& args) {
  SessionOptions so = sessionOptions(args);
  applyOffloadOptions(args, so);
  if (auto file = args.value("--predictor")) attachLearnedPredictor(*file, so);
  if (args.flag("--verbose")) so.on_cpu_decision = printCpuDecision;
  return so;
}

// gpt-oss (harmony), Qwen3.5, MiniMax-M2: the reasoning is printed as a quoted "Thinking" block
// before the answer, as the app shows it (app/core/reply_reader.h).
// --no-think: Qwen3.5 and MiniMax-M2 answer without reasoning (enable_thinking=false).
ChatOptions chatOptions(const Args& args) {
  ChatOptions o;
  o.thinking = !args.flag("--no-think");
  return o;
}

std::string shownText(ReplyReader* reader, std::string_view raw) {
  return reader ? reader->push(raw) : std::string(raw);
}

}  // namespace

int runGenerate(const std::vector<std::string>& argv) {
  const Args args(argv, generateValueOptions(), generateFlags(), kAliases);
  const std::string prompt = args.valueOr("--prompt", "Once upon a time");
  if (prompt.empty()) throw UsageError("empty prompt: give some text with -p");
  EngineSession session(offloadSessionOptions(args));
  auto& model = session.model();
  announceModel(model);
  GenerationParams params = generationParams(args, session);

  const auto& tok = model.tokenizer();
  const bool chat = args.flag("--chat");
  std::vector<int32_t> ids;
  if (chat) {
    std::vector<ChatMessage> msgs;
    if (auto sys = args.value("--system")) msgs.push_back({"system", *sys});
    msgs.push_back({"user", prompt});
    ids = encodeChat(tok, model.chatFamily(), msgs, true, chatOptions(args));
    for (auto& s : chatStopStrings(model.chatFamily())) params.stop_strings.push_back(s);
  } else {
    ids = tok.encode(prompt, tok.addBosDefault(), false);  // a plain prompt is text, markers included
  }
  const auto reader = chat ? replyReaderFor(model.chatFamily(), params, chatOptions(args)) : nullptr;
  GenerationStats st;
  {
    const ReplyInterrupts interrupts;  // before the prompt is shown: Ctrl-C from then on stops the reply
    if (!args.flag("--chat")) printText(prompt);
    st = session.generate(
        ids, params, [&](std::string_view raw) { printText(shownText(reader.get(), raw)); }, &g_cancel);
    if (reader) printText(reader->finish());
  }
  printStats(st);
  if (args.flag("--stats")) printOffloadStats(session.offloadSnapshot(), session);
  return st.reason == StopReason::Cancelled ? 130 : 0;
}

int runChat(const std::vector<std::string>& argv) {
  const Args args(argv, generateValueOptions(), generateFlags(), kAliases);
  EngineSession session(offloadSessionOptions(args));
  auto& model = session.model();
  announceModel(model);
  GenerationParams params = generationParams(args, session);
  for (auto& s : chatStopStrings(model.chatFamily())) params.stop_strings.push_back(s);

  std::vector<ChatMessage> history;
  if (auto sys = args.value("--system")) history.push_back({"system", *sys});
  std::fprintf(stderr, "chat template: %s. Type a message; /reset clears the chat, /exit or EOF quits.\n",
               chatFamilyName(model.chatFamily()));
  std::string line;
  for (;;) {
    std::fprintf(stderr, "\n> ");
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      history.resize(args.value("--system") ? 1 : 0);
      session.generator().reset();
      continue;
    }
    if (line.empty()) continue;
    history.push_back({"user", line});
    // Only the text new since the last reply is tokenised (inference/tokenizer/chat_tokens.h).
    const auto ids = session.chatTokens().encode(model.chatFamily(), history, true, chatOptions(args));
    session.chatTokens().forgetUnused();
    std::string reply;
    GenerationStats st;
    const auto reader = replyReaderFor(model.chatFamily(), params, chatOptions(args));
    auto show = [&](std::string_view s) {
      reply += s;
      printText(s);
    };
    try {
      const ReplyInterrupts interrupts;
      st = session.generate(
          ids, params, [&](std::string_view raw) { show(shownText(reader.get(), raw)); }, &g_cancel);
      if (reader) show(reader->finish());
    } catch (const std::length_error& e) {
      std::fprintf(stderr, "%s\nThe conversation no longer fits the context: /reset to start over.\n",
                   e.what());
      history.pop_back();
      continue;
    }
    history.push_back({"assistant", reply});
    printStats(st);
    if (args.flag("--stats")) printOffloadStats(session.offloadSnapshot(), session);
  }
  return 0;
}

}  // namespace moe::cli
