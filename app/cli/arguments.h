// Arguments: a small command-line parser for shardscope-cli's subcommands. Options are
// "--name value" or "--name=value"; flags take no value; anything else is positional. Unknown
// options and missing values are usage errors that name the option and the subcommand's usage.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardscope::cli {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Arguments {
 public:
  // `options` take a value, `flags` do not.
  Arguments(const std::vector<std::string>& args, const std::set<std::string>& options,
            const std::set<std::string>& flags);

  bool has(const std::string& name) const { return values_.count(name) || flags_.count(name); }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // Every value of an option given several times, in order.
  std::vector<std::string> getAll(const std::string& name) const;
  long long getInt(const std::string& name, long long fallback) const;
  double getDouble(const std::string& name, double fallback) const;
  // --memory-budget-mb MB as bytes; 0 when not given (the default budget).
  int64_t memoryBudgetBytes() const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positional_;
};

// "1,2,3" -> {1, 2, 3} (--ids, --stop-ids); UsageError names the item that is not an integer.
std::vector<int64_t> parseIds(const std::string& text);

// Every --ids of a command line, one prompt each, in order.
std::vector<std::vector<int64_t>> idPrompts(const Arguments& a);

// Every --stop-ids of a command line, joined.
std::vector<int64_t> stopIds(const Arguments& a);

}  // namespace shardscope::cli
