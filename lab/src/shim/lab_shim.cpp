// lab_shim.cpp: what the `tch` crate does not expose, for `lab-torch-worker` only.
//
// Compiled by lab/build.rs when the `torch` cargo feature is on, against libtorch 2.11's
// headers and the CUDA 13.0 runtime headers. Every entry point is `extern "C"`, never throws
// (c10::Error and std::exception are caught) and reports failure by returning a non-zero
// value and writing the message into the caller's buffer `err` (NUL-terminated, truncated).
//
// Sources for the semantics:
// - allocator counters: PyTorch docs, "CUDA semantics / Memory management" and
//   torch.cuda.memory_stats(): "allocated_bytes.all.{current,peak}",
//   "reserved_bytes.all.{current,peak}" are c10::cuda::CUDACachingAllocator::getDeviceStats
//   fields allocated_bytes[AGGREGATE] / reserved_bytes[AGGREGATE];
// - torch.cuda.reset_peak_memory_stats() is resetPeakStats(device);
// - torch.cuda.get_device_properties() reads at::cuda::getDeviceProperties();
// - torch.cuda.Event(enable_timing=True) is a CUDA event on the current stream;
// - torch.cuda.CUDAGraph is at::cuda::CUDAGraph (keep_graph=false: capture_end instantiates),
//   torch.cuda.Stream() is c10::cuda::getStreamFromPool (priority 0) and
//   `with torch.cuda.stream(s)` sets the current stream and restores the previous one
//   (done here with setCurrentCUDAStream: c10/cuda/CUDAGuard.h would pull in inline code that
//   calls the CUDA runtime directly, which this binary does not link).

#include <ATen/Context.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Event.h>
#include <c10/core/InferenceMode.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/headeronly/version.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

// at::cuda::getDeviceProperties (ATen/cuda/CUDAContextLight.h, in libtorch_cuda), declared
// here because that header also pulls in the cuBLAS/cuSPARSE headers, which the small CUDA
// header wheels do not carry.
namespace at::cuda {
cudaDeviceProp* getDeviceProperties(c10::DeviceIndex device);
}

namespace {

void copy_string(char* err, size_t len, const char* message) {
  if (err == nullptr || len == 0) return;
  std::strncpy(err, message, len - 1);
  err[len - 1] = '\0';
}

// Runs `body`; on an exception writes its message (without the C++ backtrace that
// c10::Error::what() appends) and returns 1.
template <typename F>
int guarded(char* err, size_t len, F body) {
  try {
    body();
    return 0;
  } catch (const c10::Error& e) {
    copy_string(err, len, e.what_without_backtrace());
  } catch (const std::exception& e) {
    copy_string(err, len, e.what());
  } catch (...) {
    copy_string(err, len, "unknown C++ exception");
  }
  return 1;
}

// The stream that was current before lab_side_stream_enter, restored by lab_side_stream_exit.
struct SideStream {
  c10::cuda::CUDAStream previous;
};

}  // namespace

extern "C" {

// libtorch's version ("2.11.0"), a static string.
const char* lab_torch_version() { return TORCH_VERSION; }

// The CUDA runtime version libtorch was built with, as major*1000 + minor*10 (13000 for
// 13.0); 0 when this libtorch has no CUDA support loaded.
int64_t lab_cuda_build_version() {
  try {
    return at::detail::getCUDAHooks().versionCUDART();
  } catch (...) {
    return 0;
  }
}

// The HIP version libtorch was built with (TORCH_HIP_VERSION), or 0 for a CUDA build.
int64_t lab_hip_build_version() {
#ifdef TORCH_HIP_VERSION
  return TORCH_HIP_VERSION;
#else
  return 0;
#endif
}

// Number of visible CUDA devices (0 when no driver or no GPU). Never throws.
int64_t lab_device_count() {
  try {
    return static_cast<int64_t>(c10::cuda::device_count());
  } catch (...) {
    return 0;
  }
}

// Initialises CUDA in this process (what torch.cuda._lazy_init does) and makes `device`
// current. Needed before reading allocator statistics.
int lab_cuda_init(int64_t device, char* err, size_t len) {
  return guarded(err, len, [&] {
    at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  });
}

// Device properties: name (into `name`, NUL-terminated), total memory in bytes as announced
// by the runtime (cudaDeviceProp::totalGlobalMem), compute capability, multiprocessor count.
int lab_device_properties(int64_t device, char* name, size_t name_len, int64_t* total_bytes,
                          int64_t* major, int64_t* minor, int64_t* multiprocessors,
                          char* err, size_t len) {
  return guarded(err, len, [&] {
    const cudaDeviceProp* prop =
        at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device));
    copy_string(name, name_len, prop->name);
    *total_bytes = static_cast<int64_t>(prop->totalGlobalMem);
    *major = prop->major;
    *minor = prop->minor;
    *multiprocessors = prop->multiProcessorCount;
  });
}

// Caching-allocator counters of `device`, in bytes: out[0] allocated current, out[1] reserved
// current, out[2] allocated peak, out[3] reserved peak (AGGREGATE pool, as
// torch.cuda.memory_allocated / memory_reserved / max_memory_allocated / max_memory_reserved).
int lab_memory_stats(int64_t device, int64_t* out, char* err, size_t len) {
  return guarded(err, len, [&] {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(
        static_cast<c10::DeviceIndex>(device));
    const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    out[0] = stats.allocated_bytes[agg].current;
    out[1] = stats.reserved_bytes[agg].current;
    out[2] = stats.allocated_bytes[agg].peak;
    out[3] = stats.reserved_bytes[agg].peak;
  });
}

// Free and total bytes of `device` as the driver reports them (torch.cuda.mem_get_info),
// through the device allocator's virtual getMemoryInfo (cudaMemGetInfo inside libc10_cuda).
int lab_memory_info(int64_t device, int64_t* free_bytes, int64_t* total_bytes, char* err,
                    size_t len) {
  return guarded(err, len, [&] {
    auto* allocator = c10::getDeviceAllocator(c10::DeviceType::CUDA);
    const auto info = allocator->getMemoryInfo(static_cast<c10::DeviceIndex>(device));
    *free_bytes = static_cast<int64_t>(info.first);
    *total_bytes = static_cast<int64_t>(info.second);
  });
}

// Resets the peak counters of `device` to their current values
// (torch.cuda.reset_peak_memory_stats).
int lab_reset_peak_stats(int64_t device, char* err, size_t len) {
  return guarded(err, len, [&] {
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
  });
}

// Waits for all work on the current device (torch.cuda.synchronize).
int lab_synchronize(char* err, size_t len) {
  return guarded(err, len, [&] { c10::cuda::device_synchronize(); });
}

// Whether float32 matrix products may use TF32 on cuBLAS (torch.backends.cuda.matmul.allow_tf32).
int lab_tf32_matmul_allowed() {
  try {
    return at::globalContext().allowTF32CuBLAS() ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

// Sets whether float32 matrix products may use TF32 on cuBLAS.
int lab_set_tf32_matmul_allowed(int allowed, char* err, size_t len) {
  return guarded(err, len, [&] { at::globalContext().setAllowTF32CuBLAS(allowed != 0); });
}

// Enters inference mode on this thread (torch.inference_mode) until lab_inference_mode_exit.
void* lab_inference_mode_enter() {
  try {
    return new c10::InferenceMode(true);
  } catch (...) {
    return nullptr;
  }
}

// Leaves the inference mode entered by lab_inference_mode_enter.
void lab_inference_mode_exit(void* guard) { delete static_cast<c10::InferenceMode*>(guard); }

// A CUDA timing event (torch.cuda.Event(enable_timing=True)); null on failure.
void* lab_event_new(char* err, size_t len) {
  c10::Event* event = nullptr;
  guarded(err, len, [&] {
    event = new c10::Event(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
  });
  return event;
}

// Records `event` on the current stream of `device`.
int lab_event_record(void* event, int64_t device, char* err, size_t len) {
  return guarded(err, len, [&] {
    c10::Stream stream =
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device));
    static_cast<c10::Event*>(event)->record(stream);
  });
}

// Milliseconds between two recorded and completed events (cudaEventElapsedTime).
int lab_event_elapsed_ms(void* start, void* end, double* ms, char* err, size_t len) {
  return guarded(err, len, [&] {
    *ms = static_cast<c10::Event*>(start)->elapsedTime(*static_cast<c10::Event*>(end));
  });
}

// Frees an event made by lab_event_new.
void lab_event_free(void* event) { delete static_cast<c10::Event*>(event); }

// --- CUDA graph floor (docs/PROTOCOL.md §4.6) ---------------------------------------------

// Makes a stream from libtorch's pool (torch.cuda.Stream()) the current stream of `device`
// until lab_side_stream_exit; returns a handle, or null with a message.
void* lab_side_stream_enter(int64_t device, char* err, size_t len) {
  SideStream* side = nullptr;
  guarded(err, len, [&] {
    const auto index = static_cast<c10::DeviceIndex>(device);
    side = new SideStream{c10::cuda::getCurrentCUDAStream(index)};
    c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromPool(false, index));
  });
  return side;
}

// Restores the stream that was current before lab_side_stream_enter.
void lab_side_stream_exit(void* handle) {
  auto* side = static_cast<SideStream*>(handle);
  try {
    c10::cuda::setCurrentCUDAStream(side->previous);
  } catch (...) {
  }
  delete side;
}

// A new, empty CUDA graph (torch.cuda.CUDAGraph()); null with a message on failure.
void* lab_graph_new(char* err, size_t len) {
  at::cuda::CUDAGraph* graph = nullptr;
  guarded(err, len, [&] { graph = new at::cuda::CUDAGraph(); });
  return graph;
}

// Starts capturing the current (non-default) stream into `graph`, in the graph's own private
// memory pool, global capture mode (graph.capture_begin() with its defaults).
int lab_graph_capture_begin(void* graph, char* err, size_t len) {
  return guarded(err, len, [&] { static_cast<at::cuda::CUDAGraph*>(graph)->capture_begin(); });
}

// Ends the capture and instantiates the graph (graph.capture_end()).
int lab_graph_capture_end(void* graph, char* err, size_t len) {
  return guarded(err, len, [&] { static_cast<at::cuda::CUDAGraph*>(graph)->capture_end(); });
}

// Launches the captured work once on the current stream (graph.replay()); does not wait.
int lab_graph_replay(void* graph, char* err, size_t len) {
  return guarded(err, len, [&] { static_cast<at::cuda::CUDAGraph*>(graph)->replay(); });
}

// Frees a graph made by lab_graph_new (its private pool goes back to the allocator's cache).
void lab_graph_free(void* graph) {
  try {
    delete static_cast<at::cuda::CUDAGraph*>(graph);
  } catch (...) {
  }
}

}  // extern "C"
