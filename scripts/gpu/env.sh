# Sourced on the GPU machine (see README's developer section): unpacks the carried Debian packages
# (Qt Core/Test, SQLite, nlohmann-json, PCRE2, utf8proc) and exports the build variables.
# Keeps NVLink multicast off, as the machine's rules require.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
eval "$(bash .gpu-debs/unpack-debs .gpu-debs /tmp/debroot)"
export CMAKE_PREFIX_PATH="/tmp/debroot/usr;$CMAKE_PREFIX_PATH"
export SHARDSCOPE_CACHE=${SHARDSCOPE_CACHE:-$PWD/.gpu-cache}
