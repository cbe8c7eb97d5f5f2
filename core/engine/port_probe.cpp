#include "port_probe.h"

#include "../parallel/shard_spec.h"
#include "generation.h"

namespace shardscope {
namespace {

// Records on the tensor-parallel rank 0 of one stage the ports that stage visits (model.samples,
// which every stage visits, only on the last).
class ShapeRecorder : public PortObserver {
 public:
  explicit ShapeRecorder(int tp) : tp_(tp) {}

  void visit(const Module& m, PortRole role, PortValue& value, const ForwardBatch&) override {
    const int owner = model_->portStage(m, role);
    if (owner != model_->stage().stage && !(owner == kEveryStage && model_->stage().last())) return;
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

  void setModel(const CausalLM& model) { model_ = &model; }

  std::vector<PortShape> shapes;

 private:
  int tp_;
  const CausalLM* model_ = nullptr;
};

}  // namespace

std::string formatShape(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "None";
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<PortShape> probePortShapes(Engine& engine, const std::vector<int64_t>& promptIds) {
  const int tp = engine.info().tp;
  // One recorder a stage, each filled by its stage's tensor-parallel rank 0.
  auto recorders =
      std::make_shared<std::vector<ShapeRecorder>>(size_t(engine.info().pp), ShapeRecorder(tp));
  GenerateRequest request;
  request.prompts = {promptIds};
  request.sampling.maxTokens = 1;
  JobHandle h = engine.submit([recorders, request](RankContext& ctx) {
    // Each stage's first tensor-parallel rank records its stage's ports; every rank process
    // records its own (each returns its own shapes).
    ShapeRecorder* mine = nullptr;
    if (ctx.reports || ctx.group.rank() == 0) {
      mine = &(*recorders)[size_t(ctx.stage())];
      mine->setModel(ctx.model);
    }
    runGeneration(ctx, request, nullptr, mine);
  });
  h.wait();
  std::vector<PortShape> shapes;
  for (ShapeRecorder& r : *recorders) shapes.insert(shapes.end(), r.shapes.begin(), r.shapes.end());
  return shapes;
}

}  // namespace shardscope
