#include "app/core/engine_session.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "offload/trainer/trace_collector.h"
#include "synth/synthetic_model.h"

namespace moe {

gguf::GgufFile openModelFile(const SessionOptions& opts) {
  if (opts.demo && opts.demo_model == DemoModel::kTrained)
    return gguf::GgufFile::open(requireTrainedDemoModel());
  if (opts.demo) return gguf::GgufFile::fromBytes(synth::demoModelBytes());
  if (opts.model_path.empty()) throw std::invalid_argument("no model given: pass a GGUF file or --demo");
  return gguf::GgufFile::open(opts.model_path);
}

DeviceMemory sessionDevice(const SessionOptions& opts, const Compute& compute) {
  if (compute.device() == Device::kCpu) {
    DeviceMemory d;
    if (opts.device == DeviceChoice::kCpu)
      d.why_cpu = "the CPU was chosen";
    else if (!cudaDeviceAvailable(&d.why_cpu) && d.why_cpu.empty())
      d.why_cpu = "no usable GPU";
    return d;
  }
  DeviceMemory d;
  d.gpu = true;
  std::string why;
  if (!cudaMemoryInfo(&d.free_bytes, &d.total_bytes, &why))
    throw std::runtime_error("GPU memory unknown: " + why);
  return d;
}

EngineSession::EngineSession(const SessionOptions& opts)
    : demo_(opts.demo), random_demo_(opts.demo && opts.demo_model == DemoModel::kRandom) {
  compute_ = std::make_unique<Compute>(ComputeOptions{opts.device, opts.threads, opts.kv_f16});
  device_ = sessionDevice(opts, *compute_);  // before the weights take their share
  model_ = Model::load(openModelFile(opts), compute_->backend());
  chat_tokens_ = std::make_unique<ChatTokenCache>(model_->tokenizer());
  plan_ = resolveLoadPlan({opts.budget, opts.policy, opts.n_ctx, opts.demo}, shapeOf(*model_), device_);
  if (!plan_.loads()) throw std::invalid_argument(plan_.error);
  const int n_ctx = plan_.n_ctx;
  OffloadConfig oc;
  oc.policy = plan_.policy;
  oc.cache_slots = plan_.cache_slots;
  oc.link = opts.link;
  oc.switches = opts.switches;
  oc.eviction = opts.eviction;
  oc.mapped_decode = opts.mapped_decode;
  oc.on_cpu_decision = opts.on_cpu_decision;
  if (opts.predictor) {
    oc.predictor = opts.predictor;
    oc.stride = opts.predictor_distance;
  }
  runtime_ = std::make_unique<Runtime>(*model_, *compute_, oc);
  source_name_ = opts.demo ? "demo" : opts.model_path;
  recorder_ = std::make_unique<TraceRecorder>(runtime_->source());
  transformer_ = runtime_->makeTransformer(n_ctx, recorder_.get());
  generator_ = std::make_unique<Generator>(*model_, *transformer_);
}

EngineSession::~EngineSession() {
  // The transformer and generator use the runtime's expert source.
  generator_.reset();
  transformer_.reset();
  recorder_.reset();
  runtime_.reset();
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
    transformer_->setBatchObserver([r = recorder_.get()](const BatchEvent& ev) { r->onBatch(ev); });
  }
  // Stops recording, whatever happens.
  struct Restore {
    EngineSession* s;
    bool active;
    ~Restore() {
      if (!active) return;
      s->recorder_->stop();
      s->transformer_->setBatchObserver({});
    }
  } restore{this, writer != nullptr};

  offload().setInterrupt(cancel);
  struct ClearInterrupt {
    OffloadEngine* e;
    ~ClearInterrupt() { e->setInterrupt(nullptr); }
  } clear_interrupt{&offload()};
  const GenerationStats st = generator_->generate(prompt, params, on_text, cancel);
  if (policy() != OffloadPolicy::kResident)
    offload().metrics().addGeneration(uint64_t(st.prompt_tokens - st.reused_tokens), st.prefill_seconds,
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
