// Tensor properties and methods in trace scripts (`x.shape`, `x.sum(-1)`, `x.zero_()`): the
// documented list (docs/trace-language.md); any other name is an error that lists them.
#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>

#include "../error.h"
#include "builtin_args.h"
#include "interpreter.h"
#include "trace_device.h"

namespace shardscope::trace {

using namespace builtin_args;

namespace {

// An in-place method's write, noted on the interpreter that called it (Interpreter::call sets it).
void wrote(Args& a) {
  SS_ASSERT(a.interpreter, "an in-place tensor method was called without its interpreter");
  a.interpreter->noteTensorWrite();
}

}  // namespace

Value tensorAttribute(Interpreter& in, const Value& self, const std::string& name) {
  const at::Tensor& t = self->tensor;
  if (name == "shape") return sizeOf(t);
  if (name == "dtype") return dtypeValue(t.scalar_type());
  if (name == "device") return string(t.device().str());
  if (name == "ndim") return integer(t.dim());
  if (name == "T") return tensor(t.t());
  using Method = std::function<Value(const at::Tensor&, Args&)>;
  static const std::map<std::string, Method> methods = {
      {"size", [](const at::Tensor& x, Args& a) { return a.positional.empty() ? sizeOf(x) : integer(x.size(asInt(a.positional[0], "dim"))); }},
      {"dim", [](const at::Tensor& x, Args&) { return integer(x.dim()); }},
      {"numel", [](const at::Tensor& x, Args&) { return integer(x.numel()); }},
      {"clone", [](const at::Tensor& x, Args&) { return tensor(x.clone()); }},
      {"detach", [](const at::Tensor& x, Args&) { return tensor(x.detach()); }},
      {"cpu", [](const at::Tensor& x, Args&) { return tensor(x.to(at::kCPU)); }},
      {"contiguous", [](const at::Tensor& x, Args&) { return tensor(x.contiguous()); }},
      {"float", [](const at::Tensor& x, Args&) { return tensor(x.to(at::kFloat)); }},
      {"half", [](const at::Tensor& x, Args&) { return tensor(x.to(at::kHalf)); }},
      {"bfloat16", [](const at::Tensor& x, Args&) { return tensor(x.to(at::kBFloat16)); }},
      {"double", [](const at::Tensor& x, Args&) { return tensor(x.to(at::kDouble)); }},
      {"long", [](const at::Tensor& x, Args&) { return tensor(x.to(at::kLong)); }},
      {"int", [](const at::Tensor& x, Args&) { return tensor(x.to(at::kInt)); }},
      {"bool", [](const at::Tensor& x, Args&) { return tensor(x.to(at::kBool)); }},
      {"to", [](const at::Tensor& x, Args& a) {
         const Value* d = a.get(0, "dtype");
         if (!d) return tensor(x);
         if (auto dt = asDtype(*d)) return tensor(x.to(*dt));
         if ((*d)->type == Type::Str) {
           if ((*d)->str == "cpu") return tensor(x.to(at::kCPU));
           throw RuntimeFailure("tensors stay on the rank's device inside a trace; .to() accepts a dtype or 'cpu'");
         }
         throw RuntimeFailure(".to() expects a dtype such as torch.float32");
       }},
      {"view", [](const at::Tensor& x, Args& a) { return tensor(x.view(shapeArgs(a, 0))); }},
      {"reshape", [](const at::Tensor& x, Args& a) { return tensor(x.reshape(shapeArgs(a, 0))); }},
      {"permute", [](const at::Tensor& x, Args& a) { return tensor(x.permute(shapeArgs(a, 0))); }},
      {"transpose", [](const at::Tensor& x, Args& a) { return tensor(x.transpose(asInt(a.required(0, "dim0"), "dim0"), asInt(a.required(1, "dim1"), "dim1"))); }},
      {"unsqueeze", [](const at::Tensor& x, Args& a) { return tensor(x.unsqueeze(dimArg(a, 0, 0))); }},
      {"squeeze", [](const at::Tensor& x, Args& a) { return tensor(a.get(0, "dim") ? x.squeeze(dimArg(a, 0, 0)) : x.squeeze()); }},
      {"flatten", [](const at::Tensor& x, Args& a) { return tensor(x.flatten(dimArg(a, 0, 0), a.get(1, "end_dim") ? asInt(*a.get(1, "end_dim"), "end_dim") : -1)); }},
      {"narrow", [](const at::Tensor& x, Args& a) { return tensor(x.narrow(asInt(a.required(0, "dim"), "dim"), asInt(a.required(1, "start"), "start"), asInt(a.required(2, "length"), "length"))); }},
      {"sum", [](const at::Tensor& x, Args& a) { return tensor(a.get(0, "dim") ? x.sum(dimArg(a, 0, 0), keepdim(a, 1)) : x.sum()); }},
      {"mean", [](const at::Tensor& x, Args& a) { return tensor(a.get(0, "dim") ? x.mean(dimArg(a, 0, 0), keepdim(a, 1)) : x.mean()); }},
      {"std", [](const at::Tensor& x, Args& a) { return tensor(a.get(0, "dim") ? x.std(dimArg(a, 0, 0), true, keepdim(a, 1)) : x.std()); }},
      {"var", [](const at::Tensor& x, Args& a) { return tensor(a.get(0, "dim") ? x.var(dimArg(a, 0, 0), true, keepdim(a, 1)) : x.var()); }},
      {"max", [](const at::Tensor& x, Args& a) { return a.get(0, "dim") ? valuesIndices(x.max(dimArg(a, 0, 0), keepdim(a, 1))) : tensor(x.max()); }},
      {"min", [](const at::Tensor& x, Args& a) { return a.get(0, "dim") ? valuesIndices(x.min(dimArg(a, 0, 0), keepdim(a, 1))) : tensor(x.min()); }},
      {"argmax", [](const at::Tensor& x, Args& a) { return tensor(a.get(0, "dim") ? x.argmax(dimArg(a, 0, 0), keepdim(a, 1)) : x.argmax()); }},
      {"argmin", [](const at::Tensor& x, Args& a) { return tensor(a.get(0, "dim") ? x.argmin(dimArg(a, 0, 0), keepdim(a, 1)) : x.argmin()); }},
      {"norm", [](const at::Tensor& x, Args& a) {
         const double p = asNumber(optional(a, 0, "p", floating(2.0)), "p");
         if (const Value* d = a.get(1, "dim")) return tensor(at::norm(x, p, {asInt(*d, "dim")}, keepdim(a, 2)));
         return tensor(at::norm(x, p));
       }},
      {"softmax", [](const at::Tensor& x, Args& a) { return tensor(at::softmax(x, dimArg(a, 0, -1))); }},
      {"log_softmax", [](const at::Tensor& x, Args& a) { return tensor(at::log_softmax(x, dimArg(a, 0, -1))); }},
      {"topk", [](const at::Tensor& x, Args& a) { return valuesIndices(x.topk(asInt(arg(a, 0, "k", "topk"), "k"), dimArg(a, 1, -1))); }},
      {"sort", [](const at::Tensor& x, Args& a) { const Value* d = a.keyword("descending"); return valuesIndices(x.sort(dimArg(a, 0, -1), d && truthy(*d))); }},
      {"cumsum", [](const at::Tensor& x, Args& a) { return tensor(x.cumsum(dimArg(a, 0, 0))); }},
      {"abs", [](const at::Tensor& x, Args&) { return tensor(x.abs()); }},
      {"exp", [](const at::Tensor& x, Args&) { return tensor(x.exp()); }},
      {"log", [](const at::Tensor& x, Args&) { return tensor(x.log()); }},
      {"sqrt", [](const at::Tensor& x, Args&) { return tensor(x.sqrt()); }},
      {"sigmoid", [](const at::Tensor& x, Args&) { return tensor(x.sigmoid()); }},
      {"tanh", [](const at::Tensor& x, Args&) { return tensor(x.tanh()); }},
      {"relu", [](const at::Tensor& x, Args&) { return tensor(x.relu()); }},
      {"pow", [](const at::Tensor& x, Args& a) { return tensor(x.pow(asNumber(a.required(0, "exponent"), "exponent"))); }},
      {"matmul", [](const at::Tensor& x, Args& a) { return tensor(at::matmul(x, toTensor(a.required(0)))); }},
      {"any", [](const at::Tensor& x, Args&) { return tensor(x.any()); }},
      {"all", [](const at::Tensor& x, Args&) { return tensor(x.all()); }},
      {"item", [](const at::Tensor& x, Args&) {
         if (x.numel() != 1) throw RuntimeFailure("item() needs a tensor with one element, this one has " + std::to_string(x.numel()));
         return fromTensorList(x.reshape({}));
       }},
      {"tolist", [](const at::Tensor& x, Args&) { return fromTensorList(x.to(at::kCPU)); }},
      {"gather", [](const at::Tensor& x, Args& a) { return tensor(x.gather(asInt(a.required(0, "dim"), "dim"), toTensor(arg(a, 1, "index", "gather")).to(at::kLong))); }},
      {"index_select", [](const at::Tensor& x, Args& a) { return tensor(x.index_select(asInt(a.required(0, "dim"), "dim"), toTensor(a.required(1)))); }},
      {"chunk", [](const at::Tensor& x, Args& a) {
         std::vector<Value> parts;
         for (const auto& c : x.chunk(asInt(a.required(0, "chunks"), "chunks"), dimArg(a, 1, 0))) parts.push_back(tensor(c));
         return tuple(parts);
       }},
      {"zero_", [](const at::Tensor& x, Args& a) { wrote(a); at::Tensor y = x; y.zero_(); return tensor(y); }},
      {"fill_", [](const at::Tensor& x, Args& a) { wrote(a); at::Tensor y = x; y.fill_(asNumber(a.required(0, "value"), "value")); return tensor(y); }},
      {"copy_", [](const at::Tensor& x, Args& a) { wrote(a); at::Tensor y = x; y.copy_(toTensor(a.required(0))); return tensor(y); }},
      {"mul_", [](const at::Tensor& x, Args& a) { wrote(a); at::Tensor y = x; y.mul_(toTensor(a.required(0), &x)); return tensor(y); }},
      {"add_", [](const at::Tensor& x, Args& a) { wrote(a); at::Tensor y = x; y.add_(toTensor(a.required(0), &x)); return tensor(y); }},
      {"masked_fill", [](const at::Tensor& x, Args& a) { return tensor(x.masked_fill(toTensor(a.required(0)), asNumber(a.required(1, "value"), "value"))); }},
  };
  auto it = methods.find(name);
  if (it == methods.end()) {
    std::string known = "shape, dtype, device, ndim, T";
    for (const auto& [k, m] : methods) known += ", " + k;
    in.fail("tensors have no attribute '" + name + "' in trace scripts; supported: " + known);
  }
  const Method& m = it->second;
  at::Tensor t2 = t;
  return builtin(name, [m, t2](Args& a) { return m(t2, a); });
}

}  // namespace shardscope::trace
