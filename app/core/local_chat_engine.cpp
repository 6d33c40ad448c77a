#include "app/core/local_chat_engine.h"

#include "app/core/reply_reader.h"

#include <algorithm>
#include <filesystem>

#include "app/core/engine_session.h"
#include "app/core/fit_words.h"
#include "app/core/model_predictor.h"
#include "app/core/model_shape.h"
#include "inference/backend_factory.h"
#include "inference/tokenizer/tokenizer.h"
#include "offload/learned_predictor.h"
#include "offload/transfer_worker.h"

namespace moe {

LocalChatEngine::LocalChatEngine() = default;
LocalChatEngine::~LocalChatEngine() = default;

void LocalChatEngine::attachPredictor(const EngineLoadOptions& opts, SessionOptions* so, std::string* note) {
  if (!opts.predictor_set || so->policy != OffloadPolicy::kProactive) return;
  try {
    const ModelShape shape = describeModel(opts.model_path, opts.demo, opts.demo_model);
    so->predictor =
        std::make_shared<LearnedPredictor>(*opts.predictor_set, shape.config.n_embd, shape.config.n_expert);
    so->predictor_distance = opts.predictor_set->distance;
    *note = "; learned predictor (distance " + std::to_string(opts.predictor_set->distance) + ")";
  } catch (const std::exception& e) {
    *note = std::string("; stored predictor not used: ") + e.what();
  }
}

SessionOptions LocalChatEngine::sessionOptionsFor(const EngineLoadOptions& opts, std::string* note) {
  const DeviceChoice device = parseDeviceChoice(opts.backend);
  std::string why_not_gpu;
  const bool gpu = device != DeviceChoice::kCpu && cudaDeviceAvailable(&why_not_gpu);
  if (device == DeviceChoice::kCuda && !gpu) throw std::runtime_error("no usable GPU: " + why_not_gpu);
  SessionOptions so;
  so.model_path = opts.model_path;
  so.demo = opts.demo;
  so.demo_model = opts.demo_model;
  so.n_ctx = opts.n_ctx;
  so.threads = opts.threads;
  so.policy = parsePolicy(opts.policy);
  so.device = gpu ? DeviceChoice::kCuda : DeviceChoice::kCpu;
  // The session resolves it with the loaded model's shape (app/core/load_plan.h).
  so.budget = BudgetSetting::fromAppSetting(opts.vram_budget_bytes);
  if (!gpu) {
    // The model computes on the CPU, so an expert cache (a simulation: the demo under
    // auto, or an explicit budget) is host memory behind a host->device link simulated
    // at kSimulatedLinkBytesPerSecond (paced, so waiting for a copy costs real time as
    // it would over PCIe).
    so.link.bytes_per_second = kSimulatedLinkBytesPerSecond;
    so.link.paced = true;
  }
  note->clear();
  attachPredictor(opts, &so, note);
  return so;
}

LoadedModelInfo LocalChatEngine::load(const EngineLoadOptions& opts, const LoadProgress& progress) {
  loaded_ = false;
  {
    std::lock_guard lock(session_mu_);
    session_.reset();  // frees the old model before the new one maps
  }
  if (progress) progress(0.0, "opening the model file");
  load_opts_ = opts;
  std::string predictor_note;
  const SessionOptions so = sessionOptionsFor(opts, &predictor_note);
  auto session = std::make_unique<EngineSession>(so);
  const LoadPlan& plan = session->plan();
  std::string note = planNote(plan);
  if (plan.simulated && plan.cache_slots > 0)
    note += ", simulated " + std::to_string(int(kSimulatedLinkBytesPerSecond / 1e9)) + " GB/s link";
  if (session->policy() == OffloadPolicy::kProactive) note += predictor_note;
  if (progress) progress(1.0, "ready");

  const auto& cfg = session->model().config();
  random_demo_ = opts.demo && opts.demo_model == DemoModel::kRandom;
  model_sha256_ = !opts.model_sha256.empty() ? opts.model_sha256
                  : opts.demo                ? demoModelSha256(opts.demo_model)
                                             : std::string();
  session->setTraceFile(model_sha256_.empty() ? std::string() : trace_path_, model_sha256_);
  n_layer_ = cfg.n_layer;
  n_expert_ = cfg.n_expert;
  LoadedModelInfo info;
  info.demo = opts.demo;
  info.model_sha256 = model_sha256_;
  info.path = opts.demo ? std::string() : opts.model_path;
  info.name = opts.demo ? "Demo model" : std::filesystem::path(opts.model_path).filename().string();
  info.architecture = cfg.arch_name;
  info.chat_template = chatFamilyName(session->model().chatFamily());
  info.thinking_switch = chatHasThinkingSwitch(session->model().chatFamily());
  info.backend = session->backend().name();
  info.policy = policyName(session->policy());
  info.offload_note = note;
  if (session->policy() != OffloadPolicy::kResident) info.predictor = session->offload().predictorName();
  info.n_layer = cfg.n_layer;
  info.n_expert = cfg.n_expert;
  info.n_expert_used = cfg.n_expert_used;
  info.n_ctx = session->transformer().nCtx();
  info.shape = shapeOf(session->model());
  info.device = session->device();
  info.plan = plan;
  info.cache_slots = session->cacheSlots();
  if (!opts.demo) {
    std::error_code ec;
    info.file_bytes = std::filesystem::file_size(opts.model_path, ec);
  }
  {
    std::lock_guard lock(session_mu_);
    session_ = std::move(session);
  }
  sampleDeviceMemory();
  loaded_ = true;
  return info;
}

void LocalChatEngine::sampleDeviceMemory() {
  uint64_t used = 0, total = 0;
  if (!session_ || !session_->backend().deviceMemory(used, total)) used = total = 0;
  vram_used_ = used;
  vram_total_ = total;
}

bool LocalChatEngine::loaded() const { return loaded_; }

std::vector<int32_t> LocalChatEngine::promptFitting(const std::vector<ChatMessage>& messages, int max_tokens,
                                                    int* dropped, uint64_t* tokenized_bytes) {
  const int n_ctx = session_->transformer().nCtx();
  // Leave room for the reply: its token limit, but at most half the context.
  const int budget = n_ctx - std::clamp(max_tokens, 1, std::max(n_ctx / 2, 1));
  ChatTokenCache& cache = session_->chatTokens();
  const uint64_t encoded_before = cache.counters().bytes_encoded;
  ChatTokenCache::Fitted fitted = cache.fit(session_->model().chatFamily(), messages, chat_options_,
                                            static_cast<size_t>(std::max(budget, 0)));
  cache.forgetUnused();  // keeps this conversation's runs, drops an edited message's old text
  *dropped = fitted.dropped;
  *tokenized_bytes = cache.counters().bytes_encoded - encoded_before;
  return std::move(fitted.ids);
}

EngineReplyStats LocalChatEngine::reply(const std::vector<ChatMessage>& messages,
                                        const GenerationParams& params, const TextSink& on_text,
                                        const std::atomic<bool>& cancel) {
  if (!session_) throw std::logic_error("no model loaded");
  auto& model = session_->model();
  const auto family = model.chatFamily();
  GenerationParams p = params;
  for (auto& s : chatStopStrings(family)) p.stop_strings.push_back(s);
  // Random weights never pick the end token on purpose; the length limit ends their reply.
  if (random_demo_) p.stop_at_end_token = false;
  p.progress = &progress_;
  // gpt-oss, Qwen3.5: the reasoning is shown apart from the answer (app/core/reply_reader.h).
  const std::unique_ptr<ReplyReader> reader = replyReaderFor(family, p, chat_options_);
  TextSink sink = on_text;
  if (reader) {
    sink = [&](std::string_view raw) {
      if (const std::string shown = reader->push(raw); !shown.empty()) on_text(shown);
    };
  }
  int dropped = 0;
  uint64_t tokenized_bytes = 0;
  const auto ids = promptFitting(messages, p.max_tokens, &dropped, &tokenized_bytes);
  GenerationStats st;
  try {
    st = session_->generate(ids, p, sink, &cancel);
    if (reader)
      if (const std::string rest = reader->finish(); !rest.empty()) on_text(rest);
  } catch (const ModelFileChanged& e) {
    {
      std::lock_guard lock(session_mu_);
      session_.reset();  // releases the mapping of the old file
    }
    loaded_ = false;
    throw ModelFileChanged(std::string(e.what()) + ". The model was unloaded: load it again.");
  } catch (const DeviceError& e) {
    fallBackToCpu(e);
  } catch (const ContextOverflow& e) {
    throw std::runtime_error(
        std::string(e.what()) +
        ": raise the model's context length with the Context button beside the model menu, or in "
        "Settings (GPU & offload, Context length)");
  }
  total_generated_ += static_cast<uint64_t>(st.generated_tokens);
  sampleDeviceMemory();

  EngineReplyStats r;
  r.prompt_tokens = st.prompt_tokens;
  r.reused_tokens = st.reused_tokens;
  r.completion_tokens = st.generated_tokens;
  r.ttft_ms = st.ttft_seconds * 1e3;
  r.prefill_tps = st.prefillTokensPerSecond();
  r.decode_tps = st.decodeTokensPerSecond();
  r.stop_reason = stopReasonName(st.reason);
  r.dropped_messages = dropped;
  r.tokenized_bytes = static_cast<int64_t>(tokenized_bytes);
  r.traced_tokens = session_->lastTrace().tokens;
  r.trace_error = session_->lastTrace().error;
  return r;
}

void LocalChatEngine::fallBackToCpu(const DeviceError& e) {
  {
    std::lock_guard lock(session_mu_);
    session_.reset();  // the device's state is lost after a fault: nothing more runs on it
  }
  loaded_ = false;
  const std::string what = std::string("GPU error: ") + e.what() + ". The reply was stopped and saved";
  EngineLoadOptions cpu = load_opts_;
  cpu.backend = "cpu";
  try {
    LoadedModelInfo info = load(cpu, {});
    info.offload_note = "the GPU failed, so the model now runs on the CPU (" + info.offload_note + ")";
    throw DeviceFallback(what + "; the model now runs on the CPU.", std::move(info));
  } catch (const DeviceFallback&) {
    throw;
  } catch (const std::exception& cpu_error) {
    throw std::runtime_error(what + "; loading the model on the CPU failed too: " + cpu_error.what());
  }
}

void LocalChatEngine::setTraceRecording(const std::string& path) {
  trace_path_ = path;
  if (session_) session_->setTraceFile(model_sha256_.empty() ? std::string() : path, model_sha256_);
}

EngineCounters LocalChatEngine::counters() const {
  EngineCounters c;
  c.generating = progress_.running.load(std::memory_order_relaxed);
  c.prompt_tokens = progress_.prompt_tokens.load(std::memory_order_relaxed);
  c.prefilled_tokens = progress_.prefilled_tokens.load(std::memory_order_relaxed);
  c.generated_tokens = progress_.generated_tokens.load(std::memory_order_relaxed);
  c.prefill_seconds = progress_.prefill_us.load(std::memory_order_relaxed) * 1e-6;
  const int64_t ttft = progress_.ttft_us.load(std::memory_order_relaxed);
  c.ttft_seconds = ttft < 0 ? -1.0 : ttft * 1e-6;
  c.decode_seconds = progress_.decode_us.load(std::memory_order_relaxed) * 1e-6;
  c.total_generated =
      total_generated_.load(std::memory_order_relaxed) + (c.generating ? c.generated_tokens : 0);
  c.vram_used_bytes = vram_used_.load(std::memory_order_relaxed);
  c.vram_total_bytes = vram_total_.load(std::memory_order_relaxed);
  std::lock_guard lock(session_mu_);
  if (session_ && session_->policy() != OffloadPolicy::kResident) {
    c.experts_resident = false;
    c.offload = session_->offloadSnapshot();
    c.blocked_seconds = c.offload.blockedSeconds();
    c.link_bytes_per_second = c.offload.link_bytes_per_second;
  }
  return c;
}

ExpertResidency LocalChatEngine::residency() const {
  ExpertResidency r;
  std::lock_guard lock(session_mu_);
  if (!session_) return r;
  r.n_layer = n_layer_;
  r.n_expert = n_expert_;
  const TransferWorker* worker = session_->offload().worker();
  if (!worker) {  // resident: every expert is where the model file maps it
    r.state.assign(static_cast<size_t>(n_layer_) * n_expert_, ExpertPlace::kReady);
    return r;
  }
  r.state.assign(static_cast<size_t>(n_layer_) * n_expert_, ExpertPlace::kAbsent);
  const SlotTable table = worker->snapshot();
  for (int i = 0; i < table.slotCount(); ++i) {
    const SlotInfo& s = table.at(i);
    if (s.state == SlotState::kEmpty || s.layer < 0 || s.layer >= n_layer_ || s.expert < 0 ||
        s.expert >= n_expert_)
      continue;
    r.state[static_cast<size_t>(s.layer) * n_expert_ + s.expert] =
        s.state == SlotState::kReady ? ExpertPlace::kReady : ExpertPlace::kLoading;
  }
  return r;
}

}  // namespace moe
