#include "app/core/engine_session.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "inference/backend_factory.h"
#include "inference/cpu/cpu_backend.h"
#include "models/synthetic_model.h"
#include "offload/resident_expert_source.h"
#include "offload/trainer/trace_collector.h"

namespace moe {

gguf::GgufFile openModelFile(const SessionOptions& opts) {
  if (opts.demo) return gguf::GgufFile::fromBytes(synth::demoModelBytes());
  if (opts.model_path.empty()) throw std::invalid_argument("no model given: pass a GGUF file or --demo");
  return gguf::GgufFile::open(opts.model_path);
}

int sessionCacheSlots(const SessionOptions& opts, const Model& model) {
  if (opts.cache_bytes == 0) return OffloadEngine::slotsForShare(model, opts.cache_share);
  const uint64_t expert = std::max<uint64_t>(1, model.sizes().expert_bytes);
  const uint64_t slots = opts.cache_bytes / expert;
  if (slots < 2)
    throw std::invalid_argument("a cache budget of " + std::to_string(opts.cache_bytes) +
                                " bytes holds fewer than 2 experts of " + std::to_string(expert) + " bytes");
  return static_cast<int>(std::min<uint64_t>(slots, uint64_t(OffloadEngine::routedExperts(model))));
}

EngineSession::EngineSession(const SessionOptions& opts) : demo_(opts.demo) {
  backend_ = makeBackend(opts.backend, opts.threads);
  if (auto* cpu = dynamic_cast<CpuBackend*>(backend_.get()); cpu && opts.kv_f16) cpu->setKvType(KvType::F16);
  const bool on_cpu = backend_->name().rfind("cpu", 0) == 0;
  model_ = Model::load(openModelFile(opts), *backend_);
  const int n_ctx = std::clamp(opts.n_ctx, 1, model_->config().n_ctx_train);
  OffloadConfig oc;
  oc.policy = opts.policy;
  oc.link = opts.link;
  oc.switches = opts.switches;
  oc.on_cpu_decision = opts.on_cpu_decision;
  if (opts.predictor) {
    oc.predictor = opts.predictor;
    oc.stride = opts.predictor_distance;
  }
  const bool resident = opts.policy == OffloadPolicy::kResident;
  oc.cache_slots = resident ? 0 : sessionCacheSlots(opts, *model_);
  // On a GPU an offload policy caches experts in device memory, copied from pinned
  // host memory; experts the CPU rule sends to the host run on a CPU backend.
  if (!on_cpu && !resident) {
    oc.device = makeOffloadDevice(*backend_);
    host_backend_ = makeCpuBackend(opts.threads);
  }
  engine_ = std::make_unique<OffloadEngine>(*model_, host_backend_ ? *host_backend_ : *backend_, oc);
  ExpertSource* source = &engine_->source();
  if (!on_cpu && resident) {
    device_experts_ = prepareExperts(*backend_, model_->hostExperts());
    device_source_ = std::make_unique<ResidentExpertSource>(device_experts_);
    source = device_source_.get();
  }
  source_name_ = opts.demo ? "demo" : opts.model_path;
  recorder_ = std::make_unique<TraceRecorder>(*source);
  transformer_ = std::make_unique<Transformer>(*model_, *backend_, *recorder_, n_ctx);
  transformer_->setHostBackend(host_backend_.get());
  if (opts.policy == OffloadPolicy::kStatic)
    transformer_->setRoutingObserver([e = engine_.get()](const RoutingEvent& ev) { e->observeRouting(ev); });
  generator_ = std::make_unique<Generator>(*model_, *transformer_);

  // What this configuration would need on a GPU: fixed parts + the expert cache.
  const FitEstimate fixed = estimateFit(model_->config(), model_->sizes(), 0, n_ctx);
  const uint64_t cache_bytes = uint64_t(resident ? OffloadEngine::routedExperts(*model_) : oc.cache_slots) *
                               model_->sizes().expert_bytes;
  fit_ =
      estimateFit(model_->config(), model_->sizes(),
                  fixed.resident_bytes + fixed.kv_cache_bytes + fixed.workspace_bytes + cache_bytes, n_ctx);
}

EngineSession::~EngineSession() {
  // The transformer and generator use the engine's expert source.
  generator_.reset();
  transformer_.reset();
  recorder_.reset();
  device_source_.reset();
  engine_.reset();
}

void EngineSession::setTraceFile(const std::string& path, const std::string& model_sha256) {
  trace_path_ = path;
  trace_sha256_ = model_sha256;
}

GenerationStats EngineSession::generate(std::span<const int32_t> prompt, const GenerationParams& params,
                                        const std::function<void(std::string_view)>& on_text,
                                        const std::atomic<bool>* cancel) {
  if (auto why = model_->file().changedOnDisk())
    throw ModelFileChanged(*why + " since the model was loaded; nothing was computed on it");
  last_trace_ = {};
  std::unique_ptr<TraceWriter> writer;
  int trace_prompt = 0;
  if (!trace_path_.empty()) {
    try {
      std::filesystem::create_directories(std::filesystem::path(trace_path_).parent_path());
      writer =
          std::make_unique<TraceWriter>(trace_path_, traceHeaderFor(*model_, trace_sha256_, source_name_));
      if (!writer->completedPrompts().empty()) trace_prompt = *writer->completedPrompts().rbegin() + 1;
    } catch (const std::exception& e) {
      last_trace_.error = e.what();  // the reply goes on unrecorded
      writer.reset();
    }
  }
  if (writer) {
    recorder_->start(*writer, trace_prompt);
    const bool is_static = policy() == OffloadPolicy::kStatic;
    transformer_->setBatchObserver([r = recorder_.get()](const BatchEvent& ev) { r->onBatch(ev); });
    transformer_->setRoutingObserver(
        [r = recorder_.get(), e = engine_.get(), is_static](const RoutingEvent& ev) {
          if (is_static) e->observeRouting(ev);
          r->onRouting(ev);
        });
  }
  // Puts the observers back as they are without recording, whatever happens.
  struct Restore {
    EngineSession* s;
    bool active;
    ~Restore() {
      if (!active) return;
      s->recorder_->stop();
      s->transformer_->setBatchObserver({});
      if (s->policy() == OffloadPolicy::kStatic)
        s->transformer_->setRoutingObserver(
            [e = s->engine_.get()](const RoutingEvent& ev) { e->observeRouting(ev); });
      else
        s->transformer_->setRoutingObserver({});
    }
  } restore{this, writer != nullptr};

  engine_->setInterrupt(cancel);
  struct ClearInterrupt {
    OffloadEngine* e;
    ~ClearInterrupt() { e->setInterrupt(nullptr); }
  } clear_interrupt{engine_.get()};
  const GenerationStats st = generator_->generate(prompt, params, on_text, cancel);
  if (policy() != OffloadPolicy::kResident)
    engine_->metrics().addGeneration(uint64_t(st.prompt_tokens - st.reused_tokens), st.prefill_seconds,
                                     uint64_t(st.decode_steps), st.decode_seconds);
  if (writer) {
    const int64_t tokens = recorder_->tokensRecorded();
    const bool complete = recorder_->stop();
    last_trace_.error = recorder_->error();
    try {
      if (complete && tokens > 0) {
        writer->endPrompt(trace_prompt);
        last_trace_.tokens = tokens;
      } else {
        // Cut inside a batch (or nothing computed): drop the torn prompt now, so
        // the file on disk holds complete prompts only.
        writer.reset();
        bool empty = false;
        {
          TraceWriter cut(trace_path_, traceHeaderFor(*model_, trace_sha256_, source_name_));
          empty = cut.completedPrompts().empty();
        }
        if (empty) std::filesystem::remove(trace_path_);  // a header alone records nothing
      }
    } catch (const std::exception& e) {
      last_trace_.error = e.what();
      last_trace_.tokens = 0;
    }
  }
  return st;
}

}  // namespace moe
