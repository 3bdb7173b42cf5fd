#include "runtime/common/pool_allocator.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace hvd {
namespace {

struct Item {
  char bytes[200];
};
using Alloc = PoolAllocator<Item>;

// Empties this thread's pool (blocks taken back out, then handed to operator delete).
void Drain() {
  Alloc a;
  std::vector<Item*> taken;
  while (Alloc::pooled() > 0) taken.push_back(a.allocate(1));
  for (Item* p : taken) ::operator delete(p);
}

TEST(PoolAllocatorTest, AFreedBlockIsTheNextOneAllocated) {
  if (!kPooling) GTEST_SKIP() << "nothing is pooled under AddressSanitizer";
  Drain();
  Alloc a;
  Item* first = a.allocate(1);
  Item* second = a.allocate(1);
  a.deallocate(first, 1);
  a.deallocate(second, 1);
  EXPECT_EQ(Alloc::pooled(), 2u);
  EXPECT_EQ(a.allocate(1), second);
  EXPECT_EQ(a.allocate(1), first);
  EXPECT_EQ(Alloc::pooled(), 0u);
  a.deallocate(first, 1);
  a.deallocate(second, 1);
}

TEST(PoolAllocatorTest, ArraysAreNotPooled) {
  Drain();
  Alloc a;
  Item* two = a.allocate(2);
  a.deallocate(two, 2);
  EXPECT_EQ(Alloc::pooled(), 0u);
}

TEST(PoolAllocatorTest, AThreadKeepsAtMostTheBoundAndFreesTheRest) {
  if (!kPooling) GTEST_SKIP() << "nothing is pooled under AddressSanitizer";
  Drain();
  Alloc a;
  std::vector<Item*> blocks;
  for (size_t i = 0; i < Alloc::kMaxBlocks + 10; ++i) blocks.push_back(a.allocate(1));
  for (Item* p : blocks) a.deallocate(p, 1);
  EXPECT_EQ(Alloc::pooled(), Alloc::kMaxBlocks);
  Drain();
}

TEST(PoolAllocatorTest, ABlockFreedOnAnotherThreadJoinsThatThreadsPool) {
  if (!kPooling) GTEST_SKIP() << "nothing is pooled under AddressSanitizer";
  Drain();
  Alloc a;
  Item* made_here = a.allocate(1);
  size_t pooled_there = 0;
  Item* reused_there = nullptr;
  std::thread([&] {
    Alloc b;
    b.deallocate(made_here, 1);
    pooled_there = Alloc::pooled();
    reused_there = b.allocate(1);
    b.deallocate(reused_there, 1);
  }).join();  // the thread's pool is freed as it exits (ASan checks)
  EXPECT_EQ(pooled_there, 1u);
  EXPECT_EQ(reused_there, made_here);
  EXPECT_EQ(Alloc::pooled(), 0u);
}

}  // namespace
}  // namespace hvd
