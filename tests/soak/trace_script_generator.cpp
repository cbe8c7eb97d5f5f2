#include "trace_script_generator.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <sstream>
#include <vector>

#include "soak/port_statements.h"
#include "soak/soak_rng.h"

namespace shardscope::soak {
namespace {

// How an invoke's block covers the request's steps. Every step gets a logits row.
enum class Mode { Flat, Unbounded, Range, Single };

struct InvokePlan {
  Mode mode = Mode::Unbounded;
  int first = 0, last = 0;  // steps the main body runs at, inclusive
  int stopAt = -1;          // tracer.stop() at this step
  bool saveAtStart = false;
  bool result = false;
  std::vector<Item> items;
};

const std::vector<std::string> kPrompts = {
    "\"The capital of France is\"",
    "\"Hello\"",
    "\"Once upon a time\"",
    "\"1 2 3 4 5 6\"",
    "\"The quick brown fox jumps over the lazy dog\"",
    "\"def f(x):\"",
    "\"Paris\"",
    "[785, 6722, 315]",
    "[9707]",
};

class Generator {
 public:
  Generator(uint64_t seed, const GeneratorOptions& o)
      : rng_(seed), o_(o), m_(o.model), ports_(rng_, m_, seed) {}

  GeneratedScript run(uint64_t seed) {
    out_ << "model = VLLM(\"" << o_.modelName << "\""
         << (o_.enforceEager ? ", enforce_eager=True" : "")
         << (o_.expertParallel ? ", enable_expert_parallel=True" : "") << ")\n"
         << kDriverFunctions;
    const int traces = rng_.between(1, std::max(1, o_.maxTraces));
    const bool wantError = rng_.chance(o_.errorProbability);
    errorTrace_ = wantError ? rng_.below(traces) : -1;
    for (int t = 0; t < traces; ++t) trace(t);
    GeneratedScript g;
    g.seed = seed;
    g.text = out_.str();
    g.error = ports_.error();
    for (const auto& f : summary_) g.summary += (g.summary.empty() ? "" : " ") + f;
    if (!ports_.error().empty()) g.summary += " error=" + ports_.error();
    return g;
  }

 private:
  Rng rng_;
  const GeneratorOptions& o_;
  const ModelShape& m_;
  PortStatements ports_;  // draws from rng_
  std::ostringstream out_;
  std::vector<std::string> summary_;
  int errorTrace_ = -1;

  // ---- one invoke's block ----

  InvokePlan plan(int steps) {
    InvokePlan p;
    const int m = rng_.below(10);
    if (m < 2) {
      p.mode = Mode::Flat;
    } else if (m < 6) {
      p.mode = Mode::Unbounded;
    } else if (m < 9) {
      p.mode = Mode::Range;
    } else {
      p.mode = Mode::Single;
    }
    if (p.mode == Mode::Flat) {
      p.first = p.last = 0;
    } else if (p.mode == Mode::Unbounded) {
      p.first = 0;
      p.last = steps - 1;
    } else if (p.mode == Mode::Range) {
      p.first = rng_.below(steps);
      p.last = rng_.between(p.first, steps - 1);
    } else {
      p.first = p.last = rng_.below(steps);
    }
    if ((p.mode == Mode::Unbounded || p.mode == Mode::Flat) && rng_.chance(0.3)) {
      p.stopAt = p.mode == Mode::Flat ? 0 : rng_.below(steps);
      ports_.feature("stop");
    }
    p.saveAtStart = rng_.chance(0.3);
    p.result = rng_.chance(0.5);
    return p;
  }

  void fillItems(InvokePlan& p, int invoke) {
    const int n = rng_.below(5);
    for (int k = 0; k < n; ++k) {
      Item it = ports_.portItem(ports_.randomPort(), invoke);
      if (p.mode != Mode::Flat && p.last > p.first && rng_.chance(0.25)) {
        it.step = rng_.between(p.first, p.last);
        ports_.feature("step-condition");
      }
      p.items.push_back(std::move(it));
    }
  }

  void emitItems(std::vector<Item> items, int invoke, const std::string& indent,
                 const std::string& stepVar) {
    Item logits;
    logits.position = ports_.logitsPosition();
    logits.lines = {"lg" + std::to_string(invoke) + ".append(model.logits.clone())"};
    items.insert(items.begin(), logits);
    std::stable_sort(items.begin(), items.end(),
                     [](const Item& a, const Item& b) { return a.position < b.position; });
    for (const Item& it : items) {
      std::string in = indent;
      if (it.step >= 0) {
        out_ << indent << "if " << stepVar << " == " << it.step << ":\n";
        in += "    ";
      }
      for (const auto& l : it.lines) out_ << in << l << "\n";
    }
  }

  void emitBlock(const InvokePlan& p, int invoke, int steps, const std::string& ind) {
    const std::string j = std::to_string(invoke), r = "r" + j, lg = "lg" + j, i = "i" + j;
    const std::string in2 = ind + "    ";
    if (p.saveAtStart) {
      out_ << ind << r << " = list().save()\n" << ind << lg << " = list().save()\n";
    } else {
      out_ << ind << r << " = []\n" << ind << lg << " = []\n";
    }
    const auto cover = [&](int a, int b) {  // logits only, steps a .. b - 1 (b < 0: to the end)
      if (b >= 0 && a >= b) return;
      std::string range;
      if (b < 0) {
        range = std::to_string(a) + ":";
      } else if (a == 0 && rng_.chance(0.5)) {
        range = ":" + std::to_string(b);
      } else {
        range = std::to_string(a) + ":" + std::to_string(b);
      }
      out_ << ind << "for _ in tracer.iter[" << range << "]:\n"
           << in2 << lg << ".append(model.logits.clone())\n";
    };
    std::vector<Item> items = p.items;
    if (p.stopAt >= 0) {
      Item stop;
      stop.position = ports_.logitsPosition() + 2;
      stop.step = p.mode == Mode::Flat ? -1 : p.stopAt;
      stop.lines = {"tracer.stop()"};
      items.push_back(stop);
    }
    switch (p.mode) {
      case Mode::Flat:
        emitItems(items, invoke, ind, "");
        if (steps > 1) cover(1, p.stopAt >= 0 || rng_.chance(0.5) ? -1 : steps);
        break;
      case Mode::Unbounded:
        out_ << ind << "for " << i << " in tracer.iter[" << (rng_.chance(0.3) ? "0:" : ":")
             << "]:\n";
        emitItems(items, invoke, in2, i);
        break;
      case Mode::Range:
      case Mode::Single:
        ports_.feature("iter-range");
        cover(0, p.first);
        if (p.mode == Mode::Single) {
          out_ << ind << "for " << i << " in tracer.iter[" << p.first << "]:\n";
        } else {
          out_ << ind << "for " << i << " in tracer.iter[" << p.first << ":" << p.last + 1
               << "]:\n";
        }
        emitItems(items, invoke, in2, i);
        if (p.last + 1 < steps) cover(p.last + 1, rng_.chance(0.5) ? -1 : steps);
        break;
    }
    if (!p.saveAtStart)
      out_ << ind << r << " = " << r << ".save()\n" << ind << lg << " = " << lg << ".save()\n";
    if (p.result) out_ << ind << "out" << j << " = tracer.result.save()\n";
  }

  // Invoke `src` saves the last row of a port at step 0 and invoke `dst` writes it into its own
  // last row at the same port (TRACE.md section 5: invokes are served in order).
  void addPatch(std::vector<InvokePlan>& plans, int t) {
    std::vector<int> atZero;
    for (int k = 0; k < int(plans.size()); ++k)
      if (plans[k].first == 0) atZero.push_back(k);
    if (atZero.size() < 2) return;
    const int a = rng_.below(int(atZero.size()) - 1);
    const int src = atZero[a], dst = atZero[rng_.between(a + 1, int(atZero.size()) - 1)];
    Port p;
    do {
      p = ports_.randomPort();
    } while (p.readOnly || (p.layout != Layout::Hidden && p.layout != Layout::Columns));
    const std::string name = "patch" + std::to_string(t);
    Item s, d;
    s.position = d.position = p.position;
    s.step = plans[src].mode == Mode::Flat || plans[src].last == 0 ? -1 : 0;
    d.step = plans[dst].mode == Mode::Flat || plans[dst].last == 0 ? -1 : 0;
    const std::string xs = "x" + std::to_string(src), xd = "x" + std::to_string(dst);
    s.lines = {xs + " = " + p.expr, name + " = " + xs + "[-1:].clone()"};
    d.lines = {xd + " = " + p.expr, xd + "[-1:] = " + name};
    plans[src].items.push_back(s);
    plans[dst].items.push_back(d);
    ports_.feature("patch");
  }

  void trace(int t) {
    const int steps = rng_.between(1, std::max(1, o_.maxTokens));
    const int invokes = rng_.between(1, std::max(1, o_.maxInvokes));
    const bool implicit = invokes == 1 && rng_.chance(0.5);
    std::string params = "max_tokens=" + std::to_string(steps) + ", ignore_eos=True";
    std::string sampling = "greedy";
    if (rng_.chance(0.4)) {
      sampling = "seeded";
      params += ", temperature=" + std::string(rng_.chance(0.5) ? "0.8" : "1.0") +
                ", seed=" + std::to_string(rng_.below(1000));
      if (rng_.chance(0.3)) params += ", top_k=" + std::to_string(rng_.between(2, 50));
      if (rng_.chance(0.3)) params += ", top_p=0.9";
    } else if (rng_.chance(0.3)) {
      params += ", temperature=0.0";
    }
    ports_.setScaleName("");
    if (!implicit && rng_.chance(0.3)) ports_.setScaleName("c" + std::to_string(t));
    std::vector<InvokePlan> plans;
    for (int k = 0; k < invokes; ++k) {
      plans.push_back(plan(steps));
      fillItems(plans.back(), k);
    }
    if (invokes > 1 && rng_.chance(0.3)) addPatch(plans, t);
    if (t == errorTrace_) {
      InvokePlan& p = plans[size_t(rng_.below(invokes))];
      Item e = ports_.errorItem(int(&p - plans.data()));
      if (p.mode != Mode::Flat && p.last > p.first && rng_.chance(0.3))
        e.step = rng_.between(p.first, p.last);
      p.items.push_back(e);
    }
    if (implicit) {
      out_ << "with model.trace(" << rng_.pick(kPrompts) << ", " << params << ") as tracer:\n";
      emitBlock(plans[0], 0, steps, "    ");
    } else {
      out_ << "with model.trace(" << params << ") as tracer:\n";
      if (!ports_.scaleName()
               .empty())  // a plain value computed on the driver, captured by the blocks
        out_ << "    " << ports_.scaleName() << " = " << ports_.scaleConstant() << "\n";
      for (int k = 0; k < invokes; ++k) {
        out_ << "    with tracer.invoke(" << rng_.pick(kPrompts) << "):\n";
        emitBlock(plans[size_t(k)], k, steps, "        ");
      }
    }
    for (int k = 0; k < invokes; ++k) {
      const std::string j = std::to_string(k);
      out_ << "print(len(r" << j << "), len(lg" << j << "), lg" << j << "[-1].shape)\n";
      if (plans[size_t(k)].result) out_ << "print(out" << j << ".outputs[0].token_ids)\n";
    }
    const std::string f = ports_.takeFeatures();
    summary_.push_back("[" + std::to_string(invokes) + "x" + std::to_string(steps) + " " +
                       sampling + (f.empty() ? "" : " " + f) + "]");
  }
};

}  // namespace

std::string logitsListName(int invoke) {
  return "lg" + std::to_string(invoke);
}

int invokeOfValue(const std::string& name) {
  for (const char* prefix : {"lg", "out", "r", "v"}) {
    const size_t n = std::strlen(prefix);
    if (name.compare(0, n, prefix) != 0) continue;
    size_t i = n;
    while (i < name.size() && std::isdigit((unsigned char)name[i])) ++i;
    if (i == n || i - n > 3) return -1;
    if (i < name.size() && name[i] != '[' && name[i] != '_') return -1;
    return std::stoi(name.substr(n, i - n));
  }
  return -1;
}

uint64_t scriptSeed(uint64_t runSeed, uint64_t index) {
  uint64_t z = runSeed * 0x9e3779b97f4a7c15ull + index + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) % 1'000'000'000'000ull;  // short enough to type back
}

GeneratedScript generateTraceScript(uint64_t seed, const GeneratorOptions& options) {
  return Generator(seed, options).run(seed);
}

}  // namespace shardscope::soak
