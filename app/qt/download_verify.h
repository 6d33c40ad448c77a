// What a model file is, read with the engine's own GGUF reader and config
// parser: a downloaded file is checked with it before it is registered, and the
// wizard uses it to accept or refuse a local file (showing the reader's error).
// Reads the header only (the file is mapped, not read), so it is quick even for
// a 30 GB file; still, callers on the GUI thread should expect disk latency.
#pragma once

#include <QString>

namespace moe {

struct GgufSummary {
  bool ok = false;
  QString error;  // the reader's or the config parser's message when !ok
  QString name;   // general.name (may be empty)
  QString arch;   // general.architecture
  QString quant;  // the tensor type holding the most bytes (e.g. "Q8_0")
  int n_layer = 0, n_expert = 0, n_expert_used = 0;
  qint64 file_size = 0;
};

GgufSummary inspectGguf(const QString& path);

}  // namespace moe
