#include "inference/routing.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

namespace moe {
namespace {

// Sets the selection score of every expert outside the chosen groups to -inf: a
// group's score is the sum of its two largest selection scores (one, for groups
// of one), and the group_used highest-scoring groups are kept (ties: lower index).
void excludeWeakGroups(const RoutingRule& rule, std::vector<double>& choice) {
  const int per_group = rule.n_expert / rule.groups;
  std::vector<double> score(rule.groups);
  for (int g = 0; g < rule.groups; ++g) {
    const auto first = choice.begin() + g * per_group;
    std::vector<double> members(first, first + per_group);
    const int top = std::min(2, per_group);
    std::partial_sort(members.begin(), members.begin() + top, members.end(), std::greater<>());
    score[g] = std::accumulate(members.begin(), members.begin() + top, 0.0);
  }
  std::vector<int> groups(rule.groups);
  std::iota(groups.begin(), groups.end(), 0);
  std::stable_sort(groups.begin(), groups.end(), [&](int a, int b) { return score[a] > score[b]; });
  for (size_t i = size_t(rule.group_used); i < groups.size(); ++i)
    std::fill_n(choice.begin() + groups[i] * per_group, per_group, -INFINITY);
}

}  // namespace

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
  // A NaN (a broken forward pass, a copy read before it landed) is chosen last: with
  // NaN the comparisons below are no ordering, and the sorts could return any index.
  for (double& c : choice)
    if (std::isnan(c)) c = -std::numeric_limits<double>::infinity();
  if (rule.groupLimited()) excludeWeakGroups(rule, choice);
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
