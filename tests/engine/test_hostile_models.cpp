// Hostile model files, by category (counts, lengths, products, offsets, types,
// alignment, vocabulary, file kinds): each is opened, loaded and, when the loader
// accepts it, run for a short generation, in a child process under a memory cap
// (RLIMIT_AS) and a CPU-time cap (RLIMIT_CPU; an alarm ends a wait that uses no CPU,
// a guard, never a measurement). The outcome must be the case's own error (every
// expected piece of text in it: the field, the tensor, the value) or, for the
// untouched control, a correct run; a crash, an abort, std::bad_alloc, a single
// allocation over 1 GiB (a size taken from a header) or an endless loop fails it. Files are the tests' tiny
// models, edited through GgufWriter or patched byte by byte where a writer would refuse the edit.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "support/engine_fixture.h"
#include "support/temp_dir.h"
#include "support/test_log.h"
#include "synth/synthetic_model.h"

using namespace moe;
using Bytes = std::vector<uint8_t>;

// In the child: a single allocation over 1 GiB ends it with exit code 5, so a size
// read from a hostile header cannot pass as a clean std::bad_alloc (operator new is
// replaced for this program; ASan and TSan intercept below it).
namespace {
std::atomic<bool> g_guard_allocations{false};
constexpr size_t kLargestAllocation = size_t{1} << 30;
void checkAllocation(size_t n) {
  if (n > kLargestAllocation && g_guard_allocations.load(std::memory_order_relaxed)) {
    static const char msg[] = "an allocation over 1 GiB\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(5);
  }
}
}  // namespace

namespace {
void* allocate(size_t n) {
  checkAllocation(n);
  return std::malloc(n ? n : 1);
}
void* allocateAligned(size_t n, std::align_val_t a) {
  checkAllocation(n);
  const size_t align = static_cast<size_t>(a);
  return std::aligned_alloc(align, (std::max<size_t>(n, 1) + align - 1) / align * align);
}
void* orThrow(void* p) {
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

// Every form, so that no allocation reaches a sanitizer's own operator new and then
// this free (which ASan would report as a mismatch).
void* operator new(size_t n) { return orThrow(allocate(n)); }
void* operator new[](size_t n) { return orThrow(allocate(n)); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new(size_t n, std::align_val_t a) { return orThrow(allocateAligned(n, a)); }
void* operator new[](size_t n, std::align_val_t a) { return orThrow(allocateAligned(n, a)); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocateAligned(n, a);
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocateAligned(n, a);
}
// The replaced operator new allocates with malloc: its delete frees (which GCC,
// seeing a delete call free, takes for a mismatch).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace {

Bytes tinyModel(const std::function<void(gguf::GgufWriter&)>& edit = {}, const std::string& arch = "llama") {
  auto w = synth::buildModel(synth::tinySpec(arch));
  if (edit) edit(w);
  return w.toBytes();
}

// A tiny qwen35moe (gated delta-net layers) with one metadata key changed.
Bytes tinyDeltaNet(const std::function<void(gguf::GgufWriter&)>& edit) {
  return tinyModel(edit, "qwen35moe");
}

// Offset of the first occurrence of a GGUF string (u64 length + bytes) in b.
size_t findGgufString(const Bytes& b, const std::string& s) {
  Bytes needle(8 + s.size());
  const uint64_t n = s.size();
  std::memcpy(needle.data(), &n, 8);
  std::copy(s.begin(), s.end(), needle.begin() + 8);
  const auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end());
  if (it == b.end()) throw std::logic_error("test: string not in file: " + s);
  return size_t(it - b.begin());
}

template <class T>
void put(Bytes& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

// Where a tensor's info puts its type (u32) and data offset (u64).
struct TensorInfoAt {
  size_t type, offset;
};
TensorInfoAt tensorInfo(const Bytes& b, const std::string& name) {
  const size_t at = findGgufString(b, name) + 8 + name.size();
  uint32_t n_dims = 0;
  std::memcpy(&n_dims, b.data() + at, 4);
  const size_t type = at + 4 + 8 * size_t(n_dims);
  return {type, type + 4};
}

Bytes patched(const std::function<void(Bytes&)>& patch) {
  Bytes b = tinyModel();
  patch(b);
  return b;
}

// The writer refuses a bad alignment, so the value is patched after writing.
Bytes withAlignment(uint32_t alignment) {
  Bytes b = tinyModel([](gguf::GgufWriter& w) { w.setAlignment(32); });
  put<uint32_t>(b, findGgufString(b, "general.alignment") + 8 + 17 + 4, alignment);
  return b;
}

struct Case {
  const char* name;
  std::function<Bytes()> bytes;     // the file's content (unused for special kinds)
  std::vector<std::string> expect;  // every piece must be in the error; empty: the file must run
  enum Kind { File, Directory, Fifo } kind = File;
};

std::vector<Case> cases() {
  return {
      // counts
      {"counts/block_count 2e8",
       [] { return tinyModel([](auto& w) { w.setUint32("llama.block_count", 200000000); }); },
       {"block_count = 200000000 is above the supported maximum"}},
      {"counts/expert_count 2e7",
       [] { return tinyModel([](auto& w) { w.setUint32("llama.expert_count", 20000000); }); },
       {"expert_count = 20000000 is above the supported maximum"}},
      {"counts/expert_used_count 0",
       [] { return tinyModel([](auto& w) { w.setUint32("llama.expert_used_count", 0); }); },
       {"expert_used_count must be in 1..expert_count"}},
      {"counts/head_count 0",
       [] { return tinyModel([](auto& w) { w.setUint32("llama.attention.head_count", 0); }); },
       {"attention.head_count must be > 0"}},
      {"counts/one token in the vocabulary",
       [] { return tinyModel([](auto& w) { w.setStringArray("tokenizer.ggml.tokens", {"a"}); }); },
       {"tokenizer.ggml.scores has 320 entries, tokenizer.ggml.tokens has 1"}},
      // lengths
      {"lengths/string past the end",
       [] {
         return patched([](Bytes& b) {
           put<uint64_t>(b, findGgufString(b, "general.name") + 8 + 12 + 4, uint64_t(1) << 62);
         });
       },
       {"truncated file", "value of key 'general.name'"}},
      {"lengths/tensor name of 2^40 bytes",
       [] {
         return patched(
             [](Bytes& b) { put<uint64_t>(b, findGgufString(b, "output_norm.weight"), uint64_t(1) << 40); });
       },
       {"truncated file", "name of tensor 21 (1099511627776 bytes)"}},
      // products
      {"products/heads x key_length wraps",
       [] {
         return tinyModel([](auto& w) {
           w.setUint32("llama.attention.head_count", 32769);
           w.setUint32("llama.attention.head_count_kv", 32769);
           w.setUint32("llama.attention.key_length", 131072);
         });
       },
       {"head_count x head dimension = 4295098368 is above the supported maximum"}},
      // the delta-net state's shape (qwen35moe), refused before anything is sized from it
      {"products/ssm conv_kernel 0",
       [] { return tinyDeltaNet([](auto& w) { w.setUint32("qwen35moe.ssm.conv_kernel", 0); }); },
       {"qwen35moe.ssm.conv_kernel must be > 0"}},
      {"products/ssm inner_size not a multiple of the value heads",
       [] { return tinyDeltaNet([](auto& w) { w.setUint32("qwen35moe.ssm.inner_size", 63); }); },
       {"qwen35moe.ssm.inner_size (63) must be a positive multiple of qwen35moe.ssm.time_step_rank"}},
      {"products/ssm state_size 2^20",
       [] { return tinyDeltaNet([](auto& w) { w.setUint32("qwen35moe.ssm.state_size", 1u << 20); }); },
       {"qwen35moe.ssm.state_size = 1048576 is above the supported maximum"}},
      // minimax-m2's heads are wider than embedding_length / head_count: a key_length that
      // disagrees with the tensors is refused naming one, an odd rotary width by its key
      {"minimax-m2/key_length disagrees with attn_q",
       [] {
         return tinyModel(
             [](auto& w) {
               w.setUint32("minimax-m2.attention.key_length", 16);
               w.setUint32("minimax-m2.attention.value_length", 16);
             },
             "minimax-m2");
       },
       {"tensor 'blk.0.attn_q.weight' has shape"}},
      {"minimax-m2/odd rope.dimension_count",
       [] {
         return tinyModel([](auto& w) { w.setUint32("minimax-m2.rope.dimension_count", 15); }, "minimax-m2");
       },
       {"rope.dimension_count must be even"}},
      // gemma4's per-layer arrays and shapes, refused before anything is sized from them
      {"products/gemma4 head_count_kv array of 2^40",
       [] {
         return tinyModel(
             [](auto& w) {
               std::vector<gguf::Value> kv(6, gguf::Value::ofUint(gguf::ValueType::U64, uint64_t(1) << 40));
               w.setValue("gemma4.attention.head_count_kv", gguf::Value::ofArray(gguf::ValueType::U64, kv));
             },
             "gemma4");
       },
       {"head_count_kv"}},
      {"products/gemma4 sliding_window_pattern longer than block_count",
       [] {
         return tinyModel(
             [](auto& w) {
               std::vector<gguf::Value> flags(1000, gguf::Value::ofBool(true));
               w.setValue("gemma4.attention.sliding_window_pattern",
                          gguf::Value::ofArray(gguf::ValueType::Bool, flags));
             },
             "gemma4");
       },
       {"gemma4.attention.sliding_window_pattern' has 1000 entries; block_count is 6"}},
      {"products/gemma4 key_length_swa 2^21",
       [] {
         return tinyModel(
             [](auto& w) {
               w.setUint32("gemma4.attention.key_length_swa", 1u << 21);
               w.setUint32("gemma4.attention.value_length_swa", 1u << 21);
             },
             "gemma4");
       },
       {"gemma4.attention.key_length_swa = 2097152 is above the supported maximum"}},
      {"products/gemma4 a merge without two sides",
       [] {
         return tinyModel(
             [](auto& w) {
               w.setStringArray("tokenizer.ggml.merges", {"ab", "a b"});
             },
             "gemma4");
       },
       {"tokenizer.ggml.merges[0]"}},
      {"products/embedding_length 2^30",
       [] { return tinyModel([](auto& w) { w.setUint32("llama.embedding_length", 1u << 30); }); },
       {"embedding_length = 1073741824 is above the supported maximum"}},
      // offsets
      {"offsets/tensor past the end",
       [] {
         return patched([](Bytes& b) {
           put<uint64_t>(b, tensorInfo(b, "output_norm.weight").offset, uint64_t(1) << 40);
         });
       },
       {"tensor 'output_norm.weight'", "runs past end of file"}},
      {"offsets/tensor misaligned",
       [] {
         return patched([](Bytes& b) {
           const size_t at = tensorInfo(b, "output_norm.weight").offset;
           uint64_t off = 0;
           std::memcpy(&off, b.data() + at, 8);
           put<uint64_t>(b, at, off + 1);
         });
       },
       {"tensor 'output_norm.weight'", "is not a multiple of the alignment 32"}},
      {"offsets/two tensors on the same bytes",
       [] {
         return patched([](Bytes& b) {
           uint64_t off = 0;
           std::memcpy(&off, b.data() + tensorInfo(b, "blk.0.attn_norm.weight").offset, 8);
           put<uint64_t>(b, tensorInfo(b, "blk.1.attn_norm.weight").offset, off);
         });
       },
       {"tensor 'blk.1.attn_norm.weight'", "overlaps tensor 'blk.0.attn_norm.weight'"}},
      // types
      {"types/tensor type 1000",
       [] {
         return patched([](Bytes& b) { put<uint32_t>(b, tensorInfo(b, "output_norm.weight").type, 1000); });
       },
       {"tensor 'output_norm.weight'", "unknown tensor type id 1000"}},
      {"types/experts in a type the engine cannot compute",
       [] { return Bytes(tinyModelWithUncomputedExperts()); },
       {"blk.0.ffn_gate_exps.weight", "cannot compute"}},
      {"types/metadata value type 99",
       [] {
         return patched([](Bytes& b) { put<uint32_t>(b, findGgufString(b, "general.name") + 8 + 12, 99); });
       },
       {"key 'general.name'", "unknown value type 99"}},
      // alignment
      {"alignment/0", [] { return withAlignment(0); }, {"general.alignment 0 is not a power of two"}},
      {"alignment/3", [] { return withAlignment(3); }, {"general.alignment 3 is not a power of two"}},
      {"alignment/2^31",
       [] { return withAlignment(1u << 31); },
       {"general.alignment 2147483648 exceeds the supported maximum"}},
      // vocabulary
      {"vocab/no tokens",
       [] { return tinyModel([](auto& w) { w.setStringArray("tokenizer.ggml.tokens", {}); }); },
       {"missing or empty tokenizer.ggml.tokens"}},
      {"vocab/bos id 1e9",
       [] { return tinyModel([](auto& w) { w.setUint32("tokenizer.ggml.bos_token_id", 1000000000); }); },
       {"tokenizer.ggml.bos_token_id = 1000000000 is outside the vocabulary"}},
      {"vocab/scores shorter than tokens",
       [] { return tinyModel([](auto& w) {
              w.setFloat32Array("tokenizer.ggml.scores", {0.0f, 1.0f});
            }); },
       {"tokenizer.ggml.scores has 2 entries, tokenizer.ggml.tokens has 320"}},
      // file kinds
      {"kinds/empty file", [] { return Bytes{}; }, {"empty file (no GGUF header)"}},
      {"kinds/truncated in the tensor data",
       [] {
         Bytes b = tinyModel();
         b.resize(b.size() / 2);
         return b;
       },
       {"tensor 'blk.0.ffn_down_exps.weight'", "runs past end of file"}},
      {"kinds/a PNG",
       [] { return Bytes{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13}; },
       {"not a GGUF file (bad magic)"}},
      {"kinds/a directory", [] { return Bytes{}; }, {"not a regular file"}, Case::Directory},
      {"kinds/a FIFO", [] { return Bytes{}; }, {"not a regular file"}, Case::Fifo},
      // the control: an untouched file runs
      {"control/the tiny model", [] { return tinyModel(); }, {}},
  };
}

// In this (child) process: open, load and generate 3 tokens; the message of the
// first exception, or "" after a correct run (*bad_alloc: it was std::bad_alloc).
std::string loadAndRun(const std::string& path, bool* bad_alloc) {
  try {
    auto backend = makeCpuBackend(1);
    auto model = Model::load(gguf::GgufFile::open(path), *backend);
    ResidentExpertSource experts(model->hostExperts());
    Transformer t(*model, *backend, experts, 32);
    std::vector<int32_t> ids =
        model->tokenizer().encode("hi there", model->tokenizer().addBosDefault(), false);
    if (ids.empty()) ids.push_back(0);
    std::vector<float> logits;
    t.forward(ids, logits);
    for (int step = 0; step < 3; ++step) {
      const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      t.forward({&next, 1}, logits);
    }
    if (logits.size() != size_t(model->config().n_vocab)) return "wrong logits size";
    return {};
  } catch (const std::bad_alloc& e) {
    *bad_alloc = true;
    return e.what();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return what.empty() ? "(an exception without a message)" : what;
  }
}

// One row of cleanErrorOrCorrectRun (a fatal failure ends the row, not the case).
void checkCase(const Case& c) {
  moe::test::TempDir dir;
  const std::string path = dir.file("model.gguf");
  if (c.kind == Case::Directory) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    ASSERT_TRUE(std::filesystem::is_directory(path)) << ec.message();
  } else if (c.kind == Case::Fifo) {
    ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  } else {
    const Bytes b = c.bytes();
    std::ofstream f(path, std::ios::binary);
    ASSERT_TRUE(f.is_open());
    f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
    f.close();
    ASSERT_TRUE(f.good()) << "writing " << b.size() << " bytes to " << path;
  }
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_TRUE(child >= 0);
  if (child == 0) {
    close(pipe_fds[0]);
    const rlimit cpu{120, 120};  // seconds of CPU: an endless loop ends as SIGXCPU
    setrlimit(RLIMIT_CPU, &cpu);
    alarm(600);  // a wait that uses no CPU (a FIFO's open) ends as SIGALRM
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    const rlimit mem{rlim_t(4) << 30, rlim_t(4) << 30};  // a header-sized allocation fails
    setrlimit(RLIMIT_AS, &mem);
#endif
    g_guard_allocations = true;
    bool bad_alloc = false;
    const std::string message = loadAndRun(path, &bad_alloc);
    if (!message.empty() && write(pipe_fds[1], message.data(), message.size()) < 0) _exit(4);
    _exit(bad_alloc ? 6 : message.empty() ? 0 : 3);
  }
  close(pipe_fds[1]);
  std::string message;
  char buf[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof buf)) > 0;) message.append(buf, size_t(n));
  close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  const int code = WEXITSTATUS(status);
  ASSERT_TRUE(code != 5) << "an allocation over 1 GiB (a size taken from the file?)";
  ASSERT_TRUE(code != 6) << "std::bad_alloc: " << message;
  ASSERT_TRUE(code == 0 || code == 3) << "exit code " << code;
  if (c.expect.empty()) {
    ASSERT_TRUE(code == 0) << message;
  } else {
    ASSERT_TRUE(code == 3) << "accepted a file that must be refused";
    for (const std::string& piece : c.expect)
      ASSERT_TRUE(message.find(piece) != std::string::npos) << "'" << piece << "' not in: " << message;
  }
  moe::test::info("%s: %s", c.name, code == 0 ? "ran" : message.c_str());
}

}  // namespace

TEST(HostileModels, cleanErrorOrCorrectRun) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    checkCase(c);
  }
}
