#include "app/core/use_traces.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

namespace moe {
namespace fs = std::filesystem;
namespace {

constexpr const char* kExtension = ".moetrace";

bool isSha256(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

}  // namespace

std::string UseTraceStore::pathFor(const std::string& model_sha256, int64_t conversation_id) const {
  if (!isSha256(model_sha256))
    throw std::invalid_argument("use traces: \"" + model_sha256 + "\" is not a SHA-256");
  return (fs::path(root_) / model_sha256 / (std::to_string(conversation_id) + kExtension)).string();
}

std::string UseTraceStore::mergedPathFor(const std::string& model_sha256) const {
  if (!isSha256(model_sha256))
    throw std::invalid_argument("use traces: \"" + model_sha256 + "\" is not a SHA-256");
  return (fs::path(root_) / (model_sha256 + ".merged" + kExtension)).string();
}

namespace {
// Merged files hold copies of every conversation's states: any deletion drops them.
void removeMerged(const std::string& root) {
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(root, ec)) {
    const std::string name = f.path().filename().string();
    if (f.is_regular_file(ec) && name.find(".merged.moetrace") != std::string::npos) fs::remove(f.path(), ec);
  }
}
}  // namespace

int UseTraceStore::removeConversation(int64_t conversation_id) const {
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) return 0;
  removeMerged(root_);
  int removed = 0;
  const std::string name = std::to_string(conversation_id) + kExtension;
  for (const auto& dir : fs::directory_iterator(root_, ec)) {
    if (!dir.is_directory(ec)) continue;
    for (const std::string& file : {name, name + ".part"})
      if (fs::remove(dir.path() / file, ec)) ++removed;
  }
  return removed;
}

int UseTraceStore::removeAll() const {
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) return 0;
  removeMerged(root_);
  int removed = 0;
  for (const auto& dir : fs::directory_iterator(root_, ec)) {
    if (!dir.is_directory(ec) || !isSha256(dir.path().filename().string())) continue;
    for (const auto& f : fs::directory_iterator(dir.path(), ec))
      if (f.path().extension() == kExtension) ++removed;
    fs::remove_all(dir.path(), ec);
  }
  return removed;
}

std::vector<std::string> UseTraceStore::filesFor(const std::string& model_sha256) const {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path dir = fs::path(root_) / model_sha256;
  if (!isSha256(model_sha256) || !fs::is_directory(dir, ec)) return out;
  for (const auto& f : fs::directory_iterator(dir, ec))
    if (f.is_regular_file(ec) && f.path().extension() == kExtension) out.push_back(f.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

UseTraceSummary UseTraceStore::summary(const std::string& model_sha256) const {
  UseTraceSummary s;
  s.model_sha256 = model_sha256;
  std::error_code ec;
  for (const std::string& file : filesFor(model_sha256)) {
    ++s.conversations;
    s.bytes += fs::file_size(file, ec);
    try {
      const TraceReader r(file);
      s.tokens += r.totalTokens();
      if (s.model_name.empty()) s.model_name = r.header().model_name;
    } catch (const std::exception&) {
      // a damaged file still counts its bytes (removeAll frees them)
    }
  }
  return s;
}

std::vector<UseTraceSummary> UseTraceStore::summaries() const {
  std::vector<UseTraceSummary> out;
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) return out;
  for (const auto& dir : fs::directory_iterator(root_, ec)) {
    const std::string sha = dir.path().filename().string();
    if (!dir.is_directory(ec) || !isSha256(sha)) continue;
    UseTraceSummary s = summary(sha);
    if (s.conversations > 0) out.push_back(std::move(s));
  }
  return out;
}

uint64_t UseTraceStore::totalBytes() const {
  uint64_t n = 0;
  for (const auto& s : summaries()) n += s.bytes;
  return n;
}

TraceMergeResult UseTraceStore::mergeFor(const std::string& model_sha256, const std::string& output) const {
  std::vector<std::string> inputs;
  for (const std::string& file : filesFor(model_sha256)) {
    try {
      const TraceReader r(file);
      if (r.header().model_sha256 == model_sha256 && r.totalTokens() > 0) inputs.push_back(file);
    } catch (const std::exception&) {
      // unreadable: left out
    }
  }
  if (inputs.empty()) return {};
  return mergeTraces(inputs, output);
}

}  // namespace moe
