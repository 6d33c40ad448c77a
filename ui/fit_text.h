// The fit estimate as the settings panel and the model wizard word it.
#pragma once

#include <QString>

#include "offload/fit_estimate.h"

namespace moe {

QString formatBytes(quint64 bytes);
// host_available: MemAvailable (0 = unknown).
QString fitSummary(const FitEstimate& fit, quint64 host_available);

}  // namespace moe
