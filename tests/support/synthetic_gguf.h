// The bytes of a tiny synthetic GGUF model as a QByteArray: what the download
// and wizard tests serve over HTTP or write to disk as a "model file".
#pragma once

#include <QByteArray>
#include <string>

#include "synth/synthetic_model.h"

namespace moe::test {

inline QByteArray syntheticGgufBytes(const std::string& arch) {
  const auto bytes = synth::buildModel(synth::tinySpec(arch)).toBytes();
  return QByteArray(reinterpret_cast<const char*>(bytes.data()), qsizetype(bytes.size()));
}

}  // namespace moe::test
