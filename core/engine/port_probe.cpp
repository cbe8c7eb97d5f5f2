#include "port_probe.h"

#include "../parallel/shard_spec.h"
#include "generation.h"

namespace shardscope {
namespace {

class ShapeRecorder : public PortObserver {
 public:
  explicit ShapeRecorder(int tp) : tp_(tp) {}

  void visit(const Module& m, PortRole role, PortValue& value, const ForwardBatch&) override {
    const PortSpec& spec = m.port(role);
    PortShape s;
    s.module = m.path();
    s.port = spec.name;
    s.shardKind = spec.shard.name();
    s.tuple = value.tuple;
    for (const at::Tensor& t : value.items) {
      std::vector<int64_t> shard = t.defined() ? t.sizes().vec() : std::vector<int64_t>{};
      s.whole.push_back(wholeShape(shard, spec.shard, tp_));
      s.shard.push_back(std::move(shard));
    }
    shapes.push_back(std::move(s));
  }

  std::vector<PortShape> shapes;

 private:
  int tp_;
};

}  // namespace

std::string formatShape(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "None";
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<PortShape> probePortShapes(Engine& engine, const std::vector<int64_t>& promptIds) {
  auto recorder = std::make_shared<ShapeRecorder>(engine.info().tp);
  GenerateRequest request;
  request.prompts = {promptIds};
  request.sampling.maxTokens = 1;
  JobHandle h = engine.submit([recorder, request](RankContext& ctx) {
    runGeneration(ctx, request, nullptr, ctx.reports ? recorder.get() : nullptr);
  });
  h.wait();
  return recorder->shapes;
}

}  // namespace shardscope
