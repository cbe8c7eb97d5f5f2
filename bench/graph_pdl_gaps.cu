// graph_pdl_gaps: whether a CUDA graph's kernels keep programmatic dependent launch's short gaps
// once the process holds more graph executables (bench/RESULTS.md, interpretability run 7: a
// traced forward's graphs lost them once a trace with a layer port had run). No LibTorch: a chain
// of small kernels, each launched with programmatic stream serialization, is captured as graph A;
// A's replay is timed with CUDA events (microseconds a kernel: its run plus the gap before the
// next) alone, then after more graphs like it are instantiated, then after each was launched once,
// then after a kernel this process never ran is launched once (with CUDA_MODULE_LOADING=LAZY, the
// default, its code is loaded then: a trace's first write launches ATen kernels a plain forward
// never ran). The same chain without the attribute is the reference. Prints one line per case.
//
//   nvcc -std=c++17 -arch=sm_90 -O2 bench/graph_pdl_gaps.cu -o graph_pdl_gaps && ./graph_pdl_gaps
#include <cuda_runtime.h>

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

__global__ void neverRunBefore(float* x) {
  x[threadIdx.x] += 2.f;
}

constexpr int kKernels = 400, kBlocks = 8, kThreads = 128, kReplays = 20;

cudaGraphExec_t captureChain(cudaStream_t s, float* x, bool programmatic) {
  cudaGraph_t graph = nullptr;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (int k = 0; k < kKernels; ++k) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(kBlocks);
    config.blockDim = dim3(kThreads);
    config.stream = s;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = programmatic ? 1 : 0;
    check(cudaLaunchKernelEx(&config, step, x), "launch");
  }
  check(cudaStreamEndCapture(s, &graph), "end capture");
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  check(cudaGraphDestroy(graph), "destroy graph");
  return exec;
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
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  float* x = nullptr;
  check(cudaMalloc(&x, kBlocks * kThreads * sizeof(float)), "malloc");
  check(cudaMemset(x, 0, kBlocks * kThreads * sizeof(float)), "memset");
  const cudaGraphExec_t plain = captureChain(s, x, false);
  const cudaGraphExec_t a = captureChain(s, x, true);
  std::printf("graph_pdl_gaps: %d kernels a graph, %d blocks of %d threads, median of %d replays\n",
              kKernels, kBlocks, kThreads, kReplays);
  std::printf("without the attribute:                    %.3f us a kernel\n", perKernel(plain, s));
  std::printf("programmatic, graph A alone:              %.3f us a kernel\n", perKernel(a, s));
  std::vector<cudaGraphExec_t> more;
  for (int total : {1, 2, 4, 8, 16}) {
    while (int(more.size()) < total) more.push_back(captureChain(s, x, true));
    std::printf("A with %2d more graphs instantiated:       %.3f us a kernel\n", total,
                perKernel(a, s));
    for (cudaGraphExec_t g : more) check(cudaGraphLaunch(g, s), "launch another");
    check(cudaStreamSynchronize(s), "sync");
    std::printf("A after those %2d were launched once:      %.3f us a kernel\n", total,
                perKernel(a, s));
  }
  neverRunBefore<<<1, 32, 0, s>>>(x);
  check(cudaGetLastError(), "launch a new kernel");
  check(cudaStreamSynchronize(s), "sync");
  std::printf("A after a kernel new to the process ran:   %.3f us a kernel\n", perKernel(a, s));
  for (cudaGraphExec_t g : more) cudaGraphExecDestroy(g);
  cudaGraphExecDestroy(a);
  cudaGraphExecDestroy(plain);
  cudaFree(x);
  cudaStreamDestroy(s);
  return 0;
}
