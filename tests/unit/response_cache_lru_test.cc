// ResponseCache eviction order and generation (controller/response_cache.h): a
// full cache evicts the entry put or touched longest ago, a freed slot is reused
// before anything is evicted, and generation() moves on every put or erase (the
// controller keeps a fused plan of cache hits only while it stays the same).
#include "controller/response_cache.h"

#include <string>

#include <gtest/gtest.h>

namespace hvd {
namespace {

proto::Request Req(const std::string& name, int64_t count = 4) {
  proto::Request r;
  r.set_type(proto::ALLREDUCE);
  r.set_name(name);
  r.add_shape(count);
  return r;
}

proto::Response Resp(const std::string& name, int64_t count = 4) {
  proto::Response r;
  r.add_names(name);
  r.add_counts(count);
  return r;
}

int64_t Put(ResponseCache& cache, const std::string& name) {
  return cache.Put(Req(name), Resp(name));
}

uint32_t IndexOf(ResponseCache& cache, const std::string& name) {
  uint32_t index = 99;
  EXPECT_EQ(cache.Lookup(Req(name), &index), ResponseCache::Match::kHit) << name;
  return index;
}

bool Cached(ResponseCache& cache, const std::string& name) {
  uint32_t index = 0;
  return cache.Lookup(Req(name), &index) != ResponseCache::Match::kNone;
}

TEST(ResponseCacheLru, AFullCacheEvictsTheEntryPutOrTouchedLongestAgo) {
  ResponseCache cache(3);
  EXPECT_EQ(Put(cache, "a"), -1);
  EXPECT_EQ(Put(cache, "b"), -1);
  EXPECT_EQ(Put(cache, "c"), -1);
  const uint32_t a = IndexOf(cache, "a"), b = IndexOf(cache, "b"), c = IndexOf(cache, "c");
  cache.Touch(a);  // order now b, c, a
  EXPECT_EQ(Put(cache, "d"), b);
  EXPECT_FALSE(Cached(cache, "b"));
  cache.Touch(c);  // order now a, d, c
  EXPECT_EQ(Put(cache, "e"), a);
  EXPECT_FALSE(Cached(cache, "a"));
  EXPECT_TRUE(Cached(cache, "c"));
  EXPECT_TRUE(Cached(cache, "d"));
  EXPECT_TRUE(Cached(cache, "e"));
  // d was put before c was touched and before e was put.
  EXPECT_EQ(Put(cache, "f"), static_cast<int64_t>(IndexOf(cache, "d")));
}

TEST(ResponseCacheLru, TouchingAnEntryManyTimesKeepsItAcrossEvictions) {
  ResponseCache cache(2);
  Put(cache, "hot");
  const uint32_t hot = IndexOf(cache, "hot");
  for (int i = 0; i < 10; ++i) {
    cache.Touch(hot);
    EXPECT_NE(Put(cache, "cold" + std::to_string(i)), static_cast<int64_t>(hot)) << i;
    EXPECT_TRUE(Cached(cache, "hot")) << i;
  }
  EXPECT_EQ(cache.size(), 2u);
}

TEST(ResponseCacheLru, AnErasedSlotIsReusedBeforeAnythingIsEvicted) {
  ResponseCache cache(2);
  Put(cache, "a");
  Put(cache, "b");
  const uint32_t a = IndexOf(cache, "a"), b = IndexOf(cache, "b");
  cache.Erase(a);
  EXPECT_EQ(Put(cache, "c"), -1);
  EXPECT_EQ(IndexOf(cache, "c"), a);
  EXPECT_TRUE(Cached(cache, "b"));
  // Then b is the oldest.
  EXPECT_EQ(Put(cache, "d"), static_cast<int64_t>(b));
}

TEST(ResponseCacheLru, GenerationMovesOnPutAndEraseOnly) {
  ResponseCache cache(4);
  uint64_t g = cache.generation();
  Put(cache, "a");
  EXPECT_NE(cache.generation(), g);
  g = cache.generation();
  Put(cache, "a");  // already cached: no change
  EXPECT_EQ(cache.generation(), g);
  const uint32_t a = IndexOf(cache, "a");
  cache.Touch(a);
  EXPECT_EQ(cache.generation(), g);
  cache.Erase(a);
  EXPECT_NE(cache.generation(), g);
  g = cache.generation();
  cache.Erase(a);  // already gone: no change
  EXPECT_EQ(cache.generation(), g);
  // The same name and slot again, with other parameters: a new generation.
  cache.Put(Req("a", 8), Resp("a", 8));
  EXPECT_NE(cache.generation(), g);
  EXPECT_EQ(cache.response(a).counts(0), 8);
}

}  // namespace
}  // namespace hvd
