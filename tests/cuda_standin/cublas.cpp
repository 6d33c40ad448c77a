// The cuBLAS subset on the CUDA stand-in: a handle bound to a stream, and FP32
// GEMM queued on that stream (one kernel launch), its matrices checked to be
// device-accessible when it runs.
#include "cublas_v2.h"

#include <cstdio>
#include <vector>

#include "standin_device.h"

using namespace cudastandin::detail;

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
};

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  if (sticky() != cudaSuccess) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  device().stream(handle->stream).synchronize();
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

// The stand-in's GEMM needs no workspace; a workspace must be device memory.
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0 && (!workspace || !cudastandin::detail::deviceAccessible(workspace)))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  }
  return "unknown status";
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                           int n, int k, const float* alpha, const float* a, int lda, const float* b, int ldb,
                           const float* beta, float* c, int ldc) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  // Leading dimensions: at least the stored matrices' row counts (column-major).
  if (m < 0 || n < 0 || k < 0 || !alpha || !beta || lda < std::max(1, ta ? k : m) ||
      ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const float al = *alpha, be = *beta;  // host pointer mode: read at the call
  const bool queued = enqueueLaunch(handle->stream, [=] {
    for (const void* p :
         {static_cast<const void*>(a), static_cast<const void*>(b), static_cast<const void*>(c)})
      if (k > 0 && !deviceAccessible(p)) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "cublasSgemm: matrix %p is not device memory", p);
        device().setSticky(cudaErrorIllegalAddress, buf);
        return;
      }
    // The backend passes its weight as A: its reads count with the kernels' weight loads.
    cudastandin::countWeightLoad(8 * sizeof(float) * uint64_t(m) * uint64_t(n) * uint64_t(k));
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float sum = 0.0f;
        for (int l = 0; l < k; ++l) {
          const float av = ta ? a[l + static_cast<size_t>(i) * lda] : a[i + static_cast<size_t>(l) * lda];
          const float bv = tb ? b[j + static_cast<size_t>(l) * ldb] : b[l + static_cast<size_t>(j) * ldb];
          sum += av * bv;
        }
        float& out = c[i + static_cast<size_t>(j) * ldc];
        out = be == 0.0f ? al * sum : al * sum + be * out;
      }
  });
  return queued ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
