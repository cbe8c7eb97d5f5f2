#include "arguments.h"

#include <sstream>

namespace shardscope::cli {

Arguments::Arguments(const std::vector<std::string>& args, const std::set<std::string>& options,
                     const std::set<std::string>& flags) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    const bool inlineValue = eq != std::string::npos;
    if (inlineValue) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (flags.count(name)) {
      if (inlineValue) throw UsageError("--" + name + " takes no value");
      flags_.insert(name);
    } else if (options.count(name)) {
      if (!inlineValue) {
        if (i + 1 >= args.size()) throw UsageError("--" + name + " needs a value");
        value = args[++i];
      }
      values_[name].push_back(value);
    } else {
      throw UsageError("unknown option --" + name);
    }
  }
}

std::string Arguments::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> Arguments::getAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

long long Arguments::getInt(const std::string& name, long long fallback) const {
  if (!values_.count(name)) return fallback;
  const std::string text = get(name);
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("--" + name + " expects an integer, got '" + text + "'");
}

double Arguments::getDouble(const std::string& name, double fallback) const {
  if (!values_.count(name)) return fallback;
  const std::string text = get(name);
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("--" + name + " expects a number, got '" + text + "'");
}

int64_t Arguments::memoryBudgetBytes() const {
  if (!has("memory-budget-mb")) return 0;
  const double mb = getDouble("memory-budget-mb", 0);
  if (!(mb > 0) || mb > 1e9)
    throw UsageError("--memory-budget-mb expects a positive number of megabytes, got '" +
                     get("memory-budget-mb") + "'");
  return int64_t(mb * (1 << 20));
}

std::vector<int64_t> parseIds(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      ids.push_back(std::stoll(item));
    } catch (const std::exception&) {
      throw UsageError("--ids expects comma-separated integers, got '" + item + "'");
    }
  }
  return ids;
}

std::vector<std::vector<int64_t>> idPrompts(const Arguments& a) {
  std::vector<std::vector<int64_t>> prompts;
  for (const std::string& text : a.getAll("ids")) prompts.push_back(parseIds(text));
  return prompts;
}

std::vector<int64_t> stopIds(const Arguments& a) {
  std::vector<int64_t> ids;
  for (const std::string& text : a.getAll("stop-ids")) {
    const std::vector<int64_t> more = parseIds(text);
    ids.insert(ids.end(), more.begin(), more.end());
  }
  return ids;
}

}  // namespace shardscope::cli
