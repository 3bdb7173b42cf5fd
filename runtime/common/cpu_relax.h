// CpuRelax: the CPU's spin-wait hint, for loops that poll memory another thread
// or process writes (ShmSegment::Wait, Work::Wait).
#ifndef HVD_RUNTIME_COMMON_CPU_RELAX_H_
#define HVD_RUNTIME_COMMON_CPU_RELAX_H_

#include <atomic>

namespace hvd {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace hvd

#endif  // HVD_RUNTIME_COMMON_CPU_RELAX_H_
