#include "lmdbloader/options.h"

#include <gtest/gtest.h>

namespace lmdbloader {
namespace {

TEST(ParseByteSizeTest, AcceptsBinaryAndDecimalSuffixes) {
  uint64_t v = 0;
  ASSERT_TRUE(ParseByteSize("123", &v).ok());
  EXPECT_EQ(v, 123u);
  ASSERT_TRUE(ParseByteSize("64KiB", &v).ok());
  EXPECT_EQ(v, 64u << 10);
  ASSERT_TRUE(ParseByteSize("256MiB", &v).ok());
  EXPECT_EQ(v, 256u << 20);
  ASSERT_TRUE(ParseByteSize("1GiB", &v).ok());
  EXPECT_EQ(v, 1ull << 30);
  ASSERT_TRUE(ParseByteSize("1.5G", &v).ok());
  EXPECT_EQ(v, 3ull << 29);
  ASSERT_TRUE(ParseByteSize("500MB", &v).ok());
  EXPECT_EQ(v, 500000000u);
  ASSERT_TRUE(ParseByteSize("2 mib", &v).ok());
  EXPECT_EQ(v, 2u << 20);
}

TEST(ParseByteSizeTest, RejectsGarbageWithTheText) {
  uint64_t v = 0;
  for (const char* bad : {"", "MiB", "12 parsecs", "-5", "1e3", "1.2.3GiB"}) {
    Status s = ParseByteSize(bad, &v);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(std::string("'") + bad + "'"), std::string::npos) << s.message();
  }
}

TEST(ParseAccessModeTest, KnownAndUnknown) {
  AccessMode m;
  ASSERT_TRUE(ParseAccessMode("mmap", &m).ok());
  EXPECT_EQ(m, AccessMode::kMmap);
  EXPECT_EQ(ParseAccessMode("fast", &m).code(), Status::Code::kInvalidArgument);
}

TEST(ParseIoEngineTest, NamesRoundTripAndUnknownNamesAreRefused) {
  for (IoEngine e : {IoEngine::kAuto, IoEngine::kIoUring, IoEngine::kThreads, IoEngine::kSync}) {
    IoEngine parsed;
    ASSERT_TRUE(ParseIoEngine(IoEngineName(e), &parsed).ok()) << IoEngineName(e);
    EXPECT_EQ(parsed, e);
  }
  IoEngine e;
  Status s = ParseIoEngine("aio", &e);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("aio"), std::string::npos);
}

TEST(ParseCachePolicyTest, NamesRoundTripAndUnknownNamesAreRefused) {
  for (CachePolicy c : {CachePolicy::kAuto, CachePolicy::kFill, CachePolicy::kExact, CachePolicy::kDrop}) {
    CachePolicy parsed;
    ASSERT_TRUE(ParseCachePolicy(CachePolicyName(c), &parsed).ok()) << CachePolicyName(c);
    EXPECT_EQ(parsed, c);
  }
  CachePolicy c;
  EXPECT_EQ(ParseCachePolicy("keep", &c).code(), Status::Code::kInvalidArgument);
}

TEST(ReaderOptionsTest, DefaultsAreDocumented) {
  ReaderOptions o;
  EXPECT_EQ(o.rss_budget, 0u);
  EXPECT_EQ(o.mode, AccessMode::kAuto);
  EXPECT_FALSE(o.lock);
  EXPECT_EQ(o.mmap_window, 64ull << 20);
  EXPECT_EQ(o.remap_every, 0u);
  EXPECT_EQ(o.io_engine, IoEngine::kAuto);
  EXPECT_EQ(o.queue_depth, 64u);
  EXPECT_EQ(o.cache_policy, CachePolicy::kAuto);
  EXPECT_TRUE(ValidateOptions(o).ok());
  o.mmap_window = 100;
  EXPECT_EQ(ValidateOptions(o).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace lmdbloader
