// Traces recorded while the user chats ("learning from use", docs/predictor.md):
// one trace file per (model, conversation) under a folder, by default the app's
// data folder + "/use-traces":
//   <root>/<model sha256>/<conversation id>.moetrace
// Each reply appends one prompt to its conversation's file. The files live
// outside SQLite (docs/STORAGE.md): they grow to hundreds of MB for a real
// model, are written as the layers run, and deleting a conversation deletes
// them at once. Qt-free; a value over a folder (cheap to make).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "offload/trainer/trace_file.h"

namespace moe {

struct UseTraceSummary {
  std::string model_sha256;
  int conversations = 0;   // trace files
  int64_t tokens = 0;      // in complete prompts
  uint64_t bytes = 0;      // on disk
  std::string model_name;  // from the first readable file's header
};

class UseTraceStore {
 public:
  // Below this many recorded tokens a model's traces are not worth a training
  // run: the built-in prompt set the predictors are tested on is about 4,400
  // tokens (docs/predictor.md).
  static constexpr int64_t kRetrainSuggestTokens = 4096;

  explicit UseTraceStore(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }

  // Where replies of conversation `conversation_id` with the model of this
  // SHA-256 are recorded. Throws std::invalid_argument unless sha256 is 64 hex
  // digits (it names a folder).
  std::string pathFor(const std::string& model_sha256, int64_t conversation_id) const;
  // Removes the conversation's traces of every model; returns the files removed.
  int removeConversation(int64_t conversation_id) const;
  // Removes every recorded trace (the root folder's contents).
  int removeAll() const;

  std::vector<UseTraceSummary> summaries() const;  // one per model folder with traces
  UseTraceSummary summary(const std::string& model_sha256) const;
  uint64_t totalBytes() const;

  // Where mergeFor's result for the predictor wizard goes: <root>/<sha256>.merged.moetrace.
  // Merged files are removed with any conversation (they hold its hidden states).
  std::string mergedPathFor(const std::string& model_sha256) const;

  // Merges the model's traces into one file at `output` for training
  // (mergeTraces; unreadable files are skipped). Returns the result; prompts ==
  // 0 when there is nothing (and then no file is written).
  TraceMergeResult mergeFor(const std::string& model_sha256, const std::string& output) const;

 private:
  std::vector<std::string> filesFor(const std::string& model_sha256) const;
  std::string root_;
};

}  // namespace moe
