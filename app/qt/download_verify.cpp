#include "app/qt/download_verify.h"

#include <map>

#include "inference/model_config.h"
#include "models/gguf.h"

namespace moe {

GgufSummary inspectGguf(const QString& path) {
  GgufSummary s;
  try {
    const gguf::GgufFile f = gguf::GgufFile::open(path.toStdString());
    const ModelConfig c = ModelConfig::fromGguf(f);
    s.file_size = qint64(f.fileSize());
    s.name = QString::fromStdString(c.model_name);
    s.arch = QString::fromStdString(c.arch_name);
    s.n_layer = c.n_layer;
    s.n_expert = c.n_expert;
    s.n_expert_used = c.n_expert_used;
    std::map<gguf::TensorType, uint64_t> bytes;
    for (const auto& t : f.tensors()) bytes[t.type] += t.nbytes;
    uint64_t best = 0;
    for (const auto& [type, n] : bytes)
      if (n > best) best = n, s.quant = QString::fromLatin1(gguf::tensorTypeName(type));
    s.ok = true;
  } catch (const std::exception& e) {
    s.error = QString::fromUtf8(e.what());
  }
  return s;
}

}  // namespace moe
