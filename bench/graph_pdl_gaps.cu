// graph_pdl_gaps: whether a CUDA graph's kernels keep programmatic dependent launch's short gaps
// through what a ShardScope process does besides replaying it (bench/RESULTS.md, interpretability
// runs 7 and 8: once a process records a second graph, every graph loses them). No LibTorch: a
// chain of small kernels, each launched with programmatic stream serialization, is captured as
// graph A, and A with a decoder layer's two device-to-device copies and a memset every 14 kernels;
// both replays are timed with CUDA events (microseconds a kernel: its run plus the gap before the
// next) alone, then after each of: more graphs launched, a kernel new to the process, pageable and
// pinned copies to the host, a graph on another stream, child-graph composition, a 1 GiB
// allocation, an NVRTC module loaded at run time, one more graph. Then chains of kernels with
// 1 KB parameter blocks, alone and with more alive, and graphs instantiated with LibTorch's flags
// (auto-free on launch, per-node priority), alone and after a second. The chain without the
// attribute is the reference. Prints one line per case.
//
//   nvcc -std=c++17 -arch=sm_90 -O2 bench/graph_pdl_gaps.cu -lnvrtc -lcuda -o graph_pdl_gaps &&
//     ./graph_pdl_gaps
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "graph_pdl_gaps: %s failed: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

__global__ void step(float* x) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  x[i] = x[i] * 0.999f + 1.f;
}

constexpr int kBigParameterBytes = 1024;

// The same step with a large parameter block, as cuBLAS's and ShardScope's kernels take (their
// argument structs run to hundreds of bytes; the driver stores each node's parameters).
struct BigArgs {
  float* x;
  char pad[kBigParameterBytes];
};
__global__ void bigStep(BigArgs a) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  a.x[i] = a.x[i] * 0.999f + float(a.pad[i % kBigParameterBytes]);
}

__global__ void neverRunBefore(float* x) {
  x[threadIdx.x] += 2.f;
}

constexpr int kKernels = 400, kBlocks = 8, kThreads = 128, kReplays = 20, kLayerKernels = 14;

// Launches `kernel(args)` on `s`, allowed to start before the kernel ahead of it ends when
// `programmatic` (programmatic stream serialization, as ShardScope's kernels are launched).
template <typename Args>
void launch(cudaStream_t s, void (*kernel)(Args), Args args, bool programmatic) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(kThreads);
  config.stream = s;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = programmatic ? 1 : 0;
  check(cudaLaunchKernelEx(&config, kernel, args), "launch");
}

enum class Chain { Plain, WithCopies, BigParameters };

// Records kKernels programmatic (or, with `programmatic` false, plain) launches on `s`, which
// must be capturing. WithCopies: every kLayerKernels kernels are followed by two
// device-to-device copies and a memset, as a decoder layer's KV-cache writes and cuDNN's
// workspace clear are in ShardScope's prefill graphs. BigParameters: `bigStep`, 1 KB of
// parameters a kernel.
void launchChain(cudaStream_t s, float* x, bool programmatic, Chain chain) {
  BigArgs big{};
  big.x = x;
  for (int k = 0; k < kKernels; ++k) {
    if (chain == Chain::BigParameters) {
      big.pad[0] = char(k & 1);
      launch(s, bigStep, big, programmatic);
      continue;
    }
    launch(s, step, x, programmatic);
    if (chain != Chain::WithCopies || k % kLayerKernels != kLayerKernels - 1) continue;
    const size_t half = kBlocks * kThreads / 2 * sizeof(float);
    check(cudaMemcpyAsync(x + kBlocks * kThreads, x, half, cudaMemcpyDeviceToDevice, s), "copy");
    check(cudaMemcpyAsync(x + kBlocks * kThreads * 3 / 2, x, half, cudaMemcpyDeviceToDevice, s),
          "copy");
    check(cudaMemsetAsync(x + kBlocks * kThreads * 2, 0, half, s), "memset");
  }
}

cudaGraph_t captureGraph(cudaStream_t s, float* x, bool programmatic, Chain chain) {
  cudaGraph_t graph = nullptr;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  launchChain(s, x, programmatic, chain);
  check(cudaStreamEndCapture(s, &graph), "end capture");
  return graph;
}

cudaGraphExec_t instantiate(cudaGraph_t graph, unsigned long long flags = 0) {
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiateWithFlags(&exec, graph, flags), "instantiate");
  return exec;
}

// The flags LibTorch's CUDAGraph::instantiate passes.
constexpr unsigned long long kTorchFlags =
    cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUseNodePriority;

cudaGraphExec_t captureChain(cudaStream_t s, float* x, bool programmatic,
                             Chain chain = Chain::Plain, unsigned long long flags = 0) {
  cudaGraph_t graph = captureGraph(s, x, programmatic, chain);
  cudaGraphExec_t exec = instantiate(graph, flags);
  check(cudaGraphDestroy(graph), "destroy graph");
  return exec;
}

// Compiles a kernel with NVRTC, loads it as a new module (as cuDNN loads the SDPA kernels it
// generates for a new shape) and runs it once on `s`.
void loadAndRunNewModule(cudaStream_t s, float* x) {
  const char* source = "extern \"C\" __global__ void fresh(float* x) { x[threadIdx.x] *= 0.5f; }";
  nvrtcProgram program;
  if (nvrtcCreateProgram(&program, source, "fresh.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS ||
      nvrtcCompileProgram(program, 0, nullptr) != NVRTC_SUCCESS) {
    std::fprintf(stderr, "graph_pdl_gaps: NVRTC failed\n");
    std::exit(1);
  }
  size_t size = 0;
  nvrtcGetPTXSize(program, &size);
  std::vector<char> ptx(size);
  nvrtcGetPTX(program, ptx.data());
  nvrtcDestroyProgram(&program);
  CUmodule module;
  CUfunction fresh;
  if (cuModuleLoadData(&module, ptx.data()) != CUDA_SUCCESS ||
      cuModuleGetFunction(&fresh, module, "fresh") != CUDA_SUCCESS) {
    std::fprintf(stderr, "graph_pdl_gaps: loading the NVRTC module failed\n");
    std::exit(1);
  }
  void* args[] = {&x};
  if (cuLaunchKernel(fresh, 1, 1, 1, 32, 1, 1, 0, s, args, nullptr) != CUDA_SUCCESS) {
    std::fprintf(stderr, "graph_pdl_gaps: launching the NVRTC kernel failed\n");
    std::exit(1);
  }
  check(cudaStreamSynchronize(s), "sync");
}

// Microseconds a kernel over kReplays replays of `exec` (median replay).
double perKernel(cudaGraphExec_t exec, cudaStream_t s) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  check(cudaGraphLaunch(exec, s), "warm-up launch");
  std::vector<float> ms;
  for (int r = 0; r < kReplays; ++r) {
    check(cudaEventRecord(a, s), "record");
    check(cudaGraphLaunch(exec, s), "launch graph");
    check(cudaEventRecord(b, s), "record");
    check(cudaEventSynchronize(b), "sync");
    float t = 0;
    check(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return double(ms[ms.size() / 2]) * 1e3 / kKernels;
}

}  // namespace

int main() {
  cudaStream_t s, other;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  check(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), "stream");
  float* x = nullptr;
  const size_t bytes = 4 * kBlocks * kThreads * sizeof(float);
  check(cudaMalloc(&x, bytes), "malloc");
  check(cudaMemset(x, 0, bytes), "memset");
  const cudaGraphExec_t plain = captureChain(s, x, false);
  const cudaGraphExec_t a = captureChain(s, x, true);
  const cudaGraphExec_t withCopies = captureChain(s, x, true, Chain::WithCopies);
  std::printf("graph_pdl_gaps: %d kernels a graph, %d blocks of %d threads, median of %d replays\n",
              kKernels, kBlocks, kThreads, kReplays);
  std::printf("without the attribute:                        %.3f us a kernel\n",
              perKernel(plain, s));
  const auto report = [&](const char* after) {
    std::printf("%-44s  A %.3f, A with copies %.3f us a kernel\n", after, perKernel(a, s),
                perKernel(withCopies, s));
  };
  report("programmatic, alone:");
  std::vector<cudaGraphExec_t> more;
  for (int total : {1, 4, 16}) {
    while (int(more.size()) < total) more.push_back(captureChain(s, x, true));
    for (cudaGraphExec_t g : more) check(cudaGraphLaunch(g, s), "launch another");
    check(cudaStreamSynchronize(s), "sync");
    char after[64];
    std::snprintf(after, sizeof after, "after %d more graphs were launched once:", total);
    report(after);
  }
  neverRunBefore<<<1, 32, 0, s>>>(x);
  check(cudaGetLastError(), "launch a new kernel");
  check(cudaStreamSynchronize(s), "sync");
  report("after a kernel new to the process ran:");

  // What a traced forward does besides its graphs, one step at a time (cumulative).
  std::vector<float> pageable(kBlocks * kThreads);
  check(cudaMemcpyAsync(pageable.data(), x, pageable.size() * sizeof(float), cudaMemcpyDeviceToHost,
                        s),
        "pageable copy");
  check(cudaStreamSynchronize(s), "sync");
  report("after a pageable device-to-host copy:");
  float* pinned = nullptr;
  check(cudaMallocHost(&pinned, pageable.size() * sizeof(float)), "pinned alloc");
  check(cudaMemcpyAsync(pinned, x, pageable.size() * sizeof(float), cudaMemcpyDeviceToHost, s),
        "pinned copy");
  check(cudaStreamSynchronize(s), "sync");
  report("after a pinned device-to-host copy:");
  cudaEvent_t ready;
  check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "event");
  check(cudaEventRecord(ready, s), "record");
  check(cudaStreamWaitEvent(other, ready, 0), "wait");
  const cudaGraphExec_t side = captureChain(other, x, true, Chain::WithCopies);
  check(cudaGraphLaunch(side, other), "launch side");
  check(cudaEventRecord(ready, other), "record");
  check(cudaStreamWaitEvent(s, ready, 0), "wait");
  check(cudaStreamSynchronize(s), "sync");
  report("after a graph captured on another stream:");
  const cudaGraph_t kept = captureGraph(s, x, true, Chain::WithCopies);
  report("with a captured graph kept, uninstantiated:");
  cudaGraph_t parent = nullptr;
  check(cudaGraphCreate(&parent, 0), "create parent");
  cudaGraphNode_t first = nullptr, second = nullptr;
  check(cudaGraphAddChildGraphNode(&first, parent, nullptr, 0, kept), "child");
  check(cudaGraphAddChildGraphNode(&second, parent, &first, 1, kept), "child");
  const cudaGraphExec_t composed = instantiate(parent);
  report("after composing child graphs (not launched):");
  check(cudaGraphLaunch(composed, s), "launch composed");
  check(cudaStreamSynchronize(s), "sync");
  report("after the composed graph was launched:");
  float* big = nullptr;
  check(cudaMalloc(&big, size_t(1) << 30), "big malloc");
  check(cudaMemsetAsync(big, 0, size_t(1) << 30, s), "big memset");
  check(cudaStreamSynchronize(s), "sync");
  report("after a 1 GiB cudaMalloc and memset:");
  check(cudaFree(big), "free");
  report("after that cudaFree:");
  check(cudaDeviceSynchronize(), "device sync");
  report("after cudaDeviceSynchronize:");
  loadAndRunNewModule(s, x);
  report("after an NVRTC module was loaded and run:");
  const cudaGraphExec_t late = captureChain(s, x, true, Chain::WithCopies);
  check(cudaGraphLaunch(late, s), "launch late");
  check(cudaStreamSynchronize(s), "sync");
  report("after one more graph was captured and run:");
  std::printf("%-44s  %.3f us a kernel\n", "that graph:", perKernel(late, s));
  cudaGraphExecDestroy(late);

  // Graphs of kernels with 1 KB of parameters each: the first alone, then with more alive.
  const cudaGraphExec_t bigA = captureChain(s, x, true, Chain::BigParameters);
  std::printf("%-44s  %.3f us a kernel\n", "1 KB parameters, alone:", perKernel(bigA, s));
  std::vector<cudaGraphExec_t> moreBig;
  for (int total : {1, 2, 4, 8}) {
    while (int(moreBig.size()) < total)
      moreBig.push_back(captureChain(s, x, true, Chain::BigParameters));
    for (cudaGraphExec_t g : moreBig) check(cudaGraphLaunch(g, s), "launch another big");
    check(cudaStreamSynchronize(s), "sync");
    std::printf("1 KB parameters, after %d more were run:     %.3f us a kernel (the last %.3f)\n",
                total, perKernel(bigA, s), perKernel(moreBig.back(), s));
  }
  for (cudaGraphExec_t g : moreBig) cudaGraphExecDestroy(g);
  cudaGraphExecDestroy(bigA);

  // Instantiated as LibTorch does (auto-free on launch, per-node priority): the first such graph
  // alone, then after a second was captured on another stream and run.
  const cudaGraphExec_t t1 = captureChain(s, x, true, Chain::WithCopies, kTorchFlags);
  std::printf("%-44s  %.3f us a kernel\n",
              "LibTorch's flags, with copies, alone:", perKernel(t1, s));
  check(cudaEventRecord(ready, s), "record");
  check(cudaStreamWaitEvent(other, ready, 0), "wait");
  const cudaGraphExec_t t2 = captureChain(other, x, true, Chain::WithCopies, kTorchFlags);
  check(cudaGraphLaunch(t2, other), "launch t2");
  check(cudaStreamSynchronize(other), "sync");
  std::printf("%-44s  %.3f us a kernel (the second %.3f)\n",
              "LibTorch's flags, after a second:", perKernel(t1, s), perKernel(t2, s));
  cudaGraphExecDestroy(t2);
  cudaGraphExecDestroy(t1);

  cudaGraphExecDestroy(composed);
  cudaGraphDestroy(parent);
  cudaGraphDestroy(kept);
  cudaGraphExecDestroy(side);
  cudaEventDestroy(ready);
  cudaFreeHost(pinned);
  for (cudaGraphExec_t g : more) cudaGraphExecDestroy(g);
  cudaGraphExecDestroy(withCopies);
  cudaGraphExecDestroy(a);
  cudaGraphExecDestroy(plain);
  cudaFree(x);
  cudaStreamDestroy(other);
  cudaStreamDestroy(s);
  return 0;
}
