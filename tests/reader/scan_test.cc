// ScanRecords: every record once, in the order given, with its exact bytes,
// under every cache policy and batch size; slices bounded; errors stop it.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "lmdbloader/reader.h"
#include "lmdbloader/scan.h"
#include "reader_test_util.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::RecordBytes;
using testing::Shuffled;
using testing::TempDir;

std::unique_ptr<Reader> OpenWith(const std::string& path, CachePolicy cache) {
  ReaderOptions o;
  o.index_dir = "none";
  o.cache_policy = cache;
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(path, o, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

class ScanTest : public ::testing::TestWithParam<CachePolicy> {};

TEST_P(ScanTest, GivesEveryRecordOnceInTheOrderGivenWithItsBytes) {
  TempDir dir;
  // Sizes from empty to past the 1 MiB slice, so slices end inside batches.
  std::vector<std::pair<std::string, std::string>> records;
  for (uint64_t i = 0; i < 120; ++i) {
    std::string key(8, '\0');
    for (int b = 0; b < 8; ++b) key[7 - b] = static_cast<char>(i >> (8 * b));
    const size_t size = i % 7 == 0 ? 0 : (i % 5 == 0 ? (1u << 20) + 3 : 300 * i);
    records.push_back({key, RecordBytes(i, size)});
  }
  testing::WriteLmdb(dir.Sub("db"), records);
  std::unique_ptr<Reader> r = OpenWith(dir.Sub("db"), GetParam());
  ASSERT_TRUE(r);
  for (size_t batch : {size_t{1}, size_t{7}, size_t{512}}) {
    std::vector<uint64_t> order = Shuffled(r->size(), batch);
    order.push_back(order[3]);  // a record asked for twice is read twice
    std::vector<uint64_t> seen;
    size_t batches = 0;
    Status s = ScanRecords(*r, order.data(), order.size(), batch, [&](const ScanSlice& slice) {
      uint64_t total = 0;
      for (size_t k = 0; k < slice.count; ++k) {
        seen.push_back(slice.positions[k]);
        EXPECT_EQ(std::string(slice.records[k], slice.sizes[k]), records[slice.positions[k]].second)
            << "record " << slice.positions[k] << ", batch " << batch;
        total += slice.sizes[k];
      }
      EXPECT_EQ(slice.bytes, total);
      EXPECT_LE(slice.count, batch);
      return Status::OK();
    }, [&] { ++batches; return Status::OK(); });
    ASSERT_OK(s);
    EXPECT_EQ(seen, order) << "batch " << batch;
    if (batch == 1) {
      EXPECT_EQ(batches, order.size());
    } else if (batch == 7) {
      EXPECT_EQ(batches, (order.size() + 6) / 7);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryCachePolicy, ScanTest,
                         ::testing::Values(CachePolicy::kFill, CachePolicy::kExact, CachePolicy::kDrop),
                         [](const auto& info) { return std::string(CachePolicyName(info.param)); });

TEST(ScanRecords, ACallbacksErrorStopsTheScanAndIsReturned) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 100, 1000);
  std::unique_ptr<Reader> r = OpenWith(dir.Sub("db"), CachePolicy::kFill);
  std::vector<uint64_t> order = Shuffled(r->size(), 1);
  size_t slices = 0, batches = 0;
  Status s = ScanRecords(*r, order.data(), order.size(), 10, [&](const ScanSlice&) {
    ++slices;
    return Status::OK();
  }, [&] { return ++batches == 3 ? Status::InvalidArgument("enough") : Status::OK(); });
  EXPECT_EQ(s.message(), "enough");
  EXPECT_EQ(batches, 3u);
  EXPECT_EQ(slices, 3u);  // a batch of 10 records of 1000 bytes is one slice
}

TEST(ScanRecords, BadArgumentsAreErrorsBeforeAnyRead) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 10, 100);
  std::unique_ptr<Reader> r = OpenWith(dir.Sub("db"), CachePolicy::kExact);
  auto never = [](const ScanSlice&) {
    ADD_FAILURE() << "no slice expected";
    return Status::OK();
  };
  std::vector<uint64_t> order = {1, 2, 10};
  Status s = ScanRecords(*r, order.data(), order.size(), 4, never);
  EXPECT_TRUE(s.code() == Status::Code::kOutOfRange) << s.ToString();
  EXPECT_NE(s.message().find(dir.Sub("db")), std::string::npos) << s.message();
  s = ScanRecords(*r, order.data(), 2, 0, never);
  EXPECT_TRUE(s.code() == Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_OK(ScanRecords(*r, order.data(), 0, 4, never));  // nothing to read
  EXPECT_EQ(r->stats().records_read, 0u);
}

TEST(ScanRecords, ADataFileTruncatedUnderTheScanIsNamed) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 200, 20000);
  std::unique_ptr<Reader> r = OpenWith(dir.Sub("db"), CachePolicy::kExact);
  const std::string data = dir.Sub("db") + "/data.mdb";
  ASSERT_EQ(::truncate(data.c_str(), 4096 * 8), 0);
  std::vector<uint64_t> order = Shuffled(r->size(), 2);
  Status s = ScanRecords(*r, order.data(), order.size(), 16, [](const ScanSlice&) { return Status::OK(); });
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(data), std::string::npos) << s.message();
}

}  // namespace
}  // namespace lmdbloader
