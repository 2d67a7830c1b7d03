#include "lmdbloader/options.h"

#include <gtest/gtest.h>

#include <cstdlib>

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

TEST(ReaderOptionsByNameTest, EveryListedOptionRoundTripsItsDefault) {
  const ReaderOptions defaults;
  for (const OptionInfo& info : ReaderOptionList()) {
    ReaderOptions o;
    const std::string text = ReaderOptionValue(defaults, info.name);
    ASSERT_TRUE(SetReaderOption(info.name, text, &o).ok()) << info.name << "=" << text;
    EXPECT_EQ(ReaderOptionValue(o, info.name), text) << info.name;
  }
}

TEST(ReaderOptionsByNameTest, ValuesAreParsedAndCheckedOnce) {
  ReaderOptions o;
  ASSERT_TRUE(SetReaderOption("rss_budget", "64MiB", &o).ok());
  EXPECT_EQ(o.rss_budget, 64u << 20);
  ASSERT_TRUE(SetReaderOption("verify_checksums", "once", &o).ok());
  EXPECT_EQ(o.verify_checksums, ChecksumPolicy::kFirstRead);
  ASSERT_TRUE(SetReaderOption("lock", "true", &o).ok());
  EXPECT_TRUE(o.lock);
  ASSERT_TRUE(SetReaderOption("db", "images", &o).ok());
  EXPECT_EQ(o.db_name, "images");
  struct Bad {
    const char *name, *value, *message;
  };
  for (const Bad& bad : {Bad{"queue_depth", "0", "queue_depth must be between 1 and 4096, got 0"},
                         Bad{"queue_depth", "8x", "queue_depth must be an integer, got '8x'"},
                         Bad{"rss_budget", "lots", "rss_budget: invalid byte size 'lots'"},
                         Bad{"rss_budget", "100", "rss_budget of 100 bytes is below the floor of 1048576"},
                         Bad{"rss_budget", "1048575", "below the floor"},
                         Bad{"mode", "fast", "mode must be one of auto, pread, mmap; got 'fast'"},
                         Bad{"verify_checksums", "yes", "verify_checksums must be True, False or \"once\""},
                         Bad{"mmap_window", "4KiB", "mmap_window must be at least 64KiB"},
                         Bad{"lock", "maybe", "lock must be true or false"},
                         Bad{"budget", "1GiB", "unknown option 'budget' (options: rss_budget, mode"}}) {
    Status s = SetReaderOption(bad.name, bad.value, &o);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad.name;
    EXPECT_NE(s.message().find(bad.message), std::string::npos) << s.message();
  }
  // The floor and "unbounded" are values the setter takes.
  ASSERT_TRUE(SetReaderOption("rss_budget", "1MiB", &o).ok());
  ASSERT_TRUE(SetReaderOption("rss_budget", "0", &o).ok());
  EXPECT_EQ(o.rss_budget, 0u);
  // The struct filled in C++ is checked by the same rules.
  ReaderOptions direct;
  direct.queue_depth = 0;
  EXPECT_NE(ValidateOptions(direct).message().find("queue_depth must be between 1 and 4096, got 0"),
            std::string::npos);
  direct = ReaderOptions();
  direct.rss_budget = 100;
  EXPECT_NE(ValidateOptions(direct).message().find("rss_budget of 100 bytes is below the floor"), std::string::npos);
}

TEST(ReaderOptionsByNameTest, TheBudgetDefaultsToTheEnvironment) {
  ::setenv("LMDBLOADER_RSS_BUDGET", "32MiB", 1);
  ReaderOptions o;
  EXPECT_TRUE(ReaderOptionsFromEnvironment(&o).ok());
  EXPECT_EQ(o.rss_budget, 32u << 20);
  ::setenv("LMDBLOADER_RSS_BUDGET", "plenty", 1);
  Status s = ReaderOptionsFromEnvironment(&o);
  EXPECT_NE(s.message().find("LMDBLOADER_RSS_BUDGET: invalid byte size 'plenty'"), std::string::npos) << s.message();
  ::setenv("LMDBLOADER_RSS_BUDGET", "100", 1);
  s = ReaderOptionsFromEnvironment(&o);
  EXPECT_NE(s.message().find("LMDBLOADER_RSS_BUDGET: rss_budget of 100 bytes is below the floor"), std::string::npos)
      << s.message();
  ::unsetenv("LMDBLOADER_RSS_BUDGET");
}

}  // namespace
}  // namespace lmdbloader
