#include "run_view.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "store_error.h"

namespace shardscope::store {
namespace {

using Kind = RunView::Kind;

constexpr std::pair<Kind, const char*> kKindNames[] = {
    {Kind::Generate, "generate"},
    {Kind::TopK, "top-k"},
    {Kind::Read, "read"},
    {Kind::HeadAblation, "head-ablation"},
    {Kind::ExpertAblation, "expert-ablation"},
    {Kind::SweepLayer, "sweep-layer"},
    {Kind::LogitLens, "logit-lens"},
    {Kind::AttentionPattern, "attention-pattern"},
    {Kind::Routing, "routing"},
};

const char* kindName(Kind k) {
  for (const auto& [kind, name] : kKindNames) {
    if (kind == k) return name;
  }
  return "";
}

Kind kindNamed(const std::string& name) {
  for (const auto& [kind, n] : kKindNames) {
    if (name == n) return kind;
  }
  return Kind::None;
}

// An integer field when present; `fallback` otherwise.
int64_t field(const nlohmann::json& j, const char* key, int64_t fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

}  // namespace

std::string runViewJson(const RunView& view) {
  if (view.kind == Kind::None) return "";
  const RunView unset;
  nlohmann::json j;
  j["kind"] = kindName(view.kind);
  if (!view.port.empty()) j["port"] = view.port;
  if (view.step != unset.step) j["step"] = view.step;
  if (view.layer != unset.layer) j["layer"] = view.layer;
  if (view.head != unset.head) j["head"] = view.head;
  if (view.expert != unset.expert) j["expert"] = view.expert;
  if (view.target != unset.target) j["target"] = view.target;
  return j.dump();
}

RunView parseRunView(const std::string& json) {
  RunView view;
  if (json.empty()) return view;
  const auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("kind") || !j["kind"].is_string())
    throw StoreError("a run's view is not a JSON object with a kind: " + json);
  view.kind = kindNamed(j["kind"].get<std::string>());
  if (view.kind == Kind::None) return view;
  if (const auto port = j.find("port"); port != j.end() && port->is_string())
    view.port = port->get<std::string>();
  view.step = field(j, "step", view.step);
  view.layer = field(j, "layer", view.layer);
  view.head = field(j, "head", view.head);
  view.expert = field(j, "expert", view.expert);
  view.target = field(j, "target", view.target);
  if (view.step < 0 || view.layer < -1 || view.head < -1 || view.expert < -1 || view.target < -1)
    throw StoreError("a run's view holds a negative step, layer, head, expert or token: " + json);
  return view;
}

}  // namespace shardscope::store
