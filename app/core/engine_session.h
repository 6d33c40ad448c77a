// Glue shared by the CLI and (later) the GUI's InferenceWorker: opens a model
// file or the embedded demo model, and wires backend, model, expert source and
// transformer together. Qt-free.
#pragma once

#include <memory>
#include <string>

#include "inference/backend.h"
#include "inference/generator.h"
#include "inference/model.h"
#include "inference/transformer.h"

namespace moe {

struct SessionOptions {
  std::string model_path;  // empty with demo
  bool demo = false;
  int n_ctx = 2048;  // clamped to the model's trained context
  int threads = 0;   // 0: all hardware threads
};

class EngineSession {
 public:
  // Throws gguf::GgufError / ModelError / TokenizerError with a readable reason.
  explicit EngineSession(const SessionOptions& opts);
  ~EngineSession();

  Model& model() { return *model_; }
  Transformer& transformer() { return *transformer_; }
  Generator& generator() { return *generator_; }
  Backend& backend() { return *backend_; }
  bool isDemo() const { return demo_; }

 private:
  bool demo_ = false;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ExpertSource> experts_;
  std::unique_ptr<Transformer> transformer_;
  std::unique_ptr<Generator> generator_;
};

// The line every front end shows next to the demo model.
inline constexpr const char* kDemoNotice =
    "demo model: random weights; it shows the machinery (routing, caching, speed), not language";

// Opens the GGUF named by opts (maps a file, or builds the demo model in memory).
gguf::GgufFile openModelFile(const SessionOptions& opts);

}  // namespace moe
