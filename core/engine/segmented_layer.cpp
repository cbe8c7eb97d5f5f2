#include "segmented_layer.h"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <string>

#include "../error.h"

namespace shardscope {

namespace {

void check(cudaError_t result, int64_t layer, const char* op) {
  if (result == cudaSuccess) return;
  throw Error(std::string("replaying decoder layer ") + std::to_string(layer) +
              " in CUDA graph segments: " + op + " failed: " + cudaGetErrorString(result) +
              " (enforce_eager=True runs the layer without graphs)");
}

cudaStream_t currentStream(const at::Tensor& on) {
  return c10::cuda::getCurrentCUDAStream(on.device().index()).stream();
}

// Whether the capture under way on `stream` has recorded any work yet: a port right after
// another (no kernel between them) starts no new segment.
bool captureHasWork(cudaStream_t stream, int64_t layer) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* dependencies = nullptr;
  size_t count = 0;
#if CUDART_VERSION >= 13000
  check(cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &dependencies, nullptr, &count),
        layer, "cudaStreamGetCaptureInfo");
#else
  check(cudaStreamGetCaptureInfo_v2(stream, &status, nullptr, nullptr, &dependencies, &count),
        layer, "cudaStreamGetCaptureInfo");
#endif
  return count > 0;
}

}  // namespace

// One launch of segments [first, last): their graphs composed as child graphs of one graph.
struct SegmentedLayer::Launchable {
  cudaGraphExec_t exec = nullptr;
  Launchable() = default;
  Launchable(const Launchable&) = delete;
  Launchable& operator=(const Launchable&) = delete;
  ~Launchable() {
    if (exec) cudaGraphExecDestroy(exec);
  }
};

namespace {

struct GraphOwner {  // a cudaGraph_t destroyed when the composition is instantiated or fails
  cudaGraph_t graph = nullptr;
  GraphOwner() = default;
  GraphOwner(const GraphOwner&) = delete;
  GraphOwner& operator=(const GraphOwner&) = delete;
  ~GraphOwner() {
    if (graph) cudaGraphDestroy(graph);
  }
};

}  // namespace

// During the capture run: ends the segment under way at each port that follows some work and
// starts the next, keeping the port's buffers. During warm-ups it only makes the layer take the
// module-by-module path (an observer is installed).
class SegmentedLayer::Recorder : public PortObserver {
 public:
  Recorder(SegmentedLayer& owner, PoolId pool) : owner_(owner), pool_(pool) {}
  ~Recorder() override { abandon(); }

  void begin() { start(); }

  void visit(const Module& module, PortRole role, PortValue& value, const ForwardBatch&) override {
    if (!current_) return;
    if (captureHasWork(stream(), owner_.layer_)) {
      finish();
      start();
    }
    owner_.ports_.push_back(Port{&module, role, value, owner_.segments_.size()});
  }

  // The fused recording's attention passed these ports without visiting them: kept in order,
  // with no buffers and no cut.
  void portPassed(const Module& module, PortRole role, const ForwardBatch&) override {
    if (!current_) return;
    owner_.lastSkipped_ = int64_t(owner_.ports_.size());
    owner_.ports_.push_back(Port{&module, role, PortValue{}, owner_.segments_.size(), true});
  }

  void end() { finish(); }

  // Leaves the stream out of capture mode after an error (the error itself goes on).
  void abandon() noexcept {
    if (!current_) return;
    try {
      current_->capture_end();
    } catch (...) {
    }
    current_.reset();
  }

 private:
  cudaStream_t stream() const { return currentStream(owner_.hiddenIn_); }
  void start() {
    current_ = std::make_unique<at::cuda::CUDAGraph>(/*keep_graph=*/true);
    // Thread-local: the other rank threads keep allocating and launching while this one records.
    current_->capture_begin(pool_, cudaStreamCaptureModeThreadLocal);
  }
  void finish() {
    current_->capture_end();
    owner_.segments_.push_back(std::move(current_));
  }

  SegmentedLayer& owner_;
  PoolId pool_;
  std::unique_ptr<at::cuda::CUDAGraph> current_;
};

SegmentedLayer::SegmentedLayer(const LayerStack& stack, int64_t layer, const at::Tensor& hidden,
                               const at::Tensor& residual, ForwardBatch fixed, PoolId pool,
                               c10::cuda::CUDAStream capture, int warmups, bool fused)
    : layer_(layer) {
  hiddenIn_ = hidden.clone();
  if (residual.defined()) residualIn_ = residual.clone();
  Recorder recorder(*this, pool);
  fixed.observer = &recorder;
  fixed.replayer = nullptr;
  fixed.fuseAttentionUnderObserver = fused;
  // As LayerGraphs::record: warm-ups and capture on the capture stream, ordered after the step's
  // work.
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(hidden.device().index());
  at::cuda::CUDAEvent ready;
  ready.record(current);
  ready.block(capture);
  {
    c10::cuda::CUDAStreamGuard guard(capture);
    for (int i = 0; i < warmups; ++i) {
      at::Tensor h = hiddenIn_, r = residualIn_;
      stack.runLayer(layer, h, r, fixed);
    }
    at::Tensor h = hiddenIn_, r = residualIn_;
    recorder.begin();
    stack.runLayer(layer, h, r, fixed);  // on an error the recorder leaves capture mode
    // Outputs of their own (the layer's last port hands out copies), which also keeps the last
    // segment from being empty.
    hiddenOut_ = h.clone();
    if (r.defined()) residualOut_ = r.clone();
    recorder.end();
  }
  at::cuda::CUDAEvent recorded;
  recorded.record(capture);
  recorded.block(current);
}

SegmentedLayer::~SegmentedLayer() {
  launchables_.clear();  // before the segments they were composed of
}

void SegmentedLayer::launch(size_t first, size_t last) {
  if (first >= last) return;
  std::unique_ptr<Launchable>& l = launchables_[{first, last}];
  if (!l) {
    GraphOwner parent;
    check(cudaGraphCreate(&parent.graph, 0), layer_, "cudaGraphCreate");
    cudaGraphNode_t previous = nullptr;
    for (size_t k = first; k < last; ++k) {
      cudaGraphNode_t node = nullptr;
      check(cudaGraphAddChildGraphNode(&node, parent.graph, previous ? &previous : nullptr,
                                       previous ? 1 : 0, segments_[k]->raw_cuda_graph()),
            layer_, "cudaGraphAddChildGraphNode");
      previous = node;
    }
    auto made = std::make_unique<Launchable>();
    check(cudaGraphInstantiate(&made->exec, parent.graph, 0), layer_, "cudaGraphInstantiate");
    l = std::move(made);
  }
  check(cudaGraphLaunch(l->exec, currentStream(hiddenIn_)), layer_, "cudaGraphLaunch");
}

bool SegmentedLayer::serves(const PortObserver& observer, int64_t step) const {
  for (int64_t i = 0; i <= lastSkipped_; ++i) {
    const Port& p = ports_[size_t(i)];
    if (observer.waitsOn(*p.module, p.role, step)) return false;
  }
  return true;
}

void SegmentedLayer::replay(at::Tensor& hidden, at::Tensor& residual, const ForwardBatch& batch) {
  hiddenIn_.copy_(hidden);
  if (residualIn_.defined()) residualIn_.copy_(residual);
  PortObserver& observer = *batch.observer;
  size_t done = 0;  // segments launched
  for (Port& p : ports_) {
    if (p.skipped || !observer.waitsOn(*p.module, p.role, batch.step)) {  // serves() checked
      observer.portPassed(*p.module, p.role, batch);                      // the skipped ones
      continue;
    }
    launch(done, p.boundary);
    done = p.boundary;
    PortValue v = p.value;
    v.written = false;
    for (at::Tensor& t : v.items) {
      if (t.defined()) t = t.clone();
    }
    observer.visit(*p.module, p.role, v, batch);
    if (!v.written) continue;
    for (size_t i = 0; i < v.items.size(); ++i) {
      if (p.value.items[i].defined()) p.value.items[i].copy_(v.items[i]);
    }
  }
  launch(done, segments_.size());
  // Overwritten by this layer's next replay, when the step has long used them.
  hidden = hiddenOut_;
  residual = residualOut_;
}

}  // namespace shardscope
