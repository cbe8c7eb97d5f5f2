// PortObserver: the one hook every module calls at each port visit. With no observer installed a
// visit costs one branch; the trace interleaver is an observer.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "module.h"

namespace shardscope {

struct ForwardBatch;

// A port's value on this rank: one tensor, or a tuple whose undefined items are None.
// An observer that writes replaces items; the module continues with what is here afterwards.
struct PortValue {
  std::vector<at::Tensor> items;
  bool tuple = false;
  // Set by an observer that changed the items' values (in place): a graph replayer, which hands
  // out copies of its buffers, copies them back.
  bool written = false;

  static PortValue single(at::Tensor t) { return {{std::move(t)}, false}; }
  static PortValue pair(at::Tensor a, at::Tensor b) { return {{std::move(a), std::move(b)}, true}; }
};

class PortObserver {
 public:
  virtual ~PortObserver() = default;
  // A port's value on this rank. After replayed graphs the GPU may still be running collectives:
  // an observer calls batch.group.waitForStream() (or a collective, which waits) before it reads
  // anything on the host, so that a rank that never arrives ends in the watchdog, not a hang.
  virtual void visit(const Module& module, PortRole role, PortValue& value,
                     const ForwardBatch& batch) = 0;
  // Pipeline parallelism: another stage visited `module`'s port and shared its whole value (it
  // does so only for ports this observer's twin there waits on). Writes to `whole` stay here: the
  // owning stage applies the same writes itself.
  virtual void visitShared(const Module& module, PortRole role, PortValue& whole,
                           const ForwardBatch& batch) {}
  // Whether this step's forward needs the observer at all. A step launched while it does not runs
  // as a plain forward (no port visits, no model.samples round trip, whole graphs); endStep,
  // stopRequested and finish are still called.
  virtual bool watchesForward() const { return true; }
  // After a step's samples are final; finished[r] says whether request r ended with this step.
  virtual void endStep(const ForwardBatch& batch, const std::vector<bool>& finished) {}
  // Whether request r asked to stop after the current step (tracer.stop()).
  virtual bool stopRequested(int64_t request) const { return false; }
  // The first decoder layer whose ports the observer needs at `step` (given what it waits on now),
  // numLayers when none, -1 when it cannot tell: then every layer runs eagerly and visits its
  // ports.
  virtual int64_t firstLayerNeeded(int64_t step, int64_t numLayers) const { return -1; }
  // Layers [begin, end) of this step ran as a replayed graph: their ports were passed unvisited.
  virtual void layersReplayed(int64_t begin, int64_t end, const ForwardBatch& batch) {}
  // Whether waitsOn() answers for single ports. Then a layer the observer needs replays as graph
  // segments cut at its ports, visiting only the ports it waits on; otherwise it runs eagerly.
  virtual bool tellsPortWaits() const { return false; }
  // Whether the observer waits on this port at `step`, given what it waits on now.
  virtual bool waitsOn(const Module& module, PortRole role, int64_t step) const { return true; }
  // A replayed graph segment passed this port without visiting it (nobody waited on it).
  virtual void portPassed(const Module& module, PortRole role, const ForwardBatch& batch) {}
  // After the last step, with every request's generated ids.
  virtual void finish(const std::vector<std::vector<int64_t>>& generated) {}
};

}  // namespace shardscope
