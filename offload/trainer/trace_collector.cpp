#include "offload/trainer/trace_collector.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "inference/transformer.h"
#include "offload/trainer/trace_recorder.h"

namespace moe {
namespace {

int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }

}  // namespace

TraceHeader traceHeaderFor(const Model& model, const std::string& sha256, const std::string& source) {
  const ModelConfig& c = model.config();
  TraceHeader h;
  h.n_layer = c.n_layer;
  h.n_embd = c.n_embd;
  h.n_expert = c.n_expert;
  h.k = c.n_expert_used;
  for (int l = 0; l < c.n_layer; ++l)
    if (c.isMoeLayer(l)) h.moe_layers.push_back(l);
  h.model_sha256 = sha256;
  h.model_name = c.model_name;
  h.model_source = source;
  return h;
}

TraceRunResult collectTraces(const Model& model, Backend& backend, ExpertSource& experts,
                             const std::vector<std::string>& prompts, TraceWriter& writer,
                             const TraceOptions& options,
                             const std::function<void(const TraceProgress&)>& on_progress,
                             const std::atomic<bool>* cancel) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const ModelConfig& cfg = model.config();
  const int max_prompt =
      std::max(1, std::min(options.max_prompt_tokens,
                           (cfg.n_ctx_train > 0 ? cfg.n_ctx_train : 4096) - options.max_new_tokens - 1));
  TraceRecorder recorder(experts);
  Transformer tf(model, backend, recorder, std::max(2, max_prompt + options.max_new_tokens + 1));
  tf.setCancelFlag(cancel);
  tf.setBatchObserver([&](const BatchEvent& ev) { recorder.onBatch(ev); });

  TraceRunResult result;
  TraceProgress progress;
  progress.prompts_total = int(prompts.size());
  std::vector<float> logits;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int index = int(i);
    if (writer.completedPrompts().count(index)) {
      ++result.prompts_skipped;
      ++progress.prompts_done;
      continue;
    }
    if (cancel && cancel->load()) {
      result.cancelled = true;
      break;
    }
    const auto& tok = model.tokenizer();
    std::vector<int32_t> ids = tok.encode(prompts[i], tok.addBosDefault(), false);
    if (int(ids.size()) > max_prompt) ids.resize(max_prompt);
    if (ids.empty()) continue;
    tf.truncate(0);
    recorder.start(writer, index);
    try {
      tf.forward(ids, logits);  // in batches of up to Transformer::kMaxBatch
      int pos = int(ids.size());
      for (int g = 0; g < options.max_new_tokens && pos < tf.nCtx(); ++g) {
        const int32_t next = argmax(logits);
        if (tok.isEndOfGeneration(next)) break;
        tf.forward({&next, 1}, logits);
        ++pos;
      }
      if (!recorder.stop()) throw std::runtime_error("trace: " + recorder.error());
      writer.endPrompt(index);
      result.tokens += pos;
      progress.tokens_done += pos;
    } catch (const Cancelled&) {
      recorder.stop();
      result.cancelled = true;  // the partial prompt has no end marker: a resume redoes it
      break;
    }
    ++result.prompts_traced;
    ++progress.prompts_done;
    progress.seconds = elapsed();
    const int left = progress.prompts_total - progress.prompts_done;
    progress.eta_seconds = progress.seconds / result.prompts_traced * left;
    if (on_progress) on_progress(progress);
  }
  result.seconds = elapsed();
  return result;
}

std::vector<std::string> parsePromptLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::string p;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == 'n') {
        p += '\n';
        ++i;
      } else {
        p += line[i];
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::string> promptsFromFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read the prompt file " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  auto prompts = parsePromptLines(ss.str());
  if (prompts.empty()) throw std::runtime_error(path + " holds no prompts (one per line)");
  return prompts;
}

}  // namespace moe
