// Observes what a Transformer computes and streams it into a TraceWriter: per
// forward batch its token ids and first position, per MoE layer the FFN input
// (what ExpertSource::onLayerInput sees) and the gate's choice. Used by
// trace collection over a prompt set (trace_collector.h) and by a live chat
// session that records its replies (app/core/engine_session.h). Qt-free.
//
// The recorder is an ExpertSource wrapped around the one the transformer
// computes with; while no writer is set it only passes calls through (no copy,
// no allocation). It sees the routing as a source (onRouting); feed it the
// transformer's batch events (Transformer::setBatchObserver) while recording.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inference/expert_source.h"
#include "inference/transformer.h"
#include "offload/trainer/trace_file.h"

namespace moe {

class TraceRecorder final : public ExpertSource {
 public:
  explicit TraceRecorder(ExpertSource& inner) : inner_(inner) {}

  // Writes the batches that follow as prompt `prompt` of `writer` (which must
  // outlive the recording). A write error never reaches the forward pass: the
  // recording stops and error() says why.
  void start(TraceWriter& writer, int prompt);
  // Stops recording. True when every batch begun since start() is complete
  // (all its MoE layers written) and no write failed: the caller may then end
  // the prompt. False after a cancel inside a batch: the prompt is torn, and the
  // next TraceWriter on the file cuts it.
  bool stop();
  bool recording() const { return writer_ != nullptr; }
  int64_t tokensRecorded() const { return tokens_; }  // in complete batches since start()
  const std::string& error() const { return error_; }

  // The transformer's batch event.
  void onBatch(const BatchEvent& ev);

  // ExpertSource: passes everything through; keeps the layer's input and writes
  // the gate's choice while recording.
  void onLayerInput(int layer, std::span<const float> hidden, int n_tokens) override;
  void onRouting(const RoutingEvent& ev) override;
  std::vector<ExpertRef> acquire(int layer, std::span<const int> experts) override {
    return inner_.acquire(layer, experts);
  }
  void waitFor(int layer, const ExpertRef& ref) override { inner_.waitFor(layer, ref); }
  bool allReady() const override { return inner_.allReady(); }
  void release(int layer) override { inner_.release(layer); }
  // While recording it needs the layer's input and the routing on the host.
  bool wantsLayerInput() const override { return recording() || inner_.wantsLayerInput(); }
  std::span<const ExpertWeights> everyExpert(int layer) const override {
    return recording() ? std::span<const ExpertWeights>() : inner_.everyExpert(layer);
  }

 private:
  void fail(const std::exception& e);

  ExpertSource& inner_;
  TraceWriter* writer_ = nullptr;
  int prompt_ = 0;
  int last_layer_ = -1;
  std::vector<float> last_hidden_;  // [n_tokens][n_embd] of last_layer_
  size_t layers_left_ = 0;          // MoE layers of the current batch still to come
  int batch_tokens_ = 0;
  int64_t tokens_ = 0;
  bool torn_ = false;
  std::string error_;
};

}  // namespace moe
