#include "engine_types.h"

#include "../error.h"

namespace shardscope {

DeviceKind parseDeviceKind(std::string_view name) {
  if (name == "cpu") return DeviceKind::Cpu;
  if (name == "cuda") return DeviceKind::Cuda;
  throw Error("unknown device '" + std::string(name) + "': use cpu or cuda");
}

GroupBackend parseGroupBackend(std::string_view name) {
  if (name == "auto") return GroupBackend::Auto;
  if (name == "local") return GroupBackend::Local;
  if (name == "nccl") return GroupBackend::Nccl;
  throw Error("unknown process group backend '" + std::string(name) +
              "': use auto (NCCL when every rank has a GPU of its own), local or nccl");
}

const char* toString(DeviceKind d) {
  return d == DeviceKind::Cuda ? "cuda" : "cpu";
}

const char* toString(GroupBackend b) {
  switch (b) {
    case GroupBackend::Local:
      return "local";
    case GroupBackend::Nccl:
      return "nccl";
    case GroupBackend::Auto:
      break;
  }
  return "auto";
}

std::optional<DType> parseModelDtype(const std::string& name) {
  if (name.empty() || name == "auto") return std::nullopt;
  return parseDType(name);
}

std::string modelDtypeName(const std::optional<DType>& dtype) {
  if (!dtype) return "auto";
  switch (*dtype) {
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "f16";
    case DType::F32:
      return "f32";
    default:
      return dtypeName(*dtype);
  }
}

}  // namespace shardscope
