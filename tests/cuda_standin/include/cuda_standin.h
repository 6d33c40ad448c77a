// Test control of the CUDA stand-in: the simulated device's size, fault
// injection, and counters of what the CUDA code asked of the device. Only
// tests (and a bench built on the stand-in) include this; the CUDA code never does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "cuda_runtime.h"

namespace cudastandin {

// What one stream was asked to do (a stream's totals survive its destruction in totals()).
struct StreamCounters {
  uint64_t kernel_launches = 0;   // kernels and cuBLAS calls queued (not those recorded into a graph)
  uint64_t graph_launches = 0;    // cudaGraphLaunch calls
  uint64_t captured_kernels = 0;  // kernels and cuBLAS calls recorded while the stream captured
  uint64_t host_syncs = 0;        // host waits: stream/event/device synchronise, synchronous copies
  uint64_t stream_syncs = 0;      // of those, waits for a whole stream (all but event waits)
  // Of host_syncs, those with nothing queued on the stream after what they wait for: when
  // one returns the device has nothing to do until the host queues more (a stream wait,
  // or an event's with no later work queued). A wait on an earlier event while later
  // work is queued is not stalling: the device runs on through it.
  uint64_t stalling_host_syncs = 0;
  // Operations queued from a thread bound (cudaSetDevice) to another device than the
  // stream's: on a machine with several GPUs, work the runtime would reject or misplace.
  uint64_t wrong_device_ops = 0;
  uint64_t bytes_h2d = 0;  // host -> device copies
  uint64_t bytes_d2h = 0;  // device -> host copies
  uint64_t bytes_d2d = 0;  // device -> device copies
  uint64_t copies = 0;     // copy calls of any direction

  StreamCounters& operator+=(const StreamCounters& o) {
    kernel_launches += o.kernel_launches;
    graph_launches += o.graph_launches;
    captured_kernels += o.captured_kernels;
    host_syncs += o.host_syncs;
    stream_syncs += o.stream_syncs;
    stalling_host_syncs += o.stalling_host_syncs;
    wrong_device_ops += o.wrong_device_ops;
    bytes_h2d += o.bytes_h2d;
    bytes_d2h += o.bytes_d2h;
    bytes_d2d += o.bytes_d2d;
    copies += o.copies;
    return *this;
  }
};

struct DeviceCounters {
  StreamCounters all;            // every stream, live or destroyed
  uint64_t device_syncs = 0;     // cudaDeviceSynchronize
  uint64_t mallocs = 0;          // successful cudaMalloc calls
  uint64_t bytes_allocated = 0;  // device memory held now
  uint64_t peak_bytes = 0;       // the most held at once
  uint64_t pinned_bytes = 0;     // cudaHostAlloc'd and registered host memory held now
};

StreamCounters counters(cudaStream_t stream);  // 0: the default stream
// Returns once `stream` has run everything it can: it is idle, or it waits (a
// cudaStreamWaitEvent) for an event that has not completed. A test that checks that
// a stream did NOT get past a wait calls this instead of sleeping.
void waitUntilStreamStalled(cudaStream_t stream);
DeviceCounters totals();
// Called on the waiting thread at each host wait host_syncs counts, before it blocks,
// with whether it is stalling (a test snapshots totals() there: what was queued before
// the wait returned). Null: none. Set it while no other thread waits on the device.
void setHostWaitObserver(std::function<void(bool stalling)> observer);

// The simulated device's memory (cudaMemGetInfo, cudaMalloc's limit). Default:
// 2 GiB, or CUDA_STANDIN_DEVICE_MB from the environment.
void setDeviceBytes(size_t bytes);
// 0: cudaGetDeviceCount fails with cudaErrorNoDevice, as on a machine with a driver but no GPU.
void setDeviceCount(int count);

// Simulated latencies: every copy (or kernel) waits this long on its stream
// before it runs. With them, work a stream forgot to wait for is reliably not
// done yet when the stream reaches its reader (a missing cudaStreamWaitEvent
// or fence shows as wrong results, not as a rare race). Default 0, or
// CUDA_STANDIN_COPY_LATENCY_US / CUDA_STANDIN_KERNEL_LATENCY_US.
void setCopyLatencyMicros(int us);
void setKernelLatencyMicros(int us);

// Device memory is inaccessible to the host (PROT_NONE) whenever no stream,
// kernel or copy of the stand-in works on it: host code that reads a cudaMalloc'd
// pointer crashes with "host code read device memory at ...", as it would on a
// GPU. On unless CUDA_STANDIN_PROTECT_DEVICE_MEMORY=0. switches: mprotect calls so far.
bool deviceMemoryProtected();
uint64_t deviceMemoryProtectionSwitches();

// Weight bytes the kernels loaded so far (every quantised unit and float weight
// read by the matvec, GEMM, embedding and dequantisation kernels, and cublasSgemm's
// A operand, where the backend passes its F32 weights), counted where they are read:
// what a kernel reads, not what its caller says it reads.
uint64_t weightBytesLoaded();

// Fault injection: the n-th such call from now (1 = the next) fails; 0 disarms.
void failMallocAt(int n);  // cudaMalloc: cudaErrorMemoryAllocation
void failKernelAt(int n);  // the kernel (or cuBLAS call) faults when it runs: sticky cudaErrorLaunchFailure
void failCopyAt(int n);    // the async copy faults when it runs: sticky cudaErrorIllegalAddress
void failEventCreateAt(int n);   // cudaEventCreate*: cudaErrorMemoryAllocation
void failStreamCreateAt(int n);  // cudaStreamCreate*: cudaErrorMemoryAllocation

// The sticky error a kernel fault left (cudaSuccess when none) and what caused it.
cudaError_t stickyError();
std::string faultDetail();
// Waits for every stream, clears a sticky error, the last errors and the armed
// faults; memory stays allocated. Tests call it between cases (a real context
// with a sticky error is unusable until the process ends).
void recover();

}  // namespace cudastandin
