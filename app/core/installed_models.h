// The models the user has, described once for every view that lists them (the
// models view, the model menu): each registered file and each GGUF file in the
// models folder, plus the embedded demo model, once. Qt-free.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "app/core/app_database.h"
#include "app/core/load_plan.h"
#include "app/core/model_registry.h"

namespace moe {

struct InstalledModel {
  std::string name;
  std::string path;  // empty: the embedded demo model
  std::string architecture, quant;
  uint64_t size_bytes = 0;
  int n_ctx = 0;            // the context it was trained for
  std::string sha256;       // empty until hashed (files put into the folder by hand)
  int64_t registry_id = 0;  // 0: not registered
  std::string predictor;    // "predictor 87%", "" without one
  std::string fit;          // its plan (resolveLoadPlan): planShort(), or why the file could not be read
  std::string fit_detail;   // planSummary()
  bool demo = false;
  bool readable = true;           // false: the file is not a model this engine opens (fit says why)
  bool in_models_folder = false;  // listed while it is in the models folder, registered or not
};

// What each model's plan is resolved with, besides its shape: the budget setting, the
// device, the policy and each model's context length (by path, "" for the demo).
struct PlanInputs {
  BudgetSetting budget;
  DeviceMemory device;
  OffloadPolicy policy = OffloadPolicy::kProactive;
  std::function<int(const std::string& path)> context_of;  // empty: 4096 tokens
};

// The demo model first, then the registered files that still exist, then the
// GGUF files of `folder_files` not registered, each described from its header with
// its load plan for `inputs` (host RAM from this machine).
// read_files false: names, paths and predictors only, no file opened (the model menu).
std::vector<InstalledModel> listInstalledModels(AppDatabase& db, ModelRegistry& registry,
                                                const std::vector<std::string>& folder_files,
                                                const PlanInputs& inputs, bool read_files = true);

// Takes a registered model off the list without touching its file (nor the
// predictors stored for its content). A file in the models folder is listed while it
// is there, and the demo model always: refused for those. Returns what went wrong,
// empty on success.
std::string forgetInstalledModel(ModelRegistry& registry, const InstalledModel& model);

// Deletes the model's file, its registry rows and the predictors stored for its
// SHA-256 (unless another registered file has the same content). The demo model
// cannot be removed. Returns what went wrong, empty on success.
std::string removeInstalledModel(AppDatabase& db, ModelRegistry& registry, const InstalledModel& model);

}  // namespace moe
