// A conversation's own sampling settings as the store keeps them: JSON text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "app/qt/app_settings.h"

namespace moe {

// JSON <-> sampling settings of a conversation ("{}" = use the defaults).
std::optional<SamplingDefaults> samplingFromJson(const std::string& json);
std::string samplingToJson(const SamplingDefaults& s);
// The sampling a reply was written with, as stored beside it: samplingToJson's plus the seed.
std::string replySamplingJson(const SamplingDefaults& s, uint64_t seed);

}  // namespace moe
