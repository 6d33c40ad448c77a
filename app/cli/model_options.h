// Options every model-using command shares: the model (FILE or --demo),
// context, threads, and sampling.
#pragma once

#include <set>
#include <string>

#include "app/cli/args.h"
#include "app/core/engine_session.h"
#include "inference/sampler.h"

namespace moe::cli {

// Options that take a value / flags, for Args.
std::set<std::string> modelValueOptions();
std::set<std::string> modelFlags();
std::set<std::string> samplingValueOptions();

SessionOptions sessionOptions(const Args& args);
// --backend cpu|cuda|auto (default cpu); UsageError for another name.
DeviceChoice deviceChoice(const Args& args);
SamplerParams samplerParams(const Args& args);
// Prints the model line and, for a model with random weights, the notice (stderr).
void announceModel(const class Model& model);

}  // namespace moe::cli
