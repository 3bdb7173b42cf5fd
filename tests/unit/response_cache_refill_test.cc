// ResponseCache::refills and names_in_use (controller/response_cache.h): a name
// put again after its entry was evicted counts once, a new name or a name dropped
// by invalidation does not, and the memory of evicted names stays bounded.
#include "controller/response_cache.h"

#include <string>

#include <gtest/gtest.h>

namespace hvd {
namespace {

proto::Request Req(const std::string& name) {
  proto::Request r;
  r.set_type(proto::ALLREDUCE);
  r.set_name(name);
  r.add_shape(4);
  return r;
}

proto::Response Resp(const std::string& name) {
  proto::Response r;
  r.add_names(name);
  r.add_counts(4);
  return r;
}

void Put(ResponseCache& cache, const std::string& name) { cache.Put(Req(name), Resp(name)); }

TEST(ResponseCacheRefill, ANameEvictedAndPutAgainIsARefill) {
  ResponseCache cache(2);
  Put(cache, "a");
  Put(cache, "b");
  EXPECT_EQ(cache.names_in_use(), 2u);
  Put(cache, "c");  // evicts "a", the least recently used
  EXPECT_EQ(cache.refills(), 0);
  EXPECT_EQ(cache.names_in_use(), 3u) << "'a' was evicted but is remembered";
  Put(cache, "a");  // evicts "b"
  EXPECT_EQ(cache.refills(), 1);
  EXPECT_EQ(cache.names_in_use(), 3u) << "'a' is back, 'b' is out";
  Put(cache, "a");  // already cached: nothing happens
  EXPECT_EQ(cache.refills(), 1);
  Put(cache, "b");  // evicts "c"
  EXPECT_EQ(cache.refills(), 2);
}

TEST(ResponseCacheRefill, NewNamesAndInvalidatedEntriesAreNotRefills) {
  ResponseCache cache(2);
  for (int i = 0; i < 10; ++i) Put(cache, "step" + std::to_string(i));
  EXPECT_EQ(cache.refills(), 0) << "names that never come back";
  uint32_t index = 0;
  ASSERT_EQ(cache.Lookup(Req("step9"), &index), ResponseCache::Match::kHit);
  cache.Erase(index);  // an invalidation, not an eviction
  Put(cache, "step9");
  EXPECT_EQ(cache.refills(), 0);
}

TEST(ResponseCacheRefill, OnlyTheLastCapacityEvictionsAreRemembered) {
  ResponseCache cache(4);
  for (int i = 0; i < 1000; ++i) Put(cache, "n" + std::to_string(i));
  EXPECT_EQ(cache.names_in_use(), 8u) << "4 cached and the last 4 evicted";
  Put(cache, "n0");  // evicted 996 evictions ago: forgotten
  EXPECT_EQ(cache.refills(), 0);
  Put(cache, "n994");  // among the last 4 evicted: "n993".."n995" and "n996", which "n0" evicted
  EXPECT_EQ(cache.refills(), 1);
}

TEST(ResponseCacheRefill, ANameEvictedTwiceIsRememberedByItsLatestEviction) {
  ResponseCache cache(2);
  Put(cache, "a");
  Put(cache, "b");
  Put(cache, "c");  // evicts "a" (eviction 1)
  Put(cache, "a");  // a refill; evicts "b" (2)
  uint32_t index = 0;
  ASSERT_EQ(cache.Lookup(Req("c"), &index), ResponseCache::Match::kHit);
  cache.Touch(index);  // "a" is now the least recently used
  Put(cache, "d");  // evicts "a" again (3); eviction 1 falls out of the window
  EXPECT_EQ(cache.refills(), 1);
  Put(cache, "a");  // remembered by eviction 3, not forgotten with eviction 1
  EXPECT_EQ(cache.refills(), 2);
}

TEST(ResponseCacheRefill, DisabledCacheCountsNothing) {
  ResponseCache cache(0);
  Put(cache, "a");
  Put(cache, "a");
  EXPECT_EQ(cache.refills(), 0);
  EXPECT_EQ(cache.names_in_use(), 0u);
}

}  // namespace
}  // namespace hvd
