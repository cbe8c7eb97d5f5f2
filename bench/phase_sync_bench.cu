// phase_sync_bench: what a decode layer's kernel boundaries cost against grid barriers in one
// persistent kernel (issue 16: the 30B decode at batch 1 is about 7 us a layer from 1.5x its floor
// on an H200, RESULTS run 17). No LibTorch. A layer is six dependent phases shaped as
// Qwen3-30B-A3B's at batch 1 in bf16 (rows x columns a GEMV streams): qkv 5120 x 2048, an
// attention-like phase of 64 x 2048 launched as 32 blocks (a row a warp: the first 8 work), o_proj
// 2048 x 4096, the router 128 x 2048, gate_up 12288 x 2048 (8 experts' gate and up rows), down 2048
// x 6144 (8 experts' rows): 114 MB a layer, 48 layers, each its own weights (5.5 GB, past any
// cache; but a small phase run alone, as below, may be served from L2: the router's 48 copies
// are 25 MB). Each phase starts from a value the phase before wrote, so the order is a real
// dependency; every phase loads its first weights before it waits, as ShardScope's kernels do.
// Three ways to run the 48 layers, each timed over replays with CUDA events:
//   kernels  a kernel a phase, programmatic dependent launch, one CUDA graph (ShardScope today);
//            also with attention, the router or both run in the tail of the phase before them by
//            its last blocks to finish (a ticket each; RESULTS run 21: slower than the boundary);
//   layer    a cooperative kernel a layer, its phases separated by grid barriers, one graph;
//   whole    one cooperative kernel for all 48 layers.
// Before them: the synchronisation alone (empty kernels, empty grid barriers, cooperative groups'
// grid.sync()), then each phase alone, and gate_up and down with their rows known only after one
// dependent read or (gate_up) after chooseInBlock, the choice ShardScope's one-token expert
// kernels make (RESULTS run 19).
// The floor is the bytes over the bandwidth a plain read of the same weights reaches in the call.
// Prints one line per way: microseconds a layer and the ratio to the floor.
//
//   nvcc -std=c++17 -arch=sm_90 -O3 -I. bench/phase_sync_bench.cu -o phase_sync_bench &&
//     ./phase_sync_bench [replays]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <vector>

#include "bench/phase_sync_kernels.cuh"

namespace {

using namespace phase_sync;

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "phase_sync_bench: %s failed: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

cudaLaunchConfig_t configOf(dim3 grid, cudaStream_t stream, cudaLaunchAttribute* attrs,
                            bool cooperative) {
  cudaLaunchConfig_t c = {};
  c.gridDim = grid;
  c.blockDim = dim3(kThreads);
  c.stream = stream;
  attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[0].val.programmaticStreamSerializationAllowed = 1;
  attrs[1].id = cudaLaunchAttributeCooperative;
  attrs[1].val.cooperative = 1;
  c.attrs = attrs;
  c.numAttrs = cooperative ? 2 : 1;
  return c;
}

float timeGraph(cudaGraphExec_t exec, cudaStream_t stream, int replays) {
  for (int i = 0; i < 3; ++i) check(cudaGraphLaunch(exec, stream), "warm-up replay");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  check(cudaEventRecord(start, stream), "record");
  for (int i = 0; i < replays; ++i) check(cudaGraphLaunch(exec, stream), "replay");
  check(cudaEventRecord(stop, stream), "record");
  check(cudaEventSynchronize(stop), "synchronize");
  float ms = 0.f;
  check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / float(replays);
}

}  // namespace

int main(int argc, char** argv) {
  const int replays = argc > 1 ? std::atoi(argv[1]) : 20;
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "properties");
  int perSm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, layerKernel, kThreads, 0),
        "occupancy");
  const int grid = sms * perSm;

  const int64_t shapes[kPhases][2] = {{5120, 2048}, {64, 2048},    {2048, 4096},
                                      {128, 2048},  {12288, 2048}, {2048, 6144}};
  int64_t layerElements = 0;
  for (const auto& s : shapes) layerElements += s[0] * s[1];
  const int64_t total = layerElements * kLayers;
  __nv_bfloat16* weights = nullptr;
  check(cudaMalloc(&weights, size_t(total) * 2), "weights (5.5 GB)");
  fill<<<sms * 8, 256>>>(weights, total, 12345u);
  check(cudaGetLastError(), "fill");

  std::vector<Layer> host(kLayers);
  const __nv_bfloat16* at = weights;
  for (auto& layer : host) {
    for (int i = 0; i < kPhases; ++i) {
      const int64_t rows = shapes[i][0], k = shapes[i][1];
      const int blocks = i == 1 ? 32 : int(std::min<int64_t>((rows + kWarps - 1) / kWarps, grid));
      layer.phase[i] = {at, rows, k, blocks, Phase::Rows::kEarly};
      at += rows * k;
    }
  }
  Layer* layersOnDevice = nullptr;
  check(cudaMalloc(&layersOnDevice, sizeof(Layer) * kLayers), "layers");
  check(cudaMemcpy(layersOnDevice, host.data(), sizeof(Layer) * kLayers, cudaMemcpyHostToDevice),
        "layers");
  __nv_bfloat16* x = nullptr;
  float *dep = nullptr, *out = nullptr;
  unsigned* barrier = nullptr;
  check(cudaMalloc(&x, 6144 * 2), "x");
  fill<<<8, 256>>>(x, 6144, 777u);
  check(cudaMalloc(&dep, sizeof(float) * (kLayers * kPhases + 1)), "dep");
  check(cudaMemset(dep, 0, sizeof(float) * (kLayers * kPhases + 1)), "dep");
  check(cudaMalloc(&out, sizeof(float) * 12288), "out");
  check(cudaMalloc(&barrier, sizeof(unsigned) * kLayers), "barrier");
  int* choice = nullptr;
  check(cudaMalloc(&choice, sizeof(int)), "choice");
  check(cudaMemset(choice, 0, sizeof(int)), "choice");
  __nv_bfloat16* logits = nullptr;
  check(cudaMalloc(&logits, 128 * 2), "logits");
  fill<<<1, 128>>>(logits, 128, 4242u);
  const Args args{layersOnDevice, x, dep, out, barrier, choice, logits};

  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  check(cudaDeviceSynchronize(), "fill");

  // The floor: the same bytes read plainly, best of three.
  float readMs = 1e9f;
  for (int t = 0; t < 3; ++t) {
    cudaEvent_t s, e;
    check(cudaEventCreate(&s), "event");
    check(cudaEventCreate(&e), "event");
    check(cudaEventRecord(s, stream), "record");
    readAll<<<sms * 8, kThreads, 0, stream>>>(reinterpret_cast<const int4*>(weights), total / 8,
                                              out);
    check(cudaEventRecord(e, stream), "record");
    check(cudaEventSynchronize(e), "read");
    float ms = 0.f;
    check(cudaEventElapsedTime(&ms, s, e), "elapsed");
    readMs = std::min(readMs, ms);
  }
  const double bytes = double(total) * 2, gbs = bytes / (readMs * 1e-3) / 1e9;
  const double floorUs = readMs * 1e3 / kLayers;
  std::printf("%s, %d SMs, grid %d (%d a SM): %.2f GB read at %.0f GB/s; floor %.2f us a layer\n",
              prop.name, sms, grid, perSm, bytes / 1e9, gbs, floorUs);

  cudaLaunchAttribute attrs[2];
  const auto report = [&](const char* way, cudaGraph_t graph) {
    cudaGraphExec_t exec;
    check(cudaGraphInstantiate(&exec, graph, 0), way);
    const float ms = timeGraph(exec, stream, replays);
    const double us = ms * 1e3 / kLayers;
    std::printf("%-58s %8.2f us a layer  %.3fx floor  (%.3f ms for %d layers)\n", way, us,
                us / floorUs, ms, kLayers);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  };
  const auto capture = [&](auto&& launches) {
    cudaGraph_t graph;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
    launches();
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    return graph;
  };

  constexpr int kSyncs = kLayers * kPhases;
  report("empty kernels (a layer's worth: 6)", capture([&] {
           for (int n = 0; n < kSyncs; ++n) {
             const cudaLaunchConfig_t c = configOf(dim3(unsigned(grid)), stream, attrs, false);
             check(cudaLaunchKernelEx(&c, emptyKernel), "empty kernel");
           }
         }));
  report("empty barriers (a layer's worth: 6)", capture([&] {
           check(cudaMemsetAsync(barrier, 0, sizeof(unsigned), stream), "memset");
           const cudaLaunchConfig_t c = configOf(dim3(unsigned(grid)), stream, attrs, true);
           check(cudaLaunchKernelEx(&c, emptyBarriers, barrier, kSyncs), "barriers");
         }));
  report("empty grid.sync()s (a layer's worth: 6)", capture([&] {
           const cudaLaunchConfig_t c = configOf(dim3(unsigned(grid)), stream, attrs, true);
           check(cudaLaunchKernelEx(&c, emptyGridSyncs, kSyncs), "grid syncs");
         }));
  // `phases` of every layer as kernels, in order: all six is ShardScope's way.
  const auto kernels = [&](const char* way, std::initializer_list<int> phases) {
    report(way, capture([&] {
             for (int l = 0; l < kLayers; ++l) {
               for (int i : phases) {
                 const cudaLaunchConfig_t c =
                     configOf(dim3(unsigned(host[l].phase[i].blocks)), stream, attrs, false);
                 check(cudaLaunchKernelEx(&c, phaseKernel, args, l, i), "phase kernel");
               }
             }
           }));
  };
  const auto setRows = [&](std::initializer_list<int> phases, Phase::Rows known) {
    for (auto& layer : host) {
      for (int i : phases) layer.phase[i].rows_known = known;
    }
    check(cudaMemcpy(layersOnDevice, host.data(), sizeof(Layer) * kLayers, cudaMemcpyHostToDevice),
          "layers");
  };
  // Each phase alone (48 dependent kernels of it, each layer's weights); gate_up addressed after
  // the choice; gate_up and down addressed after one dependent read, alone and in the chain.
  const char* names[kPhases] = {"qkv", "attention-like", "o_proj", "router", "gate_up", "down"};
  for (int i = 0; i < kPhases; ++i) {
    const double mb = double(shapes[i][0] * shapes[i][1]) * 2 / 1e6;
    char way[96];
    std::snprintf(way, sizeof way, "alone: %s (%.2f MB, %.2f us of bytes)", names[i], mb,
                  mb * 1e6 / (gbs * 1e9) * 1e6);
    kernels(way, {i});
  }
  setRows({4}, Phase::Rows::kChosen);
  kernels("alone, addressed after the choice: gate_up", {4});
  setRows({4, 5}, Phase::Rows::kLate);
  kernels("alone, addressed after the wait: gate_up", {4});
  kernels("alone, addressed after the wait: down", {5});
  kernels("kernels, experts addressed after the wait", {0, 1, 2, 3, 4, 5});
  // A small phase (attention, router) run in the tail of the phase before it: one kernel fewer.
  unsigned* done = nullptr;
  check(cudaMalloc(&done, sizeof(unsigned) * kLayers * kPhases), "tickets");
  const auto tails = [&](const char* way, std::initializer_list<int> phases,
                         std::initializer_list<int> withTail) {
    report(
        way, capture([&] {
          check(cudaMemsetAsync(done, 0, sizeof(unsigned) * kLayers * kPhases, stream), "memset");
          for (int l = 0; l < kLayers; ++l) {
            for (int i : phases) {
              const cudaLaunchConfig_t c =
                  configOf(dim3(unsigned(host[l].phase[i].blocks)), stream, attrs, false);
              if (std::find(withTail.begin(), withTail.end(), i) == withTail.end()) {
                check(cudaLaunchKernelEx(&c, phaseKernel, args, l, i), "phase kernel");
              } else {
                check(
                    cudaLaunchKernelEx(&c, phaseWithTailKernel, args, l, i, done + l * kPhases + i),
                    "phase kernel with a tail");
              }
            }
          }
        }));
  };
  setRows({4, 5}, Phase::Rows::kEarly);
  for (int pass = 0; pass < 2; ++pass) {
    kernels("kernels", {0, 1, 2, 3, 4, 5});
    tails("kernels, attention in qkv's tail", {0, 2, 3, 4, 5}, {0});
    tails("kernels, router in o_proj's tail", {0, 1, 2, 4, 5}, {2});
    tails("kernels, both", {0, 2, 4, 5}, {0, 2});
    report("layer", capture([&] {
             check(cudaMemsetAsync(barrier, 0, sizeof(unsigned) * kLayers, stream), "memset");
             for (int l = 0; l < kLayers; ++l) {
               const cudaLaunchConfig_t c = configOf(dim3(unsigned(grid)), stream, attrs, true);
               check(cudaLaunchKernelEx(&c, layerKernel, args, l), "layer kernel");
             }
           }));
    report("whole", capture([&] {
             check(cudaMemsetAsync(barrier, 0, sizeof(unsigned), stream), "memset");
             const cudaLaunchConfig_t c = configOf(dim3(unsigned(grid)), stream, attrs, true);
             check(cudaLaunchKernelEx(&c, wholeKernel, args), "whole kernel");
           }));
  }
  float last = 0.f;
  check(cudaMemcpy(&last, dep + kLayers * kPhases - 1, sizeof(float), cudaMemcpyDeviceToHost),
        "result");
  // Each phase adds about 1e-8 to the value before it: all digits, so that a run can be compared.
  std::printf("last phase's value %a (the same bits each run: a check the chain ran)\n", last);
  return 0;
}
