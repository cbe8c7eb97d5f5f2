#include "layer_graphs.h"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>

#include <algorithm>

#include "../error.h"
#include "../parallel/collective_board.h"
#include "../runtime_switches.h"

namespace shardscope {

// One recorded segment: inputs copied in before a replay, outputs copied out after it.
struct LayerGraphs::Graph {
  at::cuda::CUDAGraph graph;
  at::Tensor hiddenIn, residualIn, hiddenOut, residualOut;
};

// All graphs of a rank share one memory pool: they replay one at a time on one stream, and each
// keeps its outputs alive, so a segment's scratch may reuse another's.
struct LayerGraphs::Pool {
  decltype(at::cuda::graph_pool_handle()) id = at::cuda::graph_pool_handle();
};

namespace {

// Eager runs of a segment before its capture (SHARDSCOPE_GRAPH_WARMUPS overrides kWarmups).
int graphWarmups() {
  const int warmups = RuntimeSwitches::current().graphWarmups;
  return warmups > 0 ? warmups : LayerGraphs::kWarmups;
}

// Runs layers [begin, end) eagerly on the current stream.
std::pair<at::Tensor, at::Tensor> runLayers(const LayerStack& stack, int64_t begin, int64_t end,
                                            at::Tensor hidden, at::Tensor residual,
                                            const ForwardBatch& batch) {
  for (int64_t i = begin; i < end; ++i) stack.runLayer(i, hidden, residual, batch);
  return {hidden, residual};
}

}  // namespace

LayerGraphs::LayerGraphs(ProcessGroup& group, at::Device device)
    : group_(group), device_(device), pool_(std::make_unique<Pool>()), capture_(device.index()) {}

LayerGraphs::~LayerGraphs() {
  segmented_.clear();  // before the pool's id is forgotten
  graphs_.clear();
}

// What a recorded graph bakes in: a decode step's requests and attended keys, or every span's
// rows, cached length and cache slot (the attention of a prefill narrows by them on the host).
LayerGraphs::Layout LayerGraphs::layoutOf(const ForwardBatch& batch) {
  if (batch.decodeSlots.defined())
    return {0, batch.decodeSlots.size(0), batch.decodeSpan, batch.decodeSlotsInOrder ? 1 : 0};
  Layout layout{1};
  for (const SequenceSpan& s : batch.spans) {
    layout.insert(layout.end(), {s.tokenStart, s.tokenCount, s.pastLength, s.slot});
  }
  return layout;
}

LayerGraphs::StepInputs& LayerGraphs::inputs(const Layout& layout, const ForwardBatch& batch) {
  StepInputs& in = inputs_[layout];
  // Once a replay() call: its graphs all run this step (a trace's segmented layers asked for
  // them once a layer, twice with the fused recording looked up first).
  if (in.filledBy == replayCalls_) return in;
  if (!in.positions.defined()) {
    in.positions = at::empty_like(batch.positions);
    if (batch.decodeSlots.defined()) in.slots = at::empty_like(batch.decodeSlots);
  }
  in.positions.copy_(batch.positions);
  if (in.slots.defined()) in.slots.copy_(batch.decodeSlots);
  in.filledBy = replayCalls_;
  return in;
}

std::unique_ptr<LayerGraphs::Graph> LayerGraphs::record(const LayerStack& stack, int64_t begin,
                                                        int64_t end, const at::Tensor& hidden,
                                                        const at::Tensor& residual, StepInputs& in,
                                                        const ForwardBatch& batch) {
  auto g = std::make_unique<Graph>();
  g->hiddenIn = hidden.clone();
  if (residual.defined()) g->residualIn = residual.clone();
  // The graph reads the step's tensors from the fixed buffers and sees no observer.
  ForwardBatch fixed = batch;
  fixed.positions = in.positions;
  if (batch.decodeSlots.defined()) fixed.decodeSlots = in.slots;
  fixed.observer = nullptr;
  fixed.replayer = nullptr;

  // Capture runs on the rank's capture stream, after kWarmups eager runs there (cuBLAS
  // workspaces, cuDNN's lazy set-up); each writes the same keys and values the replay writes. One
  // warm-up was not enough on two H200s: bf16 prefill attention goes to cuDNN, and when a process's
  // first graph was a one-layer segment (a trace at layer 1) its capture failed with
  // CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED (issue 14's hang, with the abort that
  // reached one rank only); longer segments had run the shape once per layer before. Three, as
  // torch.cuda.make_graphed_callables does.
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_.index());
  const c10::cuda::CUDAStream capture = capture_.stream();
  at::cuda::CUDAEvent ready;
  ready.record(current);
  ready.block(capture);
  {
    c10::cuda::CUDAStreamGuard guard(capture);
    for (int i = 0, n = graphWarmups(); i < n; ++i)
      runLayers(stack, begin, end, g->hiddenIn, g->residualIn, fixed);
#if TORCH_VERSION_MAJOR >= 2
    // Thread-local: the other rank threads keep allocating and launching while this one records.
    g->graph.capture_begin(pool_->id, cudaStreamCaptureModeThreadLocal);
#else
    g->graph.capture_begin(pool_->id);
#endif
    try {
      std::tie(g->hiddenOut, g->residualOut) =
          runLayers(stack, begin, end, g->hiddenIn, g->residualIn, fixed);
    } catch (...) {
      try {
        g->graph.capture_end();  // leave the stream out of capture mode before the error goes on
      } catch (...) {
      }
      throw;
    }
    g->graph.capture_end();
  }
  at::cuda::CUDAEvent recorded;
  recorded.record(capture);
  recorded.block(current);
  return g;
}

int64_t LayerGraphs::wholeLayersEnd(int64_t begin, int64_t layers, const ForwardBatch& batch) {
  int64_t end = layers;
  if (batch.observer) {
    const int64_t needed = batch.observer->firstLayerNeeded(batch.step, layers);
    if (needed < 0) return -1;  // the observer cannot say: every port is visited
    end = std::clamp(needed, begin, layers);
  }
  if (batch.failure) {  // an injected failure's layer runs eagerly on every rank
    for (int64_t i = begin; i < end; ++i) {
      if (batch.failure->targets(i, batch.step)) return i;
    }
  }
  return end;
}

int64_t LayerGraphs::replay(const LayerStack& stack, int64_t begin, at::Tensor& hidden,
                            at::Tensor& residual, const ForwardBatch& batch) {
  if (!hidden.is_cuda() || batch.numTokens() > kMaxTokens) return begin;
  for (const SequenceSpan& s : batch.spans) {
    if (!s.cache) return begin;
  }
  ++replayCalls_;
  const int64_t layers = stack.numLayers();
  int64_t i = begin;
  // One wait for the step's graphs at the end (their collectives' watchdog), not one a launch: a
  // wait drains the GPU, and the launches after it start from an idle GPU. An observer visited in
  // between waits itself before it reads anything on the host (PortObserver::visit).
  bool launched = false;
  const auto waitForLaunched = [&] {
    if (!launched || group_.size() == 1) return;
    const std::string where = "the CUDA graphs of layers " + std::to_string(begin) + ".." +
                              std::to_string(i - 1) + " (2 all-reduces a layer)";
    CollectiveSite site(where, batch.step);  // keeps a pointer to `where`
    group_.waitForStream("replayed graphs");
  };

  while (i < layers) {
    const int64_t end = wholeLayersEnd(i, layers, batch);
    if (end < 0) break;
    if (end > i) {
      if (!replayWhole(stack, i, end, hidden, residual, batch)) break;
      launched = true;
      i = end;
      if (i == layers) break;
    }
    if (!replaySegmented(stack, i, hidden, residual, batch)) break;
    launched = true;
    ++i;
  }
  waitForLaunched();
  return i;
}

bool LayerGraphs::replayWhole(const LayerStack& stack, int64_t begin, int64_t end,
                              at::Tensor& hidden, at::Tensor& residual, const ForwardBatch& batch) {
  const Layout layout = layoutOf(batch);
  Layout key{begin, end};
  key.insert(key.end(), layout.begin(), layout.end());
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    if (graphs_.size() + segmented_.size() >= kMaxGraphs) return false;
    StepInputs& in = inputs(layout, batch);
    it = graphs_.emplace(key, record(stack, begin, end, hidden, residual, in, batch)).first;
  } else {
    inputs(layout, batch);
    it->second->hiddenIn.copy_(hidden);
    if (residual.defined()) it->second->residualIn.copy_(residual);
  }
  Graph& g = *it->second;
  group_.throwIfAborted();  // its collectives would wait for ranks that have left
  g.graph.replay();
  // The outputs' buffers are overwritten by this graph's next replay: with an observer, which
  // may keep what the later layers see, they are copied; without one the step is done with them
  // before that replay.
  hidden = batch.observer ? g.hiddenOut.clone() : g.hiddenOut;
  residual = batch.observer ? g.residualOut.clone() : g.residualOut;
  layersReplayed_ += end - begin;
  if (batch.observer) batch.observer->layersReplayed(begin, end, batch);
  return true;
}

bool LayerGraphs::replaySegmented(const LayerStack& stack, int64_t layer, at::Tensor& hidden,
                                  at::Tensor& residual, const ForwardBatch& batch) {
  PortObserver* observer = batch.observer;
  if (!observer || !observer->tellsPortWaits()) return false;
  if (batch.failure && batch.failure->targets(layer, batch.step)) return false;
  // A wait on an earlier layer's port is an ordering error the eager layer reports.
  if (observer->firstLayerNeeded(batch.step, stack.numLayers()) != layer) return false;
  SegmentedLayer* segments = segmentsFor(stack, layer, hidden, residual, batch);
  if (!segments) return false;
  group_.throwIfAborted();
  segments->replay(hidden, residual, batch);
  ++layersReplayed_;
  ++layersSegmented_;
  if (segments->skipsPorts()) ++layersSegmentedFused_;
  observer->layersReplayed(layer, layer + 1, batch);
  return true;
}

SegmentedLayer* LayerGraphs::segmentsFor(const LayerStack& stack, int64_t layer,
                                         const at::Tensor& hidden, const at::Tensor& residual,
                                         const ForwardBatch& batch) {
  // The fused recording first (unless SHARDSCOPE_SEGMENT_FUSED=0, to compare); it is the only
  // one a layer needs when it skipped no port (no fused attention in this model or step).
  if (RuntimeSwitches::current().segmentFusedFirst) {
    SegmentedLayer* fused = recorded(stack, layer, hidden, residual, batch, true);
    if (!fused || fused->serves(*batch.observer, batch.step)) return fused;
  }
  return recorded(stack, layer, hidden, residual, batch, false);
}

SegmentedLayer* LayerGraphs::recorded(const LayerStack& stack, int64_t layer,
                                      const at::Tensor& hidden, const at::Tensor& residual,
                                      const ForwardBatch& batch, bool fused) {
  const Layout layout = layoutOf(batch);
  Layout key{layer, fused ? 1 : 0};
  key.insert(key.end(), layout.begin(), layout.end());
  auto it = segmented_.find(key);
  if (it != segmented_.end()) {
    inputs(layout, batch);
    return it->second.get();
  }
  if (graphs_.size() + segmented_.size() >= kMaxGraphs) return nullptr;
  StepInputs& in = inputs(layout, batch);
  ForwardBatch fixed = batch;
  fixed.positions = in.positions;
  if (batch.decodeSlots.defined()) fixed.decodeSlots = in.slots;
  auto made = std::make_unique<SegmentedLayer>(stack, layer, hidden, residual, fixed, pool_->id,
                                               capture_.stream(), graphWarmups(), fused);
  return segmented_.emplace(key, std::move(made)).first->second.get();
}

}  // namespace shardscope
