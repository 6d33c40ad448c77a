#include "offload/routing/demand_cache.h"

#include <algorithm>
#include <limits>
#include <list>
#include <set>
#include <stdexcept>
#include <unordered_map>

namespace moe {
namespace {

constexpr size_t kNever = std::numeric_limits<size_t>::max();

int64_t keyOf(int layer, int expert, int n_expert) { return int64_t(layer) * n_expert + expert; }

void checkRequests(std::span<const ExpertRequest> requests, int n_expert, int slots) {
  if (n_expert <= 0 || slots <= 0)
    throw std::invalid_argument("simulated cache: need experts > 0 and slots > 0");
  for (const auto& r : requests)
    for (int e : r.experts)
      if (e < 0 || e >= n_expert || r.layer < 0)
        throw std::invalid_argument("simulated cache: expert out of range");
}

}  // namespace

DemandResult simulateBelady(std::span<const ExpertRequest> requests, int n_expert, int slots) {
  checkRequests(requests, n_expert, slots);
  // next[i][j]: the request index where requests[i].experts[j] is needed next.
  std::vector<std::vector<size_t>> next(requests.size());
  std::unordered_map<int64_t, size_t> seen_at;
  for (size_t i = requests.size(); i-- > 0;) {
    const auto& r = requests[i];
    next[i].resize(r.experts.size());
    for (size_t j = 0; j < r.experts.size(); ++j) {
      const int64_t key = keyOf(r.layer, r.experts[j], n_expert);
      const auto it = seen_at.find(key);
      next[i][j] = it == seen_at.end() ? kNever : it->second;
      seen_at[key] = i;
    }
  }
  DemandResult out;
  std::set<std::pair<size_t, int64_t>> by_next;  // cached experts by their next use
  std::unordered_map<int64_t, size_t> cached;    // expert -> its next use
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    // The gate's experts that are cached stay: mark them used now, due next at next[i][j].
    std::vector<int64_t> keys(r.experts.size());
    for (size_t j = 0; j < r.experts.size(); ++j) {
      keys[j] = keyOf(r.layer, r.experts[j], n_expert);
      ++out.uses;
      if (auto it = cached.find(keys[j]); it != cached.end()) {
        ++out.hits;
        by_next.erase({it->second, keys[j]});
        it->second = next[i][j];
        by_next.insert({next[i][j], keys[j]});
      }
    }
    for (size_t j = 0; j < r.experts.size(); ++j) {
      if (cached.count(keys[j])) continue;
      if (int(cached.size()) >= slots) {
        // Evict the furthest next use among experts this gate does not need.
        auto victim = by_next.end();
        for (auto it = by_next.rbegin(); it != by_next.rend(); ++it)
          if (std::find(keys.begin(), keys.end(), it->second) == keys.end()) {
            victim = std::prev(it.base());
            break;
          }
        if (victim == by_next.end()) continue;  // every slot holds this gate's experts: streamed
        // Every cached expert is needed before this one: it streams, the cache stays.
        if (victim->first < next[i][j]) continue;
        cached.erase(victim->second);
        by_next.erase(victim);
      }
      cached[keys[j]] = next[i][j];
      by_next.insert({next[i][j], keys[j]});
    }
  }
  return out;
}

DemandResult simulateLru(std::span<const ExpertRequest> requests, int n_layer, int n_expert, int slots,
                         LruScope scope) {
  checkRequests(requests, n_expert, slots);
  if (n_layer <= 0) throw std::invalid_argument("simulated cache: need layers > 0");
  const bool per_layer = scope == LruScope::kPerLayer;
  const int pools = per_layer ? n_layer : 1;
  const int capacity = per_layer ? std::max(1, slots / n_layer) : slots;
  std::vector<std::list<int64_t>> order(static_cast<size_t>(pools));  // most recent first
  std::unordered_map<int64_t, std::list<int64_t>::iterator> where;
  DemandResult out;
  for (const auto& r : requests) {
    if (r.layer >= n_layer) throw std::invalid_argument("simulated cache: layer out of range");
    auto& pool = order[size_t(per_layer ? r.layer : 0)];
    std::vector<int64_t> keys;
    for (int e : r.experts) keys.push_back(keyOf(r.layer, e, n_expert));
    for (int64_t key : keys) {
      ++out.uses;
      if (auto it = where.find(key); it != where.end()) {
        ++out.hits;
        pool.splice(pool.begin(), pool, it->second);
      }
    }
    for (int64_t key : keys) {
      if (where.count(key)) continue;
      if (int(pool.size()) >= capacity) {
        // The least recent expert this gate does not need.
        auto victim = pool.end();
        for (auto it = pool.rbegin(); it != pool.rend(); ++it)
          if (std::find(keys.begin(), keys.end(), *it) == keys.end()) {
            victim = std::prev(it.base());
            break;
          }
        if (victim == pool.end()) continue;  // streamed
        where.erase(*victim);
        pool.erase(victim);
      }
      pool.push_front(key);
      where[key] = pool.begin();
    }
  }
  return out;
}

DemandResult simulateSlotTable(std::span<const ExpertRequest> requests, int n_layer, int slots,
                               Eviction rule) {
  if (n_layer <= 0 || slots <= 0)
    throw std::invalid_argument("simulated cache: need layers > 0 and slots > 0");
  SlotTable table(slots, n_layer, 1);
  table.setEviction(rule);
  DemandResult out;
  for (const auto& r : requests) {
    if (r.layer < 0 || r.layer >= n_layer) throw std::invalid_argument("simulated cache: layer out of range");
    // As TransferWorker::pushPrecise: count the gate, pin its cached experts, then
    // each expert in order: a hit is touched, a miss takes a slot.
    table.setComputingLayer(r.layer);
    table.countGate(r.layer, r.experts);
    for (int e : r.experts)
      if (const int slot = table.find(r.layer, e); slot >= 0) table.pin(slot);
    for (int e : r.experts) {
      ++out.uses;
      if (const int slot = table.find(r.layer, e); slot >= 0) {
        ++out.hits;
        table.touch(slot);
        continue;
      }
      const int slot = table.reserve(r.layer, e, /*predicted=*/false);
      if (slot < 0) continue;  // streamed
      table.markReady(slot);
      table.pin(slot);
    }
    table.unpinAll();
    table.setComputingLayer(-1);
  }
  return out;
}

std::vector<ExpertRequest> decodeRequests(const RoutingTrace& trace, int max_tokens) {
  const int n = max_tokens > 0 ? std::min(max_tokens, trace.tokens()) : trace.tokens();
  std::vector<ExpertRequest> out;
  out.reserve(size_t(n) * size_t(trace.n_layer));
  for (int t = 0; t < n; ++t)
    for (int l = 0; l < trace.n_layer; ++l) {
      ExpertRequest r;
      r.layer = l;
      for (uint16_t e : trace.idsAt(t, l))
        if (std::find(r.experts.begin(), r.experts.end(), int(e)) == r.experts.end()) r.experts.push_back(e);
      out.push_back(std::move(r));
    }
  return out;
}

}  // namespace moe
