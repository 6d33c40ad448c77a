// The rotation angles of RoPE, plain and YaRN-scaled, computed in double and
// rounded once to float. Both backends rotate by these values: the CPU computes
// them per token, the CUDA backend uploads them as a table.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

#include "inference/model_config.h"

namespace moe {

// YaRN's band of rotary dimensions, as ggml's ggml_rope_yarn_corr_dims gives it:
// pair i rotates beta times over the original context at
// corr(beta) = n_rot * ln(orig_ctx / (2 pi beta)) / (2 ln base); pairs below
// floor(corr(beta_fast)) keep their frequency, pairs above ceil(corr(beta_slow)) are
// interpolated, and a linear ramp joins the two.
struct YarnBand {
  double low = 0, high = 0;
};

inline YarnBand yarnBand(int n_rot, float freq_base, const RopeYarn& y) {
  auto corr = [&](double beta) {
    return n_rot * std::log(y.orig_ctx / (beta * 2 * std::numbers::pi)) / (2 * std::log(double(freq_base)));
  };
  return {std::max(0.0, std::floor(corr(y.beta_fast))),
          std::min(double(n_rot - 1), std::ceil(corr(y.beta_slow)))};
}

// Rotation angles of one position: cs[2i] = m cos(theta_i), cs[2i+1] = m sin(theta_i),
// theta_i = pos * base^(-2i/n_rot), m = 1 without YaRN. With YaRN, theta_i mixes the
// interpolated angle (theta_i / factor) and the original by the ramp of pair i, and
// m = attn_factor * (1 + 0.1 ln factor). Computed in double and rounded once to
// float, so large positions (pos * freq up to ~1e5 rad) keep their accuracy.
inline void ropeAngles(int32_t pos, int n_rot, float freq_base, const RopeYarn* yarn,
                       float* cs) {  // cs: [n_rot]
  const YarnBand band = yarn ? yarnBand(n_rot, freq_base, *yarn) : YarnBand{};
  const double mscale = yarn ? yarn->attn_factor * (1.0 + 0.1 * std::log(double(yarn->factor))) : 1.0;
  for (int i = 0; i < n_rot / 2; ++i) {
    const double freq = std::pow(static_cast<double>(freq_base), -2.0 * i / n_rot);
    double theta = static_cast<double>(pos) * freq;
    if (yarn) {
      const double ramp = 1.0 - std::clamp((i - band.low) / std::max(0.001, band.high - band.low), 0.0, 1.0);
      theta = theta / yarn->factor * (1.0 - ramp) + theta * ramp;
    }
    cs[2 * i] = static_cast<float>(std::cos(theta) * mscale);
    cs[2 * i + 1] = static_cast<float>(std::sin(theta) * mscale);
  }
}

// ropeAngles without YaRN, pair i's angle divided by factors[i] (ggml's freq_factors).
inline void ropeAnglesWithFactors(int32_t pos, int n_rot, float freq_base, const float* factors, float* cs) {
  for (int i = 0; i < n_rot / 2; ++i) {
    const double freq = std::pow(static_cast<double>(freq_base), -2.0 * i / n_rot);
    const double theta = static_cast<double>(pos) * freq / static_cast<double>(factors[i]);
    cs[2 * i] = static_cast<float>(std::cos(theta));
    cs[2 * i + 1] = static_cast<float>(std::sin(theta));
  }
}

// Whether rope.scaling's YaRN parameters can be computed with: factor >= 1, an
// original context, betas > 0.
inline bool yarnValid(const RopeYarn& y) {
  return y.factor >= 1.0f && y.orig_ctx > 0 && y.beta_fast > 0 && y.beta_slow > 0;
}

}  // namespace moe
