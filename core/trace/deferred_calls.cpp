#include "deferred_calls.h"

#include <sstream>

#include "value.h"

namespace shardscope::trace {

struct DeferredCalls::State {
  struct Call {
    std::vector<CallArg> args;
    int64_t rows = 0;
    bool done = false;
    StackedRow output;
    std::string error;  // the group's call failed: why
  };

  struct Group {
    const Module* module = nullptr;
    int64_t step = 0;
    std::string signature;  // the arguments' kinds, modules, integers and row shapes
    std::vector<std::shared_ptr<Call>> calls;
  };

  Runner run;  // cleared when the block's mediator goes
  std::vector<Group> groups;

  void runGroupOf(const Call* call);
};

namespace {

std::string signature(const std::vector<CallArg>& args) {
  std::ostringstream s;
  for (const CallArg& a : args) {
    if (a.module) {
      s << 'm' << a.module->path();
    } else if (a.integer) {
      s << 'i' << *a.integer;
    } else {
      s << 't' << int(a.tensor.scalar_type()) << a.tensor.device() << a.tensor.sizes().slice(1);
    }
    s << ';';
  }
  return s.str();
}

}  // namespace

void DeferredCalls::State::runGroupOf(const Call* call) {
  auto it = groups.begin();
  for (; it != groups.end(); ++it) {
    bool holds = false;
    for (const auto& c : it->calls) holds |= c.get() == call;
    if (holds) break;
  }
  if (it == groups.end()) return;  // ran already
  Group group = std::move(*it);
  groups.erase(it);
  // The arguments of the group's calls, tensors stacked along their rows.
  std::vector<CallArg> args = group.calls.front()->args;
  int64_t rows = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].tensor.defined()) continue;
    std::vector<at::Tensor> parts;
    for (const auto& c : group.calls) parts.push_back(c->args[i].tensor);
    args[i].tensor = group.calls.size() == 1 ? parts.front() : at::cat(parts, 0);
  }
  for (const auto& c : group.calls) rows += c->rows;
  try {
    if (!run) throw Error("the trace block ended before this call ran");
    const at::Tensor out = run(*group.module, std::move(args), group.step);
    if (out.dim() < 1 || out.size(0) != rows) {
      throw Error("internal error in ShardScope: " + group.module->path() + " returned " +
                  std::to_string(out.dim() ? out.size(0) : 0) + " rows for " +
                  std::to_string(rows) + " stacked rows");
    }
    // With rows alike (the lens's calls) the output is also a stack [calls, rows, ...]: alike ops
    // on the calls' outputs can then run once on it.
    bool alike = out.is_contiguous();
    for (const auto& c : group.calls) alike &= c->rows == group.calls.front()->rows;
    at::Tensor stacked;
    if (alike && group.calls.size() > 1) {
      std::vector<int64_t> shape{int64_t(group.calls.size()), group.calls.front()->rows};
      shape.insert(shape.end(), out.sizes().begin() + 1, out.sizes().end());
      stacked = out.view(shape);
    }
    int64_t first = 0, index = 0;
    for (const auto& c : group.calls) {
      c->output = StackedRow{out.narrow(0, first, c->rows), stacked, index++};
      c->done = true;
      first += c->rows;
    }
  } catch (const std::exception& e) {
    for (const auto& c : group.calls) {
      c->error = e.what();
      c->done = true;
    }
    throw;
  }
}

DeferredCalls::DeferredCalls(Runner run) : state_(std::make_shared<State>()) {
  state_->run = std::move(run);
}

DeferredCalls::~DeferredCalls() {
  state_->run = nullptr;
}

bool DeferredCalls::holdable(const Module& m, const std::vector<CallArg>& args) {
  if (!m.callRowWise()) return false;
  int64_t rows = -1;
  for (const CallArg& a : args) {
    if (!a.tensor.defined()) continue;
    if (a.tensor.dim() < 2 || (rows >= 0 && a.tensor.size(0) != rows)) return false;
    rows = a.tensor.size(0);
  }
  return rows > 0;
}

std::function<StackedRow()> DeferredCalls::hold(const Module& m, std::vector<CallArg> args,
                                                int64_t step, const std::vector<bool>& unshared) {
  auto call = std::make_shared<State::Call>();
  for (size_t i = 0; i < args.size(); ++i) {
    at::Tensor& t = args[i].tensor;
    if (!t.defined()) continue;
    call->rows = t.size(0);
    if (i >= unshared.size() || !unshared[i]) t = t.clone(at::MemoryFormat::Contiguous);
  }
  const std::string sig = signature(args);
  call->args = std::move(args);
  State::Group* group = nullptr;
  for (State::Group& g : state_->groups) {
    if (g.module == &m && g.step == step && g.signature == sig) group = &g;
  }
  if (!group) group = &state_->groups.emplace_back(State::Group{&m, step, sig, {}});
  group->calls.push_back(call);
  return [state = state_, call]() -> StackedRow {
    if (!call->done) state->runGroupOf(call.get());
    if (!call->done) throw Error("internal error in ShardScope: a held module call was lost");
    if (!call->error.empty()) throw RuntimeFailure(call->error);
    return call->output;
  };
}

}  // namespace shardscope::trace
