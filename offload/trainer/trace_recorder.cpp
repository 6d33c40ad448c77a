#include "offload/trainer/trace_recorder.h"

#include <stdexcept>

namespace moe {

void TraceRecorder::start(TraceWriter& writer, int prompt) {
  writer_ = &writer;
  prompt_ = prompt;
  last_layer_ = -1;
  layers_left_ = 0;
  batch_tokens_ = 0;
  tokens_ = 0;
  torn_ = false;
  error_.clear();
}

bool TraceRecorder::stop() {
  const bool complete = writer_ && !torn_ && layers_left_ == 0;
  writer_ = nullptr;
  last_hidden_.clear();
  return complete && error_.empty();
}

void TraceRecorder::fail(const std::exception& e) {
  error_ = e.what();
  torn_ = true;
  writer_ = nullptr;
}

void TraceRecorder::onBatch(const BatchEvent& ev) {
  if (!writer_) return;
  if (layers_left_ != 0) torn_ = true;  // the last batch was cut short (a cancel)
  try {
    if (torn_) throw std::runtime_error("a batch was cut short; the prompt is torn");
    writer_->beginBatch(prompt_, ev.first_pos, ev.tokens);
  } catch (const std::exception& e) {
    fail(e);
    return;
  }
  layers_left_ = writer_->header().moe_layers.size();
  batch_tokens_ = int(ev.tokens.size());
  if (layers_left_ == 0) tokens_ += batch_tokens_;
}

void TraceRecorder::onLayerInput(int layer, std::span<const float> hidden, int n_tokens) {
  if (writer_) {
    last_layer_ = layer;
    last_hidden_.assign(hidden.begin(), hidden.end());
  }
  inner_.onLayerInput(layer, hidden, n_tokens);
}

void TraceRecorder::onRouting(const RoutingEvent& ev) {
  inner_.onRouting(ev);
  if (!writer_) return;
  try {
    if (ev.layer != last_layer_) throw std::logic_error("trace: routing without a layer input");
    writer_->addLayer(ev.layer, last_hidden_, ev.experts, ev.weights);
  } catch (const std::exception& e) {
    fail(e);
    return;
  }
  if (layers_left_ > 0 && --layers_left_ == 0) tokens_ += batch_tokens_;
}

}  // namespace moe
