// The state of every slot of the device expert cache, in one place: what each
// slot holds (EMPTY, LOADING with chunks_done of kChunks copied, READY; owned by
// one (layer, expert)), what protects it from eviction (pinned for the computing
// layer's execution order, held by the static policy, a staging slot), and the
// copy queue's bookkeeping (copies queued or in flight, freed when they land).
//
// Eviction is a pure function of the table (pickVictim): an EMPTY cache slot if
// there is one; otherwise a victim among the evictable slots: READY, not pinned,
// not held, not staging, and not of the computing layer unless that layer asks
// (its gate's experts are pinned). LOADING slots are never
// evicted, nor a prefetched slot awaiting its layer's gate. Which one, by the
// table's Eviction rule:
//  - kLayerLru (ProMoE's): when the requesting layer already holds at least its
//    share (cache slots / layers, at least 1) that layer's least-recently-used
//    evictable slot; otherwise (or when the layer has none evictable) the globally
//    least-recently-used one;
//  - kSharedLru: the globally least-recently-used one, whatever the layer;
//  - kLayerFrequency: as kLayerLru, but by frequency instead of recency: the slot
//    whose expert its layer's gates asked for least, each request weighted by
//    kFrequencyDecay per later gate of that layer (ties: the least recent);
//  - kSharedFrequency: the least-asked-for slot whatever the layer (the weights
//    are counted in requests at each layer's latest gate, so layers compare);
//  - kSharedReuse: the slot whose expert is least likely to be asked for within
//    the next few gates of its layer (offload/reuse_model.h: recency and frequency
//    calibrated on the routing served, or a predictor's hint for a layer about to run).
// Real routing keeps returning to a layer's favourite experts, which recency alone
// forgets (docs/offload.md, "Real routing").
// Recency is a logical clock bumped on reserve and on use.
//
// Staging slots (the last `stagingCount()` slots) are never handed out by
// reserve(): a layer that needs more experts than its share streams them through
// these in execution order (loadStaging). Held slots stay until releaseHolds().
//
// Not thread-safe: the copy queue (TransferWorker) owns it and guards it with the
// one lock of the slot state.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "offload/reuse_model.h"

namespace moe {

enum class SlotState : uint8_t { kEmpty, kLoading, kReady };

enum class Eviction : uint8_t { kLayerLru, kSharedLru, kLayerFrequency, kSharedFrequency, kSharedReuse };
// "layer-lru", "shared-lru", "layer-frequency", "shared-frequency", "shared-reuse"
const char* evictionName(Eviction e);
// Throws std::invalid_argument naming the valid rules.
Eviction parseEviction(const std::string& name);

struct SlotInfo {
  SlotState state = SlotState::kEmpty;
  int layer = -1, expert = -1;
  int chunks_done = 0;
  bool predicted = false;  // reserved by a prediction (for prefetch-hit accounting)
  // Reserved by a prediction whose layer's gate has not run since: not evicted
  // until then (else the next layer's prefetch would evict it first, its expert
  // never having been asked for).
  bool awaiting_gate = false;
  bool pinned = false;  // in the computing layer's execution order
  uint64_t last_use = 0;
  bool staging = false;         // a staging slot (never handed out by reserve())
  bool held = false;            // pinned across layers (static policy)
  int pending = 0;              // copy tasks queued or in flight into the slot
  bool free_when_done = false;  // dropped while a copy into it is in flight: freed when it lands
};

// How pickVictim ranks the evictable slots: the rule, and for the frequency and
// reuse rules each slot's weight (its expert's decayed request count, or its value).
struct VictimRule {
  Eviction eviction = Eviction::kLayerLru;
  std::span<const double> worth;  // [slots], read by the frequency and reuse rules only
};

// The slot reserve() takes for `layer`, or -1 when none can be evicted.
int pickVictim(std::span<const SlotInfo> slots, int layer, int computing_layer, int layer_share,
               const VictimRule& rule = {});

class SlotTable {
 public:
  SlotTable(int n_slots, int n_layers, int chunks_per_expert);

  // Weight of a request n gates of its layer ago, against one now (frequency rules).
  static constexpr double kFrequencyDecay = 0.95;

  int slotCount() const { return static_cast<int>(slots_.size()); }
  void setEviction(Eviction e) { eviction_ = e; }
  Eviction eviction() const { return eviction_; }
  // The gate of `layer` asked for `experts` (hits and misses alike): the request
  // counts the frequency rules rank by.
  void countGate(int layer, std::span<const int> experts);
  int chunksPerExpert() const { return chunks_; }
  int layerShare() const;  // (slots - staging) / layers, at least 1
  const SlotInfo& at(int slot) const { return slots_.at(static_cast<size_t>(slot)); }
  SlotInfo& at(int slot) { return slots_.at(static_cast<size_t>(slot)); }

  int find(int layer, int expert) const;  // slot, or -1
  // The slot of (layer, expert) if present (touched); else a fresh LOADING slot
  // (chunks_done 0) from pickVictim; -1 when nothing can be evicted, or when the
  // victim holds an expert worth more than `max_victim_worth` (a prefetch's
  // admission: see worthOf and admissionBound).
  int reserve(int layer, int expert, bool predicted,
              double max_victim_worth = std::numeric_limits<double>::infinity());
  // What eviction ranks (layer, expert) by: under kSharedReuse its ReuseModel value
  // (a probability); otherwise its decayed request count, in requests at its layer's
  // latest gate: an expert its layer asks for with probability q per gate is worth
  // about q / (1 - kFrequencyDecay). Counted whatever the eviction rule.
  double worthOf(int layer, int expert) const;
  // The most a victim may be worth for a guess of `probability` to evict it, with
  // admission ratio `admission` (0: any): p >= admission x the victim's per-gate
  // request rate (frequency rules), or p >= admission x its value (kSharedReuse).
  double admissionBound(double probability, double admission) const;
  ReuseModel& reuse() { return reuse_; }
  // One more chunk copied; READY after the last. Returns the new state.
  SlotState markChunkDone(int slot);
  void markReady(int slot);  // all chunks at once (whole-expert copies)
  void free(int slot);       // back to EMPTY (never for a slot being written)
  void touch(int slot) { at(slot).last_use = ++clock_; }

  void setComputingLayer(int layer) { computing_layer_ = layer; }  // -1: none
  int computingLayer() const { return computing_layer_; }
  void pin(int slot) { at(slot).pinned = true; }
  void unpinAll();

  // Makes the last n slots staging slots (they must be EMPTY).
  void setStagingCount(int n);
  int stagingCount() const { return staging_; }
  int stagingSlot(int i) const;  // the i-th staging slot
  // A staging slot (EMPTY) becomes LOADING for (layer, expert); free() empties it.
  void loadStaging(int slot, int layer, int expert);

  void hold(int slot);  // a cache slot in use, never evicted until releaseHolds()
  void releaseHolds();
  int heldCount() const;

  int countState(SlotState state) const;
  int residentCount(int layer) const;  // LOADING + READY slots of the layer (staging not counted)
  uint64_t evictions() const { return evictions_; }

 private:
  static uint64_t key(int layer, int expert) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(layer)) << 32) | static_cast<uint32_t>(expert);
  }

  int n_layers_;
  int chunks_;
  std::vector<SlotInfo> slots_;
  std::unordered_map<uint64_t, int> index_;

  int computing_layer_ = -1;
  int staging_ = 0;
  Eviction eviction_ = Eviction::kLayerLru;
  // [layer][expert] requests, each added as gate_scale_[layer] (which grows by
  // 1 / kFrequencyDecay per gate), so older ones weigh less without a pass per gate.
  std::vector<std::vector<double>> requests_;
  std::vector<double> gate_scale_;
  std::vector<double> worth_;  // pickVictim's per-slot view of worthOf
  ReuseModel reuse_;
  uint64_t clock_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace moe
