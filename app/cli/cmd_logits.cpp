// logits: the raw logits of every position, for diffing against other implementations.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "app/cli/commands.h"
#include "app/cli/model_options.h"

namespace moe::cli {
namespace {

std::vector<int32_t> parseTokenList(const std::string& s) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end || v < 0 || v > (1L << 30))
      throw UsageError("--tokens: '" + item + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

}  // namespace

int runLogits(const std::vector<std::string>& argv) {
  auto vo = modelValueOptions();
  vo.insert({"--tokens", "--text", "--dump-hidden"});
  const Args args(argv, vo, modelFlags());
  EngineSession session(sessionOptions(args));
  std::vector<int32_t> ids;
  if (auto t = args.value("--tokens")) {
    ids = parseTokenList(*t);
  } else if (auto text = args.value("--text")) {
    const auto& tok = session.model().tokenizer();
    ids = tok.encode(*text, tok.addBosDefault(), false);
  } else {
    throw UsageError("give --tokens 1,2,3 (or --text STRING)");
  }
  if (static_cast<int>(ids.size()) > session.transformer().nCtx())
    throw std::length_error(std::to_string(ids.size()) + " tokens exceed the context of " +
                            std::to_string(session.transformer().nCtx()) + " (raise --ctx)");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> dump(nullptr, &std::fclose);
  if (auto path = args.value("--dump-hidden")) {
    dump.reset(std::fopen(path->c_str(), "w"));
    if (!dump) throw std::runtime_error("cannot write " + *path);
    std::fprintf(dump.get(),
                 "# hidden_0 = embeddings, hidden_<L+1> = residual after layer L; one line per position\n");
    session.transformer().setHiddenObserver([&](const HiddenEvent& ev) {
      const size_t width = ev.values.size() / ev.n_tokens;
      for (int t = 0; t < ev.n_tokens; ++t) {
        std::fprintf(dump.get(), "hidden_%d pos %d", ev.index, ev.first_pos + t);
        for (size_t i = 0; i < width; ++i) std::fprintf(dump.get(), " %.9g", ev.values[t * width + i]);
        std::fputc('\n', dump.get());
      }
    });
  }
  std::vector<float> logits;
  session.transformer().forward(ids, logits, /*all_logits=*/true);
  const size_t nv = session.model().config().n_vocab;
  std::string line;
  for (size_t p = 0; p < ids.size(); ++p) {
    line.clear();
    char buf[32];
    for (size_t v = 0; v < nv; ++v) {
      std::snprintf(buf, sizeof buf, v ? " %.9g" : "%.9g", logits[p * nv + v]);
      line += buf;
    }
    std::printf("%s\n", line.c_str());
  }
  if (dump) {
    const bool written = std::fflush(dump.get()) == 0 && !std::ferror(dump.get());
    const int write_errno = errno;
    if (std::fclose(dump.release()) != 0 || !written)
      throw std::runtime_error("cannot write " + *args.value("--dump-hidden") + ": " +
                               std::strerror(written ? errno : write_errno));
  }
  return 0;
}

}  // namespace moe::cli
