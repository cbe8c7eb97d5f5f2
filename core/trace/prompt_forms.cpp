#include "prompt_forms.h"

#include <map>
#include <set>
#include <string>

#include "../model/tokenizer.h"
#include "interpreter.h"
#include "trace_caches.h"

namespace shardscope::trace {

const char* const kPromptForms =
    "a prompt is a string, a list of token ids (or a 1-D integer tensor), "
    "TokensPrompt(prompt_token_ids=[...]) (the dict {\"prompt_token_ids\": [...]}), "
    "{\"prompt\": \"text\"}, a tokenizer's output {\"input_ids\": ..., \"attention_mask\": ...}, "
    "or a list of these (a batch: one request per prompt)";

namespace {

using Ids = std::vector<int64_t>;

[[noreturn]] void refuse(const std::string& what) {
  throw RuntimeFailure(what + "; " + kPromptForms);
}

std::string describe(const Value& v) {
  if (v->type == Type::Dict) {
    std::string keys;
    for (const auto& kv : v->dict) keys += (keys.empty() ? "" : ", ") + repr(kv.first);
    return keys.empty() ? "an empty dict" : "a dict with keys " + keys;
  }
  if (v->type == Type::Tensor) {
    const at::ScalarType t = v->tensor.scalar_type();
    const char* kind = at::isFloatingType(t) ? "floating-point"
                       : t == at::kBool      ? "bool"
                                             : "integer";
    return std::string("a ") + kind + " tensor of shape " + repr(sizeOf(v->tensor));
  }
  return std::string("a value of type ") + typeName(v->type) + " (" + repr(v) + ")";
}

bool integral(const at::Tensor& t) {
  return !at::isFloatingType(t.scalar_type()) && !at::isComplexType(t.scalar_type()) &&
         t.scalar_type() != at::kBool;
}

bool isId(const Value& v) {
  return v->type == Type::Int ||
         (v->type == Type::Tensor && v->tensor.dim() == 0 && integral(v->tensor));
}

bool isIdList(const Value& v) {
  if (v->type != Type::List && v->type != Type::Tuple) return false;
  for (const auto& i : v->items) {
    if (!isId(i)) return false;
  }
  return true;
}

const Value* lookup(const Value& dict, const std::string& key) {
  for (const auto& [k, v] : dict->dict) {
    if (k->type == Type::Str && k->str == key) return &v;
  }
  return nullptr;
}

// Refuses keys of `dict` outside `allowed`, naming the form.
void onlyKeys(const Value& dict, const std::set<std::string>& allowed, const std::string& form) {
  for (const auto& kv : dict->dict) {
    if (kv.first->type != Type::Str || !allowed.count(kv.first->str)) {
      std::string names;
      for (const auto& a : allowed) names += (names.empty() ? "" : ", ") + a;
      refuse(form + " got the key " + repr(kv.first) + "; it takes " + names);
    }
  }
}

// The token ids of a list of ints or a 1-D integer tensor.
Ids idsOf(const Value& v, const std::string& what) {
  Ids ids;
  if (v->type == Type::Tensor) {
    if (!integral(v->tensor) || v->tensor.dim() != 1)
      refuse(what + " must be a 1-D integer tensor, got " + describe(v));
    const at::Tensor c = v->tensor.to(at::kCPU, at::kLong).contiguous();
    ids.assign(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  } else if (v->type == Type::List || v->type == Type::Tuple) {
    for (size_t i = 0; i < v->items.size(); ++i) {
      if (!isId(v->items[i])) {
        refuse(what + " holds " + describe(v->items[i]) + " at position " + std::to_string(i) +
               ", where a token id (an int) belongs");
      }
      ids.push_back(asInt(v->items[i], "token id"));
    }
  } else {
    refuse(what + " must be a list of token ids, got " + describe(v));
  }
  if (ids.empty()) refuse(what + " has no tokens");
  return ids;
}

// An attention mask row: 1 (or True) keeps a position, 0 drops it.
std::vector<bool> maskOf(const Value& v, const std::string& what) {
  std::vector<bool> keep;
  if (v->type == Type::Tensor && v->tensor.dim() == 1) {
    const at::Tensor c = v->tensor.ne(0).to(at::kCPU, at::kLong).contiguous();
    for (int64_t i = 0; i < c.numel(); ++i) keep.push_back(c.data_ptr<int64_t>()[i] != 0);
    return keep;
  }
  if (v->type != Type::List && v->type != Type::Tuple)
    refuse(what + " must be a list of 0 and 1, got " + describe(v));
  for (const auto& i : v->items) {
    if (i->type != Type::Int && i->type != Type::Bool && !isId(i))
      refuse(what + " holds " + describe(i) + ", where 0 or 1 belongs");
    keep.push_back(asInt(i, "attention mask") != 0);
  }
  return keep;
}

// The rows of input_ids or attention_mask: a 1-D value is one row, a 2-D value one row an item.
std::vector<Value> rowsOf(const Value& v, const std::string& key) {
  if (v->type == Type::Tensor) {
    if (v->tensor.dim() == 1) return {v};
    if (v->tensor.dim() != 2) refuse(key + " must be 1-D or 2-D, got " + describe(v));
    std::vector<Value> rows;
    for (int64_t i = 0; i < v->tensor.size(0); ++i) rows.push_back(tensor(v->tensor[i]));
    return rows;
  }
  if (v->type != Type::List && v->type != Type::Tuple)
    refuse(key + " must be a list of token ids, a list of such lists, or a tensor; got " +
           describe(v));
  if (v->items.empty()) refuse(key + " is empty");
  const Value& first = v->items[0];
  if (first->type == Type::List || first->type == Type::Tuple ||
      (first->type == Type::Tensor && first->tensor.dim() == 1)) {
    return v->items;
  }
  return {v};
}

// A tokenizer's output: one prompt a row of input_ids, without the positions whose mask is 0.
std::vector<Ids> fromTokenizerOutput(const Value& dict) {
  onlyKeys(dict, {"input_ids", "attention_mask"}, "a tokenizer output");
  const std::vector<Value> rows = rowsOf(*lookup(dict, "input_ids"), "input_ids");
  const Value* mask = lookup(dict, "attention_mask");
  const std::vector<Value> masks = mask ? rowsOf(*mask, "attention_mask") : std::vector<Value>{};
  if (mask && masks.size() != rows.size()) {
    refuse("input_ids has " + std::to_string(rows.size()) + " rows but attention_mask has " +
           std::to_string(masks.size()));
  }
  std::vector<Ids> out;
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::string row = rows.size() > 1 ? "row " + std::to_string(r) + " of " : "";
    Ids ids = idsOf(rows[r], row + "input_ids");
    if (mask) {
      const std::vector<bool> keep = maskOf(masks[r], row + "attention_mask");
      if (keep.size() != ids.size()) {
        refuse(row + "attention_mask has " + std::to_string(keep.size()) +
               " positions but input_ids has " + std::to_string(ids.size()));
      }
      Ids kept;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (keep[i]) kept.push_back(ids[i]);
      }
      if (kept.empty()) refuse(row + "attention_mask is all 0: the prompt keeps no token");
      ids = std::move(kept);
    }
    out.push_back(std::move(ids));
  }
  return out;
}

// One prompt in any form but a batch; `what` names it in errors.
Ids single(const Value& v, const std::shared_ptr<const Tokenizer>& tokenizer,
           const std::string& what) {
  switch (v->type) {
    case Type::Str: {
      if (!tokenizer)
        throw RuntimeFailure("this model has no tokenizer.json; give " + what +
                             " as a list of token ids");
      Ids ids = encodePromptCached(tokenizer, v->str);
      if (ids.empty()) refuse(what + " " + repr(v) + " has no tokens");
      return ids;
    }
    case Type::List:
    case Type::Tuple:
    case Type::Tensor:
      return idsOf(v, what);
    case Type::Dict: {
      if (lookup(v, "input_ids")) {
        std::vector<Ids> rows = fromTokenizerOutput(v);
        if (rows.size() != 1) {
          refuse(what + " is a tokenizer output of " + std::to_string(rows.size()) +
                 " rows; inside a batch give one prompt an item (or pass the output on its own, "
                 "one request a row)");
        }
        return rows[0];
      }
      if (const Value* ids = lookup(v, "prompt_token_ids")) {
        onlyKeys(v, {"prompt_token_ids"}, "TokensPrompt");
        return idsOf(*ids, what + "'s prompt_token_ids");
      }
      if (const Value* text = lookup(v, "prompt")) {
        onlyKeys(v, {"prompt"}, "a text prompt");
        if ((*text)->type != Type::Str)
          refuse(what + "'s \"prompt\" must be a string, got " + describe(*text));
        return single(*text, tokenizer, what);
      }
      refuse(what + " is " + describe(v) + ", which is none of the dict forms");
    }
    default:
      refuse(what + " is " + describe(v));
  }
}

Value tokensPrompt(CallArgs& a) {
  if (!a.positional.empty() || !a.keyword("prompt_token_ids"))
    throw RuntimeFailure("call it as TokensPrompt(prompt_token_ids=[785, 6722, 315])");
  Value d = dict();
  for (const auto& [k, v] : a.keywords) d->dict.emplace_back(string(k), v);
  return d;
}

}  // namespace

std::vector<Ids> normalizePrompts(const Value& prompt,
                                  const std::shared_ptr<const Tokenizer>& tokenizer) {
  if (prompt->type == Type::List || prompt->type == Type::Tuple) {
    if (prompt->items.empty()) refuse("the prompt is an empty list");
    if (isIdList(prompt)) return {single(prompt, tokenizer, "the prompt")};
    std::vector<Ids> batch;
    for (size_t i = 0; i < prompt->items.size(); ++i) {
      const Value& item = prompt->items[i];
      const std::string what = "prompt " + std::to_string(i) + " of the batch";
      if (isId(item)) {
        refuse("the prompt list mixes token ids and prompts (item " + std::to_string(i) +
               " is a token id, others are not): a list is either one prompt of token ids or a "
               "batch of prompts");
      }
      if ((item->type == Type::List || item->type == Type::Tuple) && !isIdList(item))
        refuse(what + " is a list that is not token ids: a batch holds prompts, not batches");
      batch.push_back(single(item, tokenizer, what));
    }
    return batch;
  }
  if (prompt->type == Type::Tensor && prompt->tensor.dim() == 2) {
    std::vector<Ids> batch;
    for (int64_t i = 0; i < prompt->tensor.size(0); ++i)
      batch.push_back(
          idsOf(tensor(prompt->tensor[i]), "row " + std::to_string(i) + " of the prompt"));
    if (batch.empty()) refuse("the prompt is a tensor with no rows");
    return batch;
  }
  if (prompt->type == Type::Dict && lookup(prompt, "input_ids")) return fromTokenizerOutput(prompt);
  return {single(prompt, tokenizer, "the prompt")};
}

Value vllmNamespace() {
  const Value tp = builtin("TokensPrompt", tokensPrompt);
  const auto ns = [](const std::string& name, std::map<std::string, Value> members) {
    auto v = std::make_shared<Object>();
    v->type = Type::Namespace;
    v->str = name;
    v->attributes = std::move(members);
    v->attributes["__name__"] = string(name);
    return v;
  };
  return ns("vllm", {{"TokensPrompt", tp}, {"inputs", ns("vllm.inputs", {{"TokensPrompt", tp}})}});
}

}  // namespace shardscope::trace
