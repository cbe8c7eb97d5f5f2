// A ring of shared-memory slots filled by bulk copies (Hopper's TMA, cp.async.bulk) and drained
// by consumer warps: the bytes in flight live in shared memory, not in the consumers' registers.
#pragma once

#include <cuda/ptx>

#include <cstdint>

namespace shardscope::kernels {

// Slot s of use k (k = s, s + slots, ...) is signalled by two mbarriers: full[s] completes when
// its copies have landed (one producer arrival that announces their bytes), empty[s] when its one
// consumer is done with it. One thread produces; each use of a slot has one consumer (a warp's
// lane 0 releases it after the warp's __syncwarp), and a slot's uses must be waited for in order
// by whoever consumes them: a wait sees only the parity of the barrier's phase, so a wait for use
// k while use k - slots has not landed would pass at once. A wait that lasts kHangNs traps (an
// error the host sees) rather than hang; define SHARDSCOPE_BULK_NO_HANG_TRAP to wait on (under a
// debugger's breakpoints). sm_90 only: callers check the device.
class BulkRing {
 public:
  // `storage` is 16-byte aligned shared memory of slots * slotBytes; barriers holds 2 * slots.
  __device__ BulkRing(unsigned char* storage, uint64_t* barriers, int slots, unsigned slotBytes)
      : data_(storage),
        full_(barriers),
        empty_(barriers + slots),
        slots_(slots),
        slotBytes_(slotBytes) {}

  // By one thread, before a __syncthreads that publishes the barriers to the block.
  __device__ void init() const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    for (int s = 0; s < slots_; ++s) {
      cuda::ptx::mbarrier_init(full_ + s, 1);
      cuda::ptx::mbarrier_init(empty_ + s, 1);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
#endif
  }

  __device__ unsigned char* slot(int64_t k) const {
    return data_ + (k % slots_) * slotBytes_;
  }

  // Producer: waits until use k's slot is free (its previous use released), then announces the
  // bytes the copies of use k will bring. Then copy() each part.
  __device__ void beginFill(int64_t k, unsigned bytes) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const int s = int(k % slots_);
    if (k >= slots_) wait(empty_ + s, unsigned((k / slots_ - 1) & 1));
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                         cuda::ptx::space_shared, full_ + s, bytes);
#endif
  }
  // Producer: `bytes` (a multiple of 16, both addresses 16-byte aligned) from global `src` to
  // use k's slot at `offset`.
  __device__ void copy(int64_t k, unsigned offset, const void* src, unsigned bytes) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, slot(k) + offset,
                             src, bytes, full_ + k % slots_);
#endif
  }

  // Consumer: waits until use k's bytes have landed.
  __device__ void waitFull(int64_t k) const {
    wait(full_ + k % slots_, unsigned((k / slots_) & 1));
  }
  // Consumer (one thread, after its warp has read the slot): use k's slot may be filled again.
  __device__ void release(int64_t k) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cuda::ptx::mbarrier_arrive(empty_ + k % slots_);
#endif
  }

 private:
  static constexpr uint64_t kHangNs = 10'000'000'000;  // far past any one kernel's time

  __device__ static uint64_t nanoseconds() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ static void wait(uint64_t* barrier, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (cuda::ptx::mbarrier_try_wait_parity(barrier, parity)) return;
    const uint64_t start = nanoseconds();
    while (!cuda::ptx::mbarrier_try_wait_parity(barrier, parity)) {
#ifndef SHARDSCOPE_BULK_NO_HANG_TRAP
      if (nanoseconds() - start > kHangNs) __trap();
#endif
    }
#endif
  }

  unsigned char* data_;
  uint64_t* full_;
  uint64_t* empty_;
  int slots_;
  unsigned slotBytes_;
};

}  // namespace shardscope::kernels
