#include "inference/routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace moe {

void routeToken(const float* logits, const RoutingRule& rule, int* ids, float* weights) {
  const int n_expert = rule.n_expert;
  std::vector<double> p(n_expert);
  if (rule.gating == GatingFunc::Softmax) {
    const double mx = *std::max_element(logits, logits + n_expert);
    double sum = 0;
    for (int e = 0; e < n_expert; ++e) sum += p[e] = std::exp(double(logits[e]) - mx);
    for (double& x : p) x /= sum;
  } else {
    for (int e = 0; e < n_expert; ++e) p[e] = 1.0 / (1.0 + std::exp(-double(logits[e])));
  }
  std::vector<double> choice = p;
  if (rule.selection_bias)
    for (int e = 0; e < n_expert; ++e) choice[e] += double(rule.selection_bias[e]);
  std::vector<int> order(n_expert);
  std::iota(order.begin(), order.end(), 0);
  const int k = rule.k;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return choice[a] > choice[b] || (choice[a] == choice[b] && a < b); });
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += p[order[i]];
  for (int i = 0; i < k; ++i) {
    ids[i] = order[i];
    double wgt = p[order[i]];
    if (rule.norm_topk) wgt /= sum;
    weights[i] = static_cast<float>(wgt * rule.scale);
  }
}

}  // namespace moe
