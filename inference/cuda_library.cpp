#include "inference/cuda_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace moe {
namespace {

struct LoadedLibrary {
  const CudaLibraryApi* api = nullptr;
  std::string path;
  std::string why_not;  // set when api is null
};

std::string runningProgramDir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

LoadedLibrary load() {
  LoadedLibrary out;
  if (const char* env = std::getenv("MOECHAT_CUDA_LIBRARY"); env && *env) {
    out.path = env;
  } else {
    const std::string dir = runningProgramDir();
    if (dir.empty()) {
      out.why_not = "the running program's folder is unknown, so libmoechat_cuda.so was not looked for";
      return out;
    }
    out.path = (std::filesystem::path(dir) / ".." / "lib" / "moechat" / kCudaLibraryFile)
                   .lexically_normal()
                   .string();
  }
  std::error_code ec;
  if (!std::filesystem::exists(out.path, ec)) {
    out.why_not =
        "no CUDA library (" + out.path + " does not exist; this build or install has no CUDA support)";
    return out;
  }
  // RTLD_LOCAL: the library's symbols (and libcudart's) stay out of the program's
  // namespace. The handle is never closed: CUDA's runtime does not expect it.
  void* handle = dlopen(out.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    out.why_not = std::string("the CUDA library could not be loaded (") + (err ? err : out.path.c_str()) +
                  "); are the NVIDIA driver and the CUDA 13 runtime installed?";
    return out;
  }
  using Entry = const CudaLibraryApi* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaLibraryEntry));
  if (!entry) {
    out.why_not = out.path + " is not a moechat CUDA library (no " + kCudaLibraryEntry + ")";
    return out;
  }
  const CudaLibraryApi* api = entry();
  if (!api || api->interface_version != kCudaLibraryInterface || !api->build ||
      std::strcmp(api->build, kCudaLibraryBuildTag) != 0) {
    out.why_not = out.path + " was built for another version of moechat (" +
                  (api && api->build ? api->build : "unknown") + "; this program is " + kCudaLibraryBuildTag +
                  ")";
    return out;
  }
  out.api = api;
  return out;
}

const LoadedLibrary& loaded() {
  static const LoadedLibrary lib = load();
  return lib;
}

}  // namespace

const CudaLibraryApi* cudaLibrary(std::string* why) {
  const LoadedLibrary& lib = loaded();
  if (!lib.api && why) *why = lib.why_not;
  return lib.api;
}

bool readCudaWorkCounters(CudaWorkCounters* out) {
  const CudaLibraryApi* api = loaded().api;
  if (!api || !api->workCounters) return false;
  api->workCounters(out);
  return true;
}

std::string cudaLibraryPath() {
  const LoadedLibrary& lib = loaded();
  return lib.api ? lib.path : std::string();
}

}  // namespace moe
