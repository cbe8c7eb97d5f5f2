#include "script_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>
#include <set>
#include <unordered_set>
#include <vector>

#include "../engine/engine.h"
#include "../engine/generation.h"
#include "../host_tensor_conversion.h"
#include "../model/tokenizer.h"
#include "../parallel/rank_process.h"
#include "driver_values.h"
#include "interleaver.h"
#include "interpreter.h"
#include "names_mentioned.h"
#include "prompt_forms.h"
#include "scope_release.h"
#include "trace_caches.h"
#include "trace_device.h"
#include "vllm_arguments.h"

namespace shardscope::trace {

struct ScriptRunner::Impl : public Host {
  RunOptions options;
  std::map<std::string, std::unique_ptr<Engine>> engines;  // by identity
  std::vector<Engine*> engineById;
  std::shared_ptr<Environment> globals;
  // The runner's names (VLLM, nnsight, vllm, ...), made once: the parent of each run's
  // globals, between them and the builtins. Its builtins act on the running script's interpreter.
  std::shared_ptr<Environment> runnerScope;
  Interpreter* running = nullptr;
  std::set<std::string> noted;
  RunResult result;
  std::map<const Engine*, int> modelIndex;  // into result.models

  // Earlier runs' globals, the call scopes their functions were made in, and the lists and dicts
  // that may close a cycle no scope reaches (Interpreter::cycleCandidates), whose cycles wait to
  // be freed (releaseGlobals).
  std::vector<std::shared_ptr<Environment>> unreleased;
  std::vector<Value> unreleasedCandidates;
  std::vector<std::shared_ptr<Environment>> lastRunsFunctionScopes;
  std::vector<Value> lastRunsCycleCandidates;

  ~Impl() { releaseGlobals(); }
  // The last run's globals are read (tensorValue, reprOf) until the next run starts; then what
  // they held is freed, its reference cycles too (scope_release.h). Not while a rank lost past a
  // failed job's timeout may still read them (functions reach blocks as they are): then they
  // wait, whole, for a later run's start that finds every rank out of its job.
  void releaseGlobals() {
    if (globals) unreleased.push_back(std::move(globals));
    globals.reset();
    for (auto& scope : lastRunsFunctionScopes) unreleased.push_back(std::move(scope));
    lastRunsFunctionScopes.clear();
    for (Value& v : lastRunsCycleCandidates) unreleasedCandidates.push_back(std::move(v));
    lastRunsCycleCandidates.clear();
    const bool rankInJob = std::any_of(engineById.begin(), engineById.end(),
                                       [](const Engine* e) { return e->rankInJob(); });
    if (rankInJob) return;
    releaseScopes(unreleased, {runnerScope.get(), builtinScope().get()});
    unreleased.clear();
    // What no scope reached: each candidate still held from outside (the runner's own names)
    // stays whole.
    releaseCycles(std::move(unreleasedCandidates), {});
    unreleasedCandidates.clear();
  }

  void out(const std::string& line) {
    result.printed += line + "\n";
    if (options.out)
      options.out(line);
    else
      std::cout << line << "\n";
  }
  void note(const std::string& line) {
    if (!noted.insert(line).second) return;
    if (options.note)
      options.note(line);
    else
      std::cerr << "note: " << line << "\n";
  }

  // Adds the engine's identity to this run's models once; traces refer to it by index.
  void noteModel(const std::string& name, const Engine& engine) {
    if (modelIndex.count(&engine)) return;
    modelIndex[&engine] = int(result.models.size());
    result.models.push_back(identityOf(name, engine));
  }

  static ModelIdentity identityOf(const std::string& name, const Engine& engine) {
    const ModelInfo& info = engine.info();
    ModelIdentity m;
    m.name = name;
    m.spec = info.spec;
    m.path = info.path;
    m.configSha256 = info.configSha256;
    m.dtype = info.dtype;
    m.device = info.device;
    m.backend = info.backend;
    m.tp = info.tp;
    m.engineVersion = SHARDSCOPE_VERSION;
    m.expertParallel = info.expertParallel;
    return m;
  }

  Engine& engineOf(Interpreter& in, const Value& model) {
    if (model->intValue < 1 || model->intValue > (long long)engineById.size())
      in.fail("this module does not belong to a loaded model");
    return *engineById[model->intValue - 1];
  }

  Value loadModel(Interpreter& in, CallArgs& a) {
    if (a.positional.empty() || a.positional[0]->type != Type::Str)
      in.fail("VLLM(...) needs the model name first, e.g. VLLM(\"Qwen/Qwen3-8B\")");
    const std::string name = a.positional[0]->str;
    if (options.engine) {  // the host application's engine (GUI, benchmarks)
      if (engineById.empty()) engineById.push_back(options.engine);
      noteModel(name, *options.engine);
      Value model = moduleProxy("model");
      model->intValue = 1;
      return model;
    }
    const EngineOptions o =
        vllmEngineOptions(in, a, options, [this](const std::string& line) { note(line); });
    const std::string key = o.model + "|" + std::to_string(o.tp) + "x" + std::to_string(o.pp) +
                            "|" + toString(o.device) + "|" + modelDtypeName(o.dtype) +
                            (o.cudaGraphs ? "" : "|eager") + (o.expertParallel ? "|ep" : "") +
                            "|dcp" + std::to_string(o.dcp);
    auto& slot = engines[key];
    if (!slot) {
      slot = std::make_unique<Engine>(o);
      engineById.push_back(slot.get());
    }
    noteModel(name, *slot);
    Value model = moduleProxy("model");
    for (size_t i = 0; i < engineById.size(); ++i) {
      if (engineById[i] == slot.get()) model->intValue = (long long)i + 1;
    }
    return model;
  }

  // ---- Host (driver side) ----
  Value moduleAttribute(Interpreter& in, const Value& module, const std::string& name) override {
    Engine& engine = engineOf(in, module);
    if (module->str == "model" && (name == "trace" || name == "generate")) {
      return builtin(name, [module, name, &in](CallArgs& a) {
        auto ctx = std::make_shared<Object>();
        ctx->type = Type::ResultObject;
        ctx->str = "TraceContext";
        ctx->attributes["prompt"] = a.positional.empty()
                                        ? (a.keyword("prompt") ? *a.keyword("prompt") : none())
                                        : a.positional[0];
        ctx->intValue = module->intValue;
        for (const auto& [k, v] : a.keywords) {
          if (k == "prompt") continue;
          checkTraceKeyword(in, name, k);
          ctx->attributes[k] = v;
        }
        if (name == "generate" && !ctx->attributes.count("max_tokens"))
          ctx->attributes["max_tokens"] = integer(16);
        return Value(ctx);
      });
    }
    if (module->str == "model" && name == "tokenizer") {
      auto tok = engine.tokenizer();
      if (!tok) in.fail("this model has no tokenizer.json");
      return tokenizerValue(tok);
    }
    if (name == "output" || name == "input" || name == "inputs" ||
        (module->str == "model" && (name == "logits" || name == "samples"))) {
      in.fail(module->str + "." + name + " can only be read inside `with model.trace(...)`");
    }
    const std::string path = module->str + "." + name;
    for (const auto& m : engine.info().modules) {
      if (m.path == path) {
        Value v = moduleProxy(path);
        v->intValue = module->intValue;
        return v;
      }
      if (m.path == module->str) {
        for (const auto& p : m.parameters) {
          if (p.name == name)
            in.fail(path + " is a parameter; read it inside `with model.trace(...)`");
        }
      }
    }
    in.fail("unknown module " + path + "; run `shardscope-cli inspect` to list the module tree");
  }

  void setModuleAttribute(Interpreter& in, const Value& module, const std::string& name,
                          const Value&) override {
    in.fail(module->str + "." + name + " can only be written inside `with model.trace(...)`");
  }

  std::optional<long long> moduleLength(Interpreter& in, const Value& module) override {
    long long n = 0;  // the modules named module[i], not their children
    for (const auto& m : engineOf(in, module).info().modules)
      n += m.path.rfind(module->str + "[", 0) == 0 &&
           m.path.find('.', module->str.size()) == std::string::npos;
    if (n == 0) return std::nullopt;
    return n;
  }

  Value moduleIndex(Interpreter& in, const Value& module, long long index) override {
    if (index < 0) {  // layers[-1]
      const auto n = moduleLength(in, module);
      index += n.value_or(0);
    }
    const std::string path = module->str + "[" + std::to_string(index) + "]";
    for (const auto& m : engineOf(in, module).info().modules) {
      if (m.path == path) {
        Value v = moduleProxy(path);
        v->intValue = module->intValue;
        return v;
      }
    }
    in.fail("unknown module " + path + " (index out of range?)");
  }

  Value callModule(Interpreter& in, const Value& module, CallArgs&) override {
    in.fail("modules can only be called inside `with model.trace(...)`, not " + module->str);
  }

  Value tracerAttribute(Interpreter& in, const Value&, const std::string& name) override {
    in.fail("tracer." + name + " can only be used inside the trace");
  }

  void iterateSteps(Interpreter& in, const Value&, const std::function<bool(long long)>&) override {
    in.fail("tracer.iter can only be used inside the trace");
  }

  void print(const std::string& line) override { out(line); }

  void runWith(Interpreter& in, const Stmt& with, const Value& context) override {
    if (context->type == Type::None) {
      in.run(with.body);
      return;
    }
    if (context->type != Type::ResultObject || context->str != "TraceContext") {
      in.fail("`with` works on model.trace(...) (and tracer.invoke(...) inside it)");
    }
    runTrace(in, with, context);
  }

  // The ranks get the driver names the blocks mention, in the scope the invokes share (the
  // first's): copying every global, and cloning its tensors per rank, cost every trace. A driver
  // function a captured value reaches (made at the top level or in a call) runs on each rank with
  // the block's scope above it (rankCopies), so the names it may read there are captured too
  // (addFreeNames: not its parameters; those its call scopes hold are read there), and those of
  // the functions its defaults and those values reach. Work lists, not recursion: a chain of
  // closures may be long.
  void captureMentionedNames(std::vector<InvokeSpec>& invokes) const {
    std::set<std::string> mentioned;
    for (const auto& inv : invokes) addNamesMentioned(inv.body, mentioned);
    std::vector<std::string> left(mentioned.begin(), mentioned.end());  // names to look up
    std::vector<Value> values;                                          // values to read
    std::unordered_set<const FunctionDef*> read;
    const auto madeByDriver = [&](const Environment* e) {
      for (; e; e = e->parent().get()) {
        if (e == globals.get()) return true;
      }
      return false;
    };
    // The driver functions v reaches (through lists, dicts) add the names they may read.
    const auto readFunctions = [&](const Value& v) {
      anyInside(v, [&](const Value& x) {
        const FunctionDef* f = x->function.get();
        if (x->type != Type::Function || !f || !madeByDriver(f->closure.get()) ||
            !read.insert(f).second)
          return false;
        std::set<std::string> names;
        addFreeNames(*f, names);
        for (const Value& d : f->defaults) {
          if (d) values.push_back(d);
        }
        // A name its call scopes hold is read there (rankCopies copies it with the scope), not
        // from the globals, which it shadows.
        for (const Environment* e = f->closure.get(); e != globals.get(); e = e->parent().get()) {
          for (auto n = names.begin(); n != names.end();) {
            const auto v = e->vars().find(*n);
            if (v == e->vars().end()) {
              ++n;
              continue;
            }
            values.push_back(v->second);
            n = names.erase(n);
          }
        }
        for (const auto& n : names) {
          if (mentioned.insert(n).second) left.push_back(n);
        }
        return false;
      });
    };
    while (!left.empty() || !values.empty()) {
      if (!values.empty()) {
        const Value v = std::move(values.back());
        values.pop_back();
        readFunctions(v);
        continue;
      }
      const std::string name = std::move(left.back());
      left.pop_back();
      for (const Environment* e = globals.get(); e != builtinScope().get(); e = e->parent().get()) {
        const auto it = e->vars().find(name);
        if (it == e->vars().end()) continue;
        invokes[0].captured.insert(*it);
        values.push_back(it->second);
        break;
      }
    }
  }

  void runTrace(Interpreter& in, const Stmt& with, const Value& context) {
    const auto started = std::chrono::steady_clock::now();
    Engine& engine = *engineById.at(context->intValue - 1);
    std::string tracerName;
    if (!with.targets.empty()) {
      if (with.targets[0]->kind != ExprKind::Name)
        in.fail("use `with model.trace(...) as tracer:`");
      tracerName = with.targets[0]->text;
    }
    const auto isInvoke = [&](const StmtPtr& s) {
      return s->kind == StmtKind::With && s->value->kind == ExprKind::Call &&
             s->value->a->kind == ExprKind::Attribute && s->value->a->text == "invoke" &&
             s->value->a->a->kind == ExprKind::Name && s->value->a->a->text == tracerName;
    };
    GenerateRequest request;
    std::vector<InvokeSpec> invokes;
    std::vector<const Stmt*> invokeStmts;
    for (const auto& s : with.body) {
      if (!tracerName.empty() && isInvoke(s)) {
        invokeStmts.push_back(s.get());
      } else if (!invokeStmts.empty()) {
        in.fail("statements after the first tracer.invoke must be inside an invoke");
      }
    }
    if (invokeStmts.empty()) {
      const Value prompt = context->attributes["prompt"];
      if (prompt->type == Type::None)
        in.fail("model.trace() needs a prompt, or tracer.invoke(prompt) blocks inside it");
      const auto prompts = normalizePrompts(prompt, engine.tokenizer());
      request.prompts.insert(request.prompts.end(), prompts.begin(), prompts.end());
      invokes.push_back({with.body, {}, tracerName, int64_t(prompts.size())});
    } else {
      for (const auto& s : with.body) {
        if (isInvoke(s)) break;
        in.exec(*s);  // plain values computed once on the driver, visible to every invoke
      }
      for (const Stmt* s : invokeStmts) {
        const CallArgs arguments = in.evalArguments(*s->value, "tracer.invoke()");
        if (arguments.positional.empty()) in.fail("tracer.invoke() needs a prompt");
        const Value prompt = arguments.positional[0];
        std::vector<std::vector<int64_t>> prompts;
        try {
          prompts = normalizePrompts(prompt, engine.tokenizer());
        } catch (const RuntimeFailure& e) {  // named at the invoke, not at the trace
          throw ScriptError(in.program().file, s->at, s->source(), e.what());
        }
        request.prompts.insert(request.prompts.end(), prompts.begin(), prompts.end());
        invokes.push_back({s->body, {}, tracerName, int64_t(prompts.size())});
      }
    }
    captureMentionedNames(invokes);
    invokes[0].driverScope = globals.get();  // its functions are copied per rank (rankCopies)
    request.sampling = vllmSampling(in, context->attributes);
    request.tokenizer = engine.tokenizer();

    auto output = std::make_shared<TraceOutput>();
    auto generated = std::make_shared<GenerateResult>();
    auto program = in.programPtr();
    auto tokenizer = engine.tokenizer();
    const long long budget = options.budget;
    const int64_t memoryOption = options.memoryBudget;
    JobHandle job = engine.submit(
        [=, invokes = std::move(invokes)](RankContext& ctx) {
          setCurrentDevice(ctx.device);
          // Rank threads on the CPU share one memory: each gets its part of the default.
          const MemoryBudget memory =
              memoryOption != 0 ? MemoryBudget(memoryOption)
              : ctx.device.is_cuda()
                  ? MemoryBudget::deviceDefault(DeviceKind::Cuda)
                  : MemoryBudget::deviceDefault(DeviceKind::Cpu, ctx.worldSize());
          Interleaver interleaver(ctx, program, rankCopies(invokes), tokenizer, budget, memory);
          interleaver.setStopStrings(request.sampling.stop);
          interleaver.start();
          runGeneration(ctx, request, ctx.fillsResult() ? generated.get() : nullptr, &interleaver);
          if (ctx.reports) *output = interleaver.output();
        },
        request.sampling.maxTokens);
    if (options.onJob) options.onJob(job);
    job.wait();
    const double wallSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    record(modelIndex.at(&engine), request.sampling, *generated, *output, tokenizer.get(),
           wallSeconds);
    for (const auto& line : output->printed) out(line);
    for (const auto& name : output->unsaved) {
      auto u = std::make_shared<Object>();
      u->type = Type::Unsaved;
      u->str = name;
      globals->set(name, u);
    }
    for (const auto& [name, v] : output->saved) globals->set(name, v);
  }

  void record(int modelIndex, const SamplingParams& sampling, const GenerateResult& generated,
              const TraceOutput& output, const Tokenizer* tokenizer, double wallSeconds) {
    TraceRecord t;
    t.modelIndex = modelIndex;
    t.sampling = sampling;
    t.timing = TraceTiming{wallSeconds, generated.steps};
    for (const RequestOutput& o : generated.outputs) {
      InvokeRecord r;
      r.promptIds = o.promptIds;
      r.tokenIds = o.tokenIds;
      r.finishReason = o.finishReason;
      // The stored text is read by people: ids without a token show as <|id N|>.
      r.text = completionText(tokenizer, o.tokenIds, sampling.stop, TextForm::Display);
      t.invokes.push_back(std::move(r));
    }
    for (const auto& [name, v] : output.saved) appendSaved(name, v, t.values);
    result.traces.push_back(std::move(t));
  }
};

ScriptRunner::ScriptRunner(RunOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  s.runnerScope = std::make_shared<Environment>(builtinScope());
  const auto load = [&s](CallArgs& a) {
    SS_ASSERT(s.running, "VLLM(...) called outside a running script");
    // A block reaches it through a captured name or a driver function: its rank threads would
    // load models into the driver's engines at once.
    if (a.interpreter != s.running)
      throw RuntimeFailure(a.callee +
                           "(...) loads a model for the driver: call it before the "
                           "trace block, not in it");
    return s.loadModel(*s.running, a);
  };
  s.runnerScope->set("VLLM", builtin("VLLM", load));
  s.runnerScope->set("LanguageModel", builtin("LanguageModel", load));
  auto nnsight = std::make_shared<Object>();
  nnsight->type = Type::Namespace;
  nnsight->str = "nnsight";
  nnsight->attributes["__name__"] = string("nnsight");
  s.runnerScope->set("nnsight", nnsight);
  const Value vllm = vllmNamespace();
  s.runnerScope->set("vllm", vllm);  // `from vllm import TokensPrompt`
  s.runnerScope->set("TokensPrompt", vllm->attributes.at("TokensPrompt"));
}

ScriptRunner::~ScriptRunner() = default;

void ScriptRunner::run(const std::string& source, const std::string& file) {
  Impl& s = *impl_;
  s.result = {};
  s.modelIndex.clear();
  setCurrentDevice(c10::Device(c10::kCPU));
  s.releaseGlobals();
  s.globals = std::make_shared<Environment>(s.runnerScope);
  auto program = parseProgramCached(source, file);
  Interpreter in(program, s, s.globals, s.options.budget,
                 s.options.memoryBudget != 0 ? MemoryBudget(s.options.memoryBudget)
                                             : MemoryBudget::deviceDefault(DeviceKind::Cpu));
  struct Running {  // VLLM(...) fails at this script's statement, and at no other's afterwards
    Impl& s;
    ~Running() { s.running = nullptr; }
  } running{s};
  s.running = &in;
  const auto keepForRelease = [&] {  // what releaseGlobals frees, whether the run ends or fails
    s.lastRunsFunctionScopes = in.functionScopes();
    s.lastRunsCycleCandidates = in.cycleCandidates();
  };
  try {
    in.run(program->body);
  } catch (...) {
    keepForRelease();
    throw;
  }
  keepForRelease();
}

size_t ScriptRunner::unreleasedScopes() const {
  return impl_->unreleased.size();
}

size_t ScriptRunner::unreleasedCycleCandidates() const {
  return impl_->unreleasedCandidates.size();
}

const RunResult& ScriptRunner::result() const {
  return impl_->result;
}

std::optional<HostTensor> ScriptRunner::tensorValue(const std::string& name) const {
  Value* v = impl_->globals ? impl_->globals->find(name) : nullptr;
  if (!v || (*v)->type != Type::Tensor) return std::nullopt;
  return toHostFloat((*v)->tensor);
}

std::string ScriptRunner::reprOf(const std::string& name) const {
  Value* v = impl_->globals ? impl_->globals->find(name) : nullptr;
  return v ? repr(*v) : "<undefined>";
}

}  // namespace shardscope::trace
