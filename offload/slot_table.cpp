#include "offload/slot_table.h"

#include <algorithm>
#include <stdexcept>

namespace moe {

namespace {
// The computing layer's slots are kept from the other layers' requests (prefetches
// while it computes); its own misses may replace its experts the gate did not choose.
bool evictable(const SlotInfo& s, int requesting_layer, int computing_layer) {
  return s.state == SlotState::kReady && !s.pinned && !s.held && !s.staging && !s.awaiting_gate &&
         (s.layer != computing_layer || s.layer == requesting_layer);
}
}  // namespace

const char* evictionName(Eviction e) {
  switch (e) {
    case Eviction::kLayerLru: return "layer-lru";
    case Eviction::kSharedLru: return "shared-lru";
    case Eviction::kLayerFrequency: return "layer-frequency";
    case Eviction::kSharedFrequency: return "shared-frequency";
    case Eviction::kSharedReuse: return "shared-reuse";
  }
  return "?";
}

Eviction parseEviction(const std::string& name) {
  for (Eviction e : {Eviction::kLayerLru, Eviction::kSharedLru, Eviction::kLayerFrequency,
                     Eviction::kSharedFrequency, Eviction::kSharedReuse})
    if (name == evictionName(e)) return e;
  throw std::invalid_argument("unknown eviction rule '" + name +
                              "' (layer-lru, shared-lru, layer-frequency, shared-frequency, shared-reuse)");
}

bool byFrequency(Eviction e) { return e == Eviction::kLayerFrequency || e == Eviction::kSharedFrequency; }
bool byWorth(Eviction e) { return byFrequency(e) || e == Eviction::kSharedReuse; }

int pickVictim(std::span<const SlotInfo> slots, int layer, int computing_layer, int layer_share,
               const VictimRule& rule) {
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i].state == SlotState::kEmpty && !slots[i].staging) return static_cast<int>(i);
  const bool by_worth = byWorth(rule.eviction) && rule.worth.size() == slots.size();
  // Whether slot a should go before slot b.
  auto before = [&](size_t a, size_t b) {
    if (by_worth && rule.worth[a] != rule.worth[b]) return rule.worth[a] < rule.worth[b];
    return slots[a].last_use < slots[b].last_use;
  };
  int own = 0;
  for (const SlotInfo& s : slots)
    if (s.layer == layer && !s.staging) ++own;
  int own_victim = -1, any_victim = -1;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!evictable(slots[i], layer, computing_layer)) continue;
    if (any_victim < 0 || before(i, size_t(any_victim))) any_victim = static_cast<int>(i);
    if (slots[i].layer == layer && (own_victim < 0 || before(i, size_t(own_victim))))
      own_victim = static_cast<int>(i);
  }
  const bool shared = rule.eviction == Eviction::kSharedLru || rule.eviction == Eviction::kSharedFrequency ||
                      rule.eviction == Eviction::kSharedReuse;
  return (!shared && own >= layer_share && own_victim >= 0) ? own_victim : any_victim;
}

SlotTable::SlotTable(int n_slots, int n_layers, int chunks_per_expert)
    : n_layers_(std::max(1, n_layers)), chunks_(chunks_per_expert), slots_(static_cast<size_t>(n_slots)) {
  if (n_slots <= 0 || chunks_per_expert <= 0)
    throw std::invalid_argument("SlotTable: need slots > 0, chunks > 0");
}

int SlotTable::layerShare() const { return std::max(1, (slotCount() - staging_) / n_layers_); }

int SlotTable::find(int layer, int expert) const {
  auto it = index_.find(key(layer, expert));
  return it == index_.end() ? -1 : it->second;
}

int SlotTable::reserve(int layer, int expert, bool predicted, double max_victim_worth) {
  if (const int slot = find(layer, expert); slot >= 0) {
    touch(slot);
    return slot;
  }
  VictimRule rule{eviction_, {}};
  if (byWorth(eviction_)) {
    worth_.resize(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) worth_[i] = worthOf(slots_[i].layer, slots_[i].expert);
    rule.worth = worth_;
  }
  const int victim = pickVictim(slots_, layer, computing_layer_, layerShare(), rule);
  if (victim < 0) return -1;
  SlotInfo& s = slots_[size_t(victim)];
  if (s.state != SlotState::kEmpty && worthOf(s.layer, s.expert) > max_victim_worth) return -1;
  if (s.state != SlotState::kEmpty) {
    index_.erase(key(s.layer, s.expert));
    ++evictions_;
  }
  SlotInfo fresh;  // never a staging slot: pickVictim skips those
  fresh.pending = s.pending;
  fresh.free_when_done = s.free_when_done;
  s = fresh;
  s.state = SlotState::kLoading;
  s.layer = layer;
  s.expert = expert;
  s.predicted = s.awaiting_gate = predicted;
  index_[key(layer, expert)] = victim;
  touch(victim);
  return victim;
}

void SlotTable::countGate(int layer, std::span<const int> experts) {
  if (layer < 0) return;
  if (eviction_ == Eviction::kSharedReuse) reuse_.observe(layer, experts);
  for (SlotInfo& s : slots_)
    if (s.layer == layer) s.awaiting_gate = false;
  if (size_t(layer) >= requests_.size()) {
    requests_.resize(size_t(layer) + 1);
    gate_scale_.resize(size_t(layer) + 1, 1.0);
  }
  std::vector<double>& counts = requests_[size_t(layer)];
  double& scale = gate_scale_[size_t(layer)];
  scale /= kFrequencyDecay;
  if (scale > 1e100) {  // rescale the layer before the weights overflow
    for (double& c : counts) c /= scale;
    scale = 1.0;
  }
  for (int e : experts) {
    if (e < 0) continue;
    if (size_t(e) >= counts.size()) counts.resize(size_t(e) + 1, 0.0);
    counts[size_t(e)] += scale;
  }
}

// In units of one request at the layer's latest gate, so that layers compare.
double SlotTable::worthOf(int layer, int expert) const {
  if (eviction_ == Eviction::kSharedReuse) return reuse_.value(layer, expert);
  if (layer < 0 || size_t(layer) >= requests_.size() || expert < 0) return 0.0;
  const std::vector<double>& counts = requests_[size_t(layer)];
  return size_t(expert) < counts.size() ? counts[size_t(expert)] / gate_scale_[size_t(layer)] : 0.0;
}

double SlotTable::admissionBound(double probability, double admission) const {
  if (admission <= 0) return std::numeric_limits<double>::infinity();
  const double per_gate = eviction_ == Eviction::kSharedReuse ? 1.0 : 1.0 - kFrequencyDecay;
  return probability / (admission * per_gate);
}

SlotState SlotTable::markChunkDone(int slot) {
  SlotInfo& s = at(slot);
  if (s.state != SlotState::kLoading) throw std::logic_error("SlotTable: chunk done on a slot not LOADING");
  if (++s.chunks_done >= chunks_) s.state = SlotState::kReady;
  return s.state;
}

void SlotTable::markReady(int slot) {
  SlotInfo& s = at(slot);
  if (s.state != SlotState::kLoading) throw std::logic_error("SlotTable: ready on a slot not LOADING");
  s.chunks_done = chunks_;
  s.state = SlotState::kReady;
}

void SlotTable::free(int slot) {
  SlotInfo& s = at(slot);
  if (s.state != SlotState::kEmpty) index_.erase(key(s.layer, s.expert));
  SlotInfo empty;  // the copy queue's bookkeeping stays: copies into it may still be in flight
  empty.staging = s.staging;
  empty.pending = s.pending;
  empty.free_when_done = s.free_when_done;
  s = empty;
}

void SlotTable::unpinAll() {
  for (SlotInfo& s : slots_) s.pinned = false;
}

void SlotTable::setStagingCount(int n) {
  if (n < 0 || n > slotCount()) throw std::invalid_argument("SlotTable: staging count outside 0..slots");
  for (int i = 0; i < slotCount(); ++i) {
    const bool staging = i >= slotCount() - n;
    if (staging != slots_[size_t(i)].staging && slots_[size_t(i)].state != SlotState::kEmpty)
      throw std::logic_error("SlotTable: staging slots can only change while EMPTY");
    slots_[size_t(i)].staging = staging;
  }
  staging_ = n;
}

int SlotTable::stagingSlot(int i) const {
  if (i < 0 || i >= staging_) throw std::out_of_range("SlotTable: no such staging slot");
  return slotCount() - staging_ + i;
}

void SlotTable::loadStaging(int slot, int layer, int expert) {
  SlotInfo& s = at(slot);
  if (!s.staging || s.state != SlotState::kEmpty)
    throw std::logic_error("SlotTable: loadStaging needs an EMPTY staging slot");
  if (index_.count(key(layer, expert))) throw std::logic_error("SlotTable: expert already cached");
  s.state = SlotState::kLoading;
  s.layer = layer;
  s.expert = expert;
  s.chunks_done = 0;
  index_[key(layer, expert)] = slot;
  touch(slot);
}

void SlotTable::hold(int slot) {
  SlotInfo& s = at(slot);
  if (s.staging || s.state == SlotState::kEmpty)
    throw std::logic_error("SlotTable: hold needs a cache slot in use");
  s.held = true;
}

void SlotTable::releaseHolds() {
  for (SlotInfo& s : slots_) s.held = false;
}

int SlotTable::heldCount() const {
  return static_cast<int>(
      std::count_if(slots_.begin(), slots_.end(), [](const SlotInfo& s) { return s.held; }));
}

int SlotTable::countState(SlotState state) const {
  return static_cast<int>(
      std::count_if(slots_.begin(), slots_.end(), [&](const SlotInfo& s) { return s.state == state; }));
}

int SlotTable::residentCount(int layer) const {
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [&](const SlotInfo& s) {
    return s.state != SlotState::kEmpty && !s.staging && s.layer == layer;
  }));
}

}  // namespace moe
