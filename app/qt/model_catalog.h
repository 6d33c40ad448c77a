// The catalog of models a user can download: id, name, family, quant, url, size,
// SHA-256, licence, what running it needs, and the model's shape (a preset of
// synth/synthetic_model.h), so whether it fits can be estimated before a byte is
// downloaded. The built-in catalog is resources/catalog.json, compiled in as
// ":/catalog.json". A missing size or checksum stays missing (never guessed):
// checksumNote() says so in words the UI shows.
#pragma once

#include <QByteArray>
#include <QList>
#include <QString>
#include <optional>
#include <stdexcept>

#include "app/core/load_plan.h"

namespace moe {

class CatalogError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CatalogEntry {
  QString id, name, family, quant, shape;  // shape: a synth::presetNames() entry
  QString url, sha256, licence, needs;
  qint64 size_bytes = -1;    // -1: no published size
  QString fileName() const;  // the url's last path segment
  bool hasChecksum() const { return !sha256.isEmpty(); }
  // "SHA-256 checked" / "no published checksum: size checked only" / ... for the UI.
  QString checksumNote() const;
  QString checksumShort() const;  // "SHA-256", "size only", "none"
};

// What a model needs before it is downloaded, from its shape and quant type.
struct CatalogFit {
  LoadPlan plan;  // what would load: weights on the GPU, expert-cache slots at the budget
  uint64_t estimated_file_bytes = 0;
  uint64_t ram_available = 0;    // MemAvailable now; 0 unknown
  bool ram_ok = true;            // pinned expert store + 1 GiB fits in what is available
  QString summary() const;       // the whole story in one line
  QString shortSummary() const;  // a table cell: "yes, 45% of experts cached", "no: ..."
};

class ModelCatalog {
 public:
  // Parses and checks a catalog document. Throws CatalogError naming the entry and field.
  static ModelCatalog fromJson(const QByteArray& json);
  // The catalog compiled into the app (resources/catalog.json).
  static ModelCatalog builtIn();

  const QList<CatalogEntry>& entries() const { return entries_; }
  const CatalogEntry* find(const QString& id) const;
  // Replaces or adds an entry (tests point one at a local server).
  void add(const CatalogEntry& e);

 private:
  QList<CatalogEntry> entries_;
};

// The plan of `entry` for `request` on `device` (resolveLoadPlan, app/core/load_plan.h),
// from the entry's shape preset and quant type; the request's context is clamped to
// the preset's. `ram_available` 0 reads MemAvailable of this machine.
CatalogFit estimateCatalogFit(const CatalogEntry& entry, const PlanRequest& request,
                              const DeviceMemory& device, uint64_t ram_available = 0);

QString humanBytes(uint64_t bytes);

}  // namespace moe
