// Hostile model files, by category (counts, lengths, products, offsets, types,
// alignment, vocabulary, file kinds): each is opened, loaded and, when the loader
// accepts it, run for a short generation, in a child process under a memory cap
// (RLIMIT_AS) and a CPU-time cap (RLIMIT_CPU; an alarm ends a wait that uses no CPU,
// a guard, never a measurement). The outcome must be a clean error
// naming the problem or a correct run; a crash, an abort, a runaway allocation or
// an endless loop fails the case. Files are the tests' tiny models, edited through
// GgufWriter or patched byte by byte where a writer would refuse the edit.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "engine_fixture.h"
#include "models/gguf.h"
#include "models/synthetic_model.h"
#include "support/temp_dir.h"
#include "support/test_log.h"

using namespace moe;
using Bytes = std::vector<uint8_t>;

namespace {

Bytes tinyModel(const std::function<void(gguf::GgufWriter&)>& edit = {}) {
  auto w = synth::buildModel(synth::tinySpec("llama"));
  if (edit) edit(w);
  return w.toBytes();
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
  std::function<Bytes()> bytes;  // the file's content (unused for special kinds)
  const char* expect;            // substring of the error; "" any clean error; nullptr: must run
  enum Kind { File, Directory, Fifo } kind = File;
};

std::vector<Case> cases() {
  return {
      // counts
      {"counts/block_count 2e8",
       [] { return tinyModel([](auto& w) { w.setUint32("llama.block_count", 200000000); }); }, "block_count"},
      {"counts/expert_count 2e7",
       [] { return tinyModel([](auto& w) { w.setUint32("llama.expert_count", 20000000); }); },
       "expert_count"},
      {"counts/expert_used_count 0",
       [] { return tinyModel([](auto& w) { w.setUint32("llama.expert_used_count", 0); }); },
       "expert_used_count"},
      {"counts/head_count 0",
       [] { return tinyModel([](auto& w) { w.setUint32("llama.attention.head_count", 0); }); }, "head_count"},
      {"counts/one token in the vocabulary",
       [] { return tinyModel([](auto& w) { w.setStringArray("tokenizer.ggml.tokens", {"a"}); }); }, ""},
      // lengths
      {"lengths/string past the end",
       [] {
         return patched([](Bytes& b) {
           put<uint64_t>(b, findGgufString(b, "general.name") + 8 + 12 + 4, uint64_t(1) << 62);
         });
       },
       ""},
      {"lengths/tensor name of 2^40 bytes",
       [] {
         return patched(
             [](Bytes& b) { put<uint64_t>(b, findGgufString(b, "output_norm.weight"), uint64_t(1) << 40); });
       },
       ""},
      // products
      {"products/heads x key_length wraps",
       [] {
         return tinyModel([](auto& w) {
           w.setUint32("llama.attention.head_count", 32769);
           w.setUint32("llama.attention.head_count_kv", 32769);
           w.setUint32("llama.attention.key_length", 131072);
         });
       },
       "head_count x head dimension"},
      {"products/embedding_length 2^30",
       [] { return tinyModel([](auto& w) { w.setUint32("llama.embedding_length", 1u << 30); }); },
       "embedding_length"},
      // offsets
      {"offsets/tensor past the end",
       [] {
         return patched([](Bytes& b) {
           put<uint64_t>(b, tensorInfo(b, "output_norm.weight").offset, uint64_t(1) << 40);
         });
       },
       ""},
      {"offsets/tensor misaligned",
       [] {
         return patched([](Bytes& b) {
           const size_t at = tensorInfo(b, "output_norm.weight").offset;
           uint64_t off = 0;
           std::memcpy(&off, b.data() + at, 8);
           put<uint64_t>(b, at, off + 1);
         });
       },
       ""},
      {"offsets/two tensors on the same bytes",
       [] {
         return patched([](Bytes& b) {
           uint64_t off = 0;
           std::memcpy(&off, b.data() + tensorInfo(b, "blk.0.attn_norm.weight").offset, 8);
           put<uint64_t>(b, tensorInfo(b, "blk.1.attn_norm.weight").offset, off);
         });
       },
       "overlaps"},
      // types
      {"types/tensor type 1000",
       [] {
         return patched([](Bytes& b) { put<uint32_t>(b, tensorInfo(b, "output_norm.weight").type, 1000); });
       },
       ""},
      {"types/experts in a type the engine cannot compute",
       [] { return Bytes(tinyModelWithUncomputedExperts()); }, "cannot compute"},
      {"types/metadata value type 99",
       [] {
         return patched([](Bytes& b) { put<uint32_t>(b, findGgufString(b, "general.name") + 8 + 12, 99); });
       },
       ""},
      // alignment
      {"alignment/0", [] { return withAlignment(0); }, ""},
      {"alignment/3", [] { return withAlignment(3); }, ""},
      {"alignment/2^31", [] { return withAlignment(1u << 31); }, ""},
      // vocabulary
      {"vocab/no tokens",
       [] { return tinyModel([](auto& w) { w.setStringArray("tokenizer.ggml.tokens", {}); }); }, ""},
      {"vocab/bos id 1e9",
       [] { return tinyModel([](auto& w) { w.setUint32("tokenizer.ggml.bos_token_id", 1000000000); }); }, ""},
      {"vocab/scores shorter than tokens",
       [] { return tinyModel([](auto& w) {
              w.setFloat32Array("tokenizer.ggml.scores", {0.0f, 1.0f});
            }); },
       ""},
      // file kinds
      {"kinds/empty file", [] { return Bytes{}; }, "empty file"},
      {"kinds/truncated in the tensor data",
       [] {
         Bytes b = tinyModel();
         b.resize(b.size() / 2);
         return b;
       },
       "past end of file"},
      {"kinds/a PNG", [] { return Bytes{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13}; }, ""},
      {"kinds/a directory", [] { return Bytes{}; }, "not a regular file", Case::Directory},
      {"kinds/a FIFO", [] { return Bytes{}; }, "not a regular file", Case::Fifo},
      // the control: an untouched file runs
      {"control/the tiny model", [] { return tinyModel(); }, nullptr},
  };
}

// In this (child) process: open, load and generate 3 tokens; the message of the
// first exception, or "" after a correct run.
std::string loadAndRun(const std::string& path) {
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
    const std::string message = loadAndRun(path);
    if (!message.empty() && write(pipe_fds[1], message.data(), message.size()) < 0) _exit(4);
    _exit(message.empty() ? 0 : 3);
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
  ASSERT_TRUE(code == 0 || code == 3) << "exit code " << code;
  if (!c.expect) {
    ASSERT_TRUE(code == 0) << message;
  } else if (code == 3) {
    ASSERT_TRUE(message.find(c.expect) != std::string::npos) << message;
  } else {
    ASSERT_TRUE(std::string(c.expect).empty()) << "accepted a file that must be refused";
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
