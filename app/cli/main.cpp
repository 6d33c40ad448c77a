// moechat-cli: the moechat engine without a window.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "inference/generator.h"

namespace {

struct CommandHelp {
  const char* name;
  const char* synopsis;  // the lines under "commands:" in the overall usage
  bool model_options;    // takes the model, offload and sampling options below
};

const CommandHelp kCommands[] = {
    {"info",
     R"(  info (FILE | --demo | --demo-random | --preset P [--quant T]) [--vram GB|auto] [--ctx N] [--backend B]
      architecture, sizes, parameters, expert bytes, and the plan that loads at a VRAM
      budget (auto: what the device of --backend has free, less a 1 GiB margin);
      --preset describes a full-size shape (gen-model's presets) in type T (q8_0)
      without writing its weights
)",
     true},
    {"generate",
     R"(  generate (FILE | --demo | --demo-random) [-p PROMPT] [-n N] [--chat [--no-think]] [--stop S]... [sampling]
        [offload]
      stream a completion to stdout; tokens/s at the end (stderr)
)",
     true},
    {"chat",
     R"(  chat (FILE | --demo | --demo-random) [--system TEXT] [--no-think] [-n N] [sampling] [offload]
      interactive chat on stdin/stdout with the model's chat template; a reasoning
      model's reasoning is shown as a quoted Thinking block before its answer;
      --no-think: Qwen3.5 and MiniMax-M2 answer without reasoning
)",
     true},
    {"logits", R"(  logits (FILE | --demo | --demo-random) --tokens 1,2,3 [--dump-hidden FILE]
      raw logits of every position, one line per position; optionally the
      hidden state after every layer, for diffing layer by layer
)",
     true},
    {"bench",
     R"(  bench (FILE | --demo | --demo-random | --preset P [--quant Q] [--cache-dir D]) [--cache-share S | --cache-mb M]
        [--prompt-tokens N | --prompt TEXT] [--decode-tokens N] [--link-gbps G] [--virtual-link]
        [--policies a,b,...] [--ablate] [--no-<switch>]... [--predictor P] [--cpu-expert-ms A,B]
        [--routing-trace TRACE [--trace-start N] | --routing realistic] [--history] [--eviction R[,R...]]
        [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--seed S]
        [--json] [--verbose]
      every caching policy side by side at one cache budget (CPU compute, simulated
      link, paced unless --virtual-link; --backend cuda: the GPU and its real link);
      --cpu-expert-ms fixes the CPU cost of one expert (1 and 8 tokens) instead of
      measuring it, so the CPU rule decides the same way in every run;
      --ablate adds proactive minus each switch;
      --preset generates (once, in the cache folder) a full-size synthetic model;
      --predictor adds a proactive-learned row with a trained predictor (`train`);
      --routing-trace: each MoE layer computes the experts a recorded trace of a real
      model chose (`routing-trace`; the router still runs), for real routing on a
      model of the trace's shape; every run is set beside Belady's clairvoyant cache;
      --routing realistic: routing drawn to follow gpt-oss-20b's routing profile in the
      model's shape (what a file made with `gen-model --routing realistic` does);
      --history adds a proactive-history row: prefetching predicted from routing
      history alone (layer-to-layer and token-to-token, learned as it runs);
      --eviction runs every caching row with each rule named (layer-lru, shared-lru,
      layer-frequency, shared-frequency, shared-reuse); with several, a row's name ends
      in /rule;
      decodes greedily unless a sampling option is given (--temp 0.8: the app's default
      chain), every row with the same seed
  bench --kernels [--threads N] [--isa portable|avx2|avx512-vnni] [--types Q8_0,Q4_K,...]
        [--rows R] [--cols C] [--batch B] [--set-mb M] [--bw-mb M] [--no-repack] [--json]
        [--backend cpu|cuda]
      the matmul kernels alone: decode GB/s against the read bandwidth measured
      in the same run (cuda: the card's copy rate), prefill multiply-adds/s; on
      the CPU each beside the float-activation path
  bench --sampler [--vocab N] [--calls N] [--json]
      the token sampler alone (greedy, the default chain, top-p alone) per token,
      beside the time to copy the logits once
  bench --chat-tokens [FILE] [--turns N] [--budget TOKENS] [--message-bytes N]
        [--reply-bytes N] [--json]
      the tokenizer's work per reply over a conversation (FILE's tokenizer and chat
      template; the trained demo without one): the whole history encoded each
      time against the runs of text kept from the last reply
)",
     true},
    {"gen-model",
     R"(  gen-model (--arch A | --preset P | --demo) -o FILE [--seed N] [--layers N] [--experts N]
        [--experts-used K] [--expert-type T] [--down-type T] [--weight-type T]
        [--routing realistic|router]
      write a synthetic GGUF MoE model (random weights; --demo: the --demo-random model);
      --layers, --experts, --experts-used change the shape (a tiny model of a real
      model's routing shape, for `bench --routing-trace`); --routing realistic: the
      file routes as a real model does (gpt-oss-20b's routing profile in its shape)
      instead of its random router's near-uniform choices
)",
     false},
    {"trace",
     R"(  trace (FILE | --demo | --demo-random) [--prompts FILE] [-o TRACE] [--max-tokens N] [--limit N]
      record per token and MoE layer the layer input and the chosen experts
      (built-in prompt set unless --prompts; resumes an existing TRACE)
)",
     true},
    {"train", R"(  train TRACE [--distance D] [--hidden H] [--epochs N] [--seed S] -o PREDICTOR
      train the learned expert predictor (one MLP per layer) from a trace
)",
     false},
    {"eval-predictor", R"(  eval-predictor (TRACE PREDICTOR [--model FILE] | --demo | --demo-random) [--json]
        [--engine [--cache-share S] [--link-gbps G]]
      learned predictor vs skip-gate, token-based, previous-token, popularity on
      the held-out prompts; --engine adds hit rate / GoodPred in the offload engine;
      --demo / --demo-random alone: trace, train and evaluate on that demo model
)",
     true},
    {"routing-trace",
     R"(  routing-trace convert IN... -o OUT [--experts N] [--max-tokens N] [--max-sequences N]
        [--source TEXT]
  routing-trace stats TRACE [--budgets 0.25,0.5,0.75] [--max-tokens N] [--json]
  routing-trace profile TRACE [-o FILE] [--max-tokens N] [--source TEXT]
  routing-trace synthesize -o OUT --layers N --experts N --top-k K [--tokens N] [--seed S]
        [--profile FILE]
      recorded routing of a real model (per token and layer, the experts chosen):
      convert JSON generations (a file, or a folder of *_examples.json) or compact
      files into one compact file, for `bench --routing-trace`; stats: how sticky
      the routing is, and LRU and Belady hit rates at each budget beside uniform routing;
      profile: the figures realistic routing follows (popularity, stickiness, a reply's
      working set, layer-to-layer partners); synthesize: routing of any shape drawn to
      follow a profile (the shipped gpt-oss-20b one unless --profile)
)",
     false},
};

const char* kModelOptions = R"(
model options:  --ctx N (context, default 2048)  --threads N (default: physical cores)
                --backend cpu|cuda|auto  --kv f32|f16 (CPU KV cache; default f32, f16 halves it)
offload:        --policy resident|reactive-lru|static|proactive|cpu-experts
                --cache-share S (of the routed experts, default 0.5) | --cache-mb M
                --mapped-decode (GPU: decode reads missed experts in place from pinned RAM;
                  no MoE layer waits for the host to learn its routing)
                --eviction layer-lru|shared-lru|layer-frequency|shared-frequency|shared-reuse
                  (which cached expert a copy replaces; default layer-lru)
                --link-gbps G (simulated link) [--paced]  --stats (counters at the end)
                --verbose (each CPU-vs-copy decision)  proactive switches: --no-prefetch
                --no-chunking --no-preemption --no-reordering --no-cpu-fallback --no-streaming
                --predictor P (generate/chat, proactive: a trained set from `train` replaces skip-gate)
sampling:       --temp T (0 = greedy)  --top-k K  --top-p P  --min-p P
                --repeat-penalty R  --repeat-last-n N  --seed S
)";

const char* kDemoNote = R"(--demo: the demo model shipped with moechat (share/moechat/moechat-demo.gguf), a
15 MB MoE trained on the Brown corpus: simple English, 4 layers of 8 experts.
--demo-random: a tiny model with random weights, built into the program: it shows the
machinery (routing, caching, speed), not language. Real models: see README.md.
)";

std::string overallUsage() {
  std::string s = "usage: moechat-cli COMMAND [options]\n       moechat-cli COMMAND --help\n\ncommands:\n";
  for (const auto& c : kCommands) s += c.synopsis;
  return s + kModelOptions + kDemoNote;
}

const CommandHelp* findCommand(const std::string& name) {
  for (const auto& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

std::string commandUsage(const CommandHelp& c) {
  std::string s = std::string("usage: moechat-cli ") + c.name + " ...\n\n" + c.synopsis;
  if (c.model_options) s += kModelOptions;
  return s + kDemoNote;
}

bool asksForHelp(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

int runCommand(const std::string& command, const std::vector<std::string>& args) {
  if (command == "info") return moe::cli::runInfo(args);
  if (command == "generate") return moe::cli::runGenerate(args);
  if (command == "chat") return moe::cli::runChat(args);
  if (command == "logits") return moe::cli::runLogits(args);
  if (command == "gen-model") return moe::cli::runGenModel(args);
  if (command == "bench") return moe::cli::runBench(args);
  if (command == "trace") return moe::cli::runTrace(args);
  if (command == "train") return moe::cli::runTrain(args);
  if (command == "eval-predictor") return moe::cli::runEvalPredictor(args);
  if (command == "routing-trace") return moe::cli::runRoutingTrace(args);
  std::fprintf(stderr, "moechat-cli: unknown command '%s'\n\n%s", command.c_str(), overallUsage().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(overallUsage().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (const CommandHelp* c = findCommand(command); c && asksForHelp(args)) {
    std::fputs(commandUsage(*c).c_str(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  try {
    const int rc = runCommand(command, args);
    // Output lost to a full disk or a closed pipe is a failure, not a success.
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "moechat-cli %s: error: cannot write standard output: %s\n", command.c_str(),
                   std::strerror(errno));
      return 1;
    }
    return rc;
  } catch (const moe::cli::UsageError& e) {
    std::fprintf(stderr, "moechat-cli %s: %s\n(see moechat-cli %s --help)\n", command.c_str(), e.what(),
                 command.c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "moechat-cli %s: out of memory\n", command.c_str());
    return 1;
  } catch (const moe::ContextOverflow& e) {
    std::fprintf(stderr, "moechat-cli %s: error: %s; raise it with --ctx N\n", command.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moechat-cli %s: error: %s\n", command.c_str(), e.what());
    return 1;
  }
}
