#include "module_tree_text.h"

#include <sstream>

#include "../model/tokenizer.h"

namespace shardscope {
namespace {

std::string joinShapes(const std::vector<std::vector<int64_t>>& shapes, bool tuple) {
  std::string s = tuple ? "(" : "";
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + formatShape(shapes[i]);
  return s + (tuple ? ")" : "");
}

}  // namespace

std::string moduleTreeText(const ModelInfo& info, const std::vector<PortShape>& shapes,
                           size_t promptTokens) {
  std::ostringstream out;
  out << info.spec << ": " << info.family << ", " << info.numLayers << " layers, tp=" << info.tp
      << (info.expertParallel ? " (expert parallel)" : "")
      << (info.pp > 1 ? ", pp=" + std::to_string(info.pp) : std::string())
      << (info.dcp > 1 ? ", dcp=" + std::to_string(info.dcp) : std::string()) << ", " << info.dtype
      << ", " << promptTokens << "-token prompt\n"
      << (info.device == "cpu" && info.intraOpThreads > 0
              ? std::to_string(info.intraOpThreads) + " CPU thread" +
                    (info.intraOpThreads == 1 ? "" : "s") + " per rank (--threads)\n"
              : std::string())
      << "kv cache: " << int64_t(info.kvCacheBytesPerToken + 0.5) << " bytes per token per rank\n"
      << "shapes are rank 0's shard -> the gathered whole"
      << (info.pp > 1 ? " (rank 0 of the stage holding the module)" : "") << "\n";
  for (const ModuleInfo& m : info.modules) {
    out << std::string(size_t(m.depth) * 2, ' ') << m.path << "  (" << m.kind << ")";
    if (info.pp > 1 && m.stage >= 0) out << "  stage " << m.stage;
    out << "\n";
    const std::string indent(size_t(m.depth) * 2 + 4, ' ');
    for (const PortShape& p : shapes) {
      if (p.module != m.path) continue;
      out << indent << "." << p.port << "  [" << p.shardKind << "]  "
          << joinShapes(p.shard, p.tuple);
      if (p.whole != p.shard) out << " -> " << joinShapes(p.whole, p.tuple);
      out << "\n";
      if (p.port == "output") break;  // one visit per port is enough (layers repeat per step)
    }
    for (const ParameterInfo& prm : m.parameters) {
      out << indent << "." << prm.name << "  shard " << formatShape(prm.shardShape) << " of "
          << formatShape(prm.fullShape) << "\n";
    }
  }
  return out.str();
}

std::vector<int64_t> probeIds(const Engine& engine, const std::string& prompt) {
  std::vector<int64_t> ids;
  if (auto tok = engine.tokenizer()) {
    ids = tok->encode(prompt.empty() ? "The capital of France is" : prompt);
  } else {
    for (int64_t i = 0; i < 5; ++i) ids.push_back(i % engine.info().vocabSize);
  }
  return ids;
}

std::string inspectText(Engine& engine, const std::string& prompt) {
  const std::vector<int64_t> ids = probeIds(engine, prompt);
  return moduleTreeText(engine.info(), probePortShapes(engine, ids), ids.size());
}

}  // namespace shardscope
