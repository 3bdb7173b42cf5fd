// PoolAllocator: an allocator for objects made and freed in bursts, one at a time,
// that keeps freed blocks on a list per thread for the next allocation.
//
// A step of 1000 small tensors makes 1000 Works on the caller's thread and frees
// them as the handles are released; glibc's per-thread cache holds 7 blocks of a
// size, so the rest of a burst goes to its shared bins, whose allocation and free
// cost tens of times more than popping and pushing a list. Here both are a few
// instructions.
//
// Blocks of one T (n == 1) are pooled, up to kMaxBlocks per thread; anything else
// goes to operator new and delete. A block may be freed on another thread than the
// one that made it (the background thread drops the last reference of a Work its
// caller already released): it joins that thread's list. A thread's list is freed
// when the thread exits; a block freed after that (a thread_local's destructor
// dropping the last reference) goes to operator delete.
//
// Under AddressSanitizer nothing is pooled (a block reused could hide a use after
// free from it): kPooling is false and every call goes to operator new and delete.
//
// Use with std::allocate_shared, which rebinds it to its control block's type.
#ifndef HVD_RUNTIME_COMMON_POOL_ALLOCATOR_H_
#define HVD_RUNTIME_COMMON_POOL_ALLOCATOR_H_

#include <cstddef>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define HVD_POOL_ALLOCATOR_POOLS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HVD_POOL_ALLOCATOR_POOLS 0
#endif
#endif
#ifndef HVD_POOL_ALLOCATOR_POOLS
#define HVD_POOL_ALLOCATOR_POOLS 1
#endif

namespace hvd {

// Whether PoolAllocator pools (not under AddressSanitizer).
inline constexpr bool kPooling = HVD_POOL_ALLOCATOR_POOLS != 0;

template <typename T>
class PoolAllocator {
 public:
  using value_type = T;
  // At most this many free blocks per thread (a few steps' worth of tensors).
  static constexpr size_t kMaxBlocks = 4096;

  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    if (kPooling && n == 1 && !gone_) {
      FreeList& list = List();
      if (list.head != nullptr) {
        Block* b = list.head;
        list.head = b->next;
        --list.count;
        return reinterpret_cast<T*>(b);
      }
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }

  void deallocate(T* p, size_t n) noexcept {
    if (kPooling && n == 1 && !gone_) {
      FreeList& list = List();
      if (list.count < kMaxBlocks) {
        Block* b = reinterpret_cast<Block*>(p);
        b->next = list.head;
        list.head = b;
        ++list.count;
        return;
      }
    }
    ::operator delete(p);
  }

  // The free blocks of T this thread holds (for tests).
  static size_t pooled() { return gone_ ? 0 : List().count; }

  template <typename U>
  bool operator==(const PoolAllocator<U>&) const noexcept {
    return true;
  }
  template <typename U>
  bool operator!=(const PoolAllocator<U>&) const noexcept {
    return false;
  }

 private:
  static_assert(sizeof(T) >= sizeof(void*), "a pooled block holds the free list's link");
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                "operator new's blocks are aligned for T");

  struct Block {
    Block* next;
  };
  struct FreeList {
    Block* head = nullptr;
    size_t count = 0;
    ~FreeList() {
      gone_ = true;
      while (head != nullptr) {
        Block* b = head;
        head = b->next;
        ::operator delete(b);
      }
    }
  };

  static FreeList& List() {
    thread_local FreeList list;
    return list;
  }
  // Set once this thread's list is destroyed (a trivially destructible
  // thread_local stays readable after that).
  static thread_local bool gone_;
};

template <typename T>
thread_local bool PoolAllocator<T>::gone_ = false;

}  // namespace hvd

#endif  // HVD_RUNTIME_COMMON_POOL_ALLOCATOR_H_
