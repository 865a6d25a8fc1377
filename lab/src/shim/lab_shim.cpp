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

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

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

// --- Run-time compiled kernels (NVRTC + the CUDA driver API, both through dlopen) ----------
//
// The decode kernels (lab/src/bin/worker_decoder/kernels.cu) are compiled when a model is
// loaded, for the GPU in hand, by NVRTC, and launched with cuLaunchKernel on libtorch's current
// stream (so they are captured into a CUDA graph like any libtorch kernel). Nothing here is
// linked: libnvrtc is looked for beside the CUDA runtime libtorch loaded (the pip wheels put
// libcudart.so.13, libnvrtc.so.13 and libnvrtc-builtins.so.13.0 in one folder,
// site-packages/nvidia/cu13/lib), then by its name; libcuda.so.1 is the driver's.
// Signatures: nvrtc.h and cuda.h of CUDA 13.0 (nvrtcCreateProgram, nvrtcCompileProgram,
// nvrtcGetProgramLog[Size], nvrtcGetCUBIN[Size], nvrtcDestroyProgram, nvrtcGetErrorString;
// cuModuleLoadData, cuModuleGetFunction, cuLaunchKernel, cuGetErrorString).
struct KernelApi {
  int (*create)(void**, const char*, const char*, int, const char* const*, const char* const*);
  int (*compile)(void*, int, const char* const*);
  int (*log_size)(void*, size_t*);
  int (*log)(void*, char*);
  int (*cubin_size)(void*, size_t*);
  int (*cubin)(void*, char*);
  int (*destroy)(void**);
  const char* (*nvrtc_error)(int);
  int (*module_load)(void**, const void*);
  int (*get_function)(void**, void*, const char*);
  int (*launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                void*, void**, void**);
  int (*cu_error)(int, const char**);
  // cuLaunchKernelEx (CUDA 12.0 and later); null when the driver lacks it.
  int (*launch_ex)(const void*, void*, void**, void**);
};

// cuda.h's CUlaunchConfig (CUDA 12.0 to 13.0, same layout): the attributes are the runtime's
// cudaLaunchAttribute of driver_types.h, which mirrors CUlaunchAttribute field for field.
struct LaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  void* stream;
  cudaLaunchAttribute* attrs;
  unsigned n_attrs;
};
// cuda.h: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6, the same number.
static_assert(cudaLaunchAttributeProgrammaticStreamSerialization == 6,
              "programmatic stream serialization is attribute 6 in cuda.h");

// The folder of the loaded CUDA runtime (where the wheels put libnvrtc), or "".
std::string cuda_runtime_folder() {
  void* symbol = dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

template <typename T>
void bind(void* lib, const char* name, T& slot) {
  void* symbol = dlsym(lib, name);
  if (symbol == nullptr) throw std::runtime_error(std::string("symbol ") + name + " not found");
  slot = reinterpret_cast<T>(symbol);
}

// The API, loaded once; throws with a message naming what is missing.
const KernelApi& kernel_api() {
  static KernelApi api = [] {
    KernelApi a{};
    void* nvrtc = nullptr;
    const std::string folder = cuda_runtime_folder();
    if (!folder.empty()) {
      // libnvrtc opens its builtins library by name; loaded first, it is found loaded.
      dlopen((folder + "/libnvrtc-builtins.so.13.0").c_str(), RTLD_NOW | RTLD_GLOBAL);
      nvrtc = dlopen((folder + "/libnvrtc.so.13").c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
    if (nvrtc == nullptr) nvrtc = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_GLOBAL);
    if (nvrtc == nullptr) {
      throw std::runtime_error("libnvrtc.so.13 not found (beside the CUDA runtime in '" +
                               folder + "' nor by name)");
    }
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (cuda == nullptr) throw std::runtime_error("libcuda.so.1 not found");
    bind(nvrtc, "nvrtcCreateProgram", a.create);
    bind(nvrtc, "nvrtcCompileProgram", a.compile);
    bind(nvrtc, "nvrtcGetProgramLogSize", a.log_size);
    bind(nvrtc, "nvrtcGetProgramLog", a.log);
    bind(nvrtc, "nvrtcGetCUBINSize", a.cubin_size);
    bind(nvrtc, "nvrtcGetCUBIN", a.cubin);
    bind(nvrtc, "nvrtcDestroyProgram", a.destroy);
    bind(nvrtc, "nvrtcGetErrorString", a.nvrtc_error);
    bind(cuda, "cuModuleLoadData", a.module_load);
    bind(cuda, "cuModuleGetFunction", a.get_function);
    bind(cuda, "cuLaunchKernel", a.launch);
    bind(cuda, "cuGetErrorString", a.cu_error);
    a.launch_ex = reinterpret_cast<decltype(a.launch_ex)>(dlsym(cuda, "cuLaunchKernelEx"));
    return a;
  }();
  return api;
}

void check_cu(const KernelApi& api, int result, const char* what) {
  if (result == 0) return;
  const char* text = nullptr;
  api.cu_error(result, &text);
  throw std::runtime_error(std::string(what) + ": " + (text ? text : "CUDA driver error") +
                           " (" + std::to_string(result) + ")");
}

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

// --- Run-time compiled kernels ---------------------------------------------------------------

// Compiles `source` with NVRTC (options as given, e.g. --gpu-architecture=sm_90) into a cubin
// and loads it into the current context; returns the module, or null with a message (NVRTC's
// log on a compile error).
void* lab_kernels_compile(const char* source, const char* const* options, int n_options,
                          char* err, size_t len) {
  void* module = nullptr;
  guarded(err, len, [&] {
    const KernelApi& api = kernel_api();
    void* program = nullptr;
    int r = api.create(&program, source, "kernels.cu", 0, nullptr, nullptr);
    if (r != 0) throw std::runtime_error(std::string("nvrtcCreateProgram: ") + api.nvrtc_error(r));
    r = api.compile(program, n_options, options);
    if (r != 0) {
      size_t size = 0;
      api.log_size(program, &size);
      std::string log(size, '\0');
      if (size > 0) api.log(program, log.data());
      api.destroy(&program);
      for (auto& c : log) {
        if (c == '\n') c = ' ';
      }
      throw std::runtime_error(std::string("NVRTC: ") + api.nvrtc_error(r) + ": " + log.c_str());
    }
    size_t size = 0;
    api.cubin_size(program, &size);
    std::vector<char> cubin(size);
    r = api.cubin(program, cubin.data());
    api.destroy(&program);
    if (r != 0) throw std::runtime_error(std::string("nvrtcGetCUBIN: ") + api.nvrtc_error(r));
    check_cu(api, api.module_load(&module, cubin.data()), "cuModuleLoadData");
  });
  return module;
}

// The kernel `name` of a module from lab_kernels_compile; null with a message.
void* lab_kernels_function(void* module, const char* name, char* err, size_t len) {
  void* function = nullptr;
  guarded(err, len, [&] {
    const KernelApi& api = kernel_api();
    check_cu(api, api.get_function(&function, module, name), "cuModuleGetFunction");
  });
  return function;
}

// Launches `function` on a one-dimensional grid on the current stream of the current device
// (what libtorch's own kernels use, so a capture records it); `args` as cuLaunchKernel's
// kernelParams. With `overlap` (and a driver that has cuLaunchKernelEx), the launch carries
// the programmatic-stream-serialization attribute: the kernel may start before the previous
// one in the stream ends and must wait for it itself (`wait_previous` in kernels.cu); a
// stream capture records the edge as programmatic. Asynchronous: a fault in the kernel shows
// at the next synchronisation.
int lab_kernels_launch(void* function, uint32_t grid, uint32_t block, uint32_t shared_bytes,
                       void** args, int overlap, char* err, size_t len) {
  return guarded(err, len, [&] {
    const KernelApi& api = kernel_api();
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    if (overlap != 0 && api.launch_ex != nullptr) {
      cudaLaunchAttribute attribute{};
      attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attribute.val.programmaticStreamSerializationAllowed = 1;
      LaunchConfig config{grid, 1, 1, block, 1, 1, shared_bytes,
                          reinterpret_cast<void*>(stream), &attribute, 1};
      check_cu(api, api.launch_ex(&config, function, args, nullptr), "cuLaunchKernelEx");
      return;
    }
    check_cu(api,
             api.launch(function, grid, 1, 1, block, 1, 1, shared_bytes,
                        reinterpret_cast<void*>(stream), args, nullptr),
             "cuLaunchKernel");
  });
}

}  // extern "C"
