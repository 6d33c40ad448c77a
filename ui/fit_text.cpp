#include "ui/fit_text.h"

namespace moe {

QString formatBytes(quint64 bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return QString("%1 GB").arg(b / 1e9, 0, 'f', 2);
  if (b >= 1e6) return QString("%1 MB").arg(b / 1e6, 0, 'f', 1);
  return QString("%1 KB").arg(b / 1e3, 0, 'f', 1);
}

QString fitSummary(const FitEstimate& fit, quint64 host_available) {
  QString s = QString("On the GPU: weights %1 + KV cache %2 + workspace %3.\n")
                  .arg(formatBytes(fit.resident_bytes), formatBytes(fit.kv_cache_bytes),
                       formatBytes(fit.workspace_bytes));
  if (!fit.fits_gpu)
    s += QString("Does not fit: %1 leaves room for fewer than 2 expert slots.\n")
             .arg(formatBytes(fit.vram_budget));
  else if (fit.all_experts_fit)
    s += QString("Expert cache: all %1 experts fit; no offloading needed.\n").arg(fit.total_experts);
  else
    s += QString("Expert cache: %1 of %2 experts (%3%).\n")
             .arg(fit.cache_slots)
             .arg(fit.total_experts)
             .arg(100.0 * fit.cacheShare(), 0, 'f', 1);
  s += QString("Pinned host RAM for the experts: %1").arg(formatBytes(fit.host_pinned_bytes));
  if (host_available == 0)
    s += " (free RAM unknown).";
  else if (fit.host_pinned_bytes <= host_available)
    s += QString(" of %1 free: fits.").arg(formatBytes(host_available));
  else
    s += QString(" but only %1 is free: does NOT fit.").arg(formatBytes(host_available));
  return s;
}

}  // namespace moe
