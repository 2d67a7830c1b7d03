// Reads out of LMDB leaf pages (index_mode "leaves"): the same bytes as the
// paged index's reads for every engine and batch size, values on overflow
// pages and leaves shared with other items read through the index, and a
// leaf page that is not what the table says refused with Corruption naming
// the file, never its bytes returned.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "lmdbloader/reader.h"
#include "reader_test_util.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::OpenOrDie;
using testing::ReadInto;
using testing::RecordBytes;
using testing::Shuffled;
using testing::TempDir;

ReaderOptions LeafOptions(const TempDir& dir, IoEngine engine = IoEngine::kAuto) {
  ReaderOptions o;
  o.index_dir = dir.Sub("idx");
  o.index_residence = IndexResidence::kLeaves;
  o.io_engine = engine;
  return o;
}

// Reads `indices` in one batch into buffers sized by ValueSizes.
Status ReadBatch(Reader& r, const std::vector<uint64_t>& indices, std::vector<std::string>* out) {
  std::vector<uint64_t> sizes(indices.size());
  LMDBLOADER_RETURN_IF_ERROR(r.ValueSizes(indices.data(), indices.size(), sizes.data()));
  return ReadInto(r, indices, sizes, out);
}

TEST(ReaderLeavesTest, EveryRecordComesOutOfItsLeafForEveryEngineAndBatchSize) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 20000, 48);
  for (IoEngine engine : {IoEngine::kSync, IoEngine::kThreads, IoEngine::kAuto}) {
    SCOPED_TRACE(IoEngineName(engine));
    auto r = OpenOrDie(dir.Sub("db"), LeafOptions(dir, engine));
    ASSERT_EQ(r->stats().index_residence, "leaves");
    const std::vector<uint64_t> order = Shuffled(20000, 7);
    size_t at = 0;
    // Batch sizes up to the 512 records whose leaves a batch keeps (with the
    // record read twice), and past it.
    for (size_t batch : {size_t{1}, size_t{3}, size_t{256}, size_t{511}, size_t{700}}) {
      std::vector<uint64_t> indices(order.begin() + at, order.begin() + at + batch);
      indices.push_back(indices.front());  // a record twice: one leaf read serves both
      at += batch;
      std::vector<std::string> got;
      ASSERT_OK(ReadBatch(*r, indices, &got));
      for (size_t k = 0; k < indices.size(); ++k) ASSERT_EQ(got[k], RecordBytes(indices[k], 48)) << indices[k];
    }
    std::string v;
    ASSERT_OK(r->Read(order[at], &v));
    EXPECT_EQ(v, RecordBytes(order[at], 48));
    const ReaderStats s = r->stats();
    EXPECT_EQ(s.leaf_values_read, 2u + 4u + 257u + 512u + 1u);
    // Appended records of one size: every leaf regular, each record's node read alone.
    EXPECT_EQ(s.leaf_node_reads, s.leaf_values_read);
    EXPECT_EQ(s.leaf_page_reads, 0u);
    // The 700-record batch is read through the index's entries.
    EXPECT_GT(s.index_entry_reads + s.index_page_reads, 0u);
  }
}

TEST(ReaderLeavesTest, OverflowValuesAndTheirLeavesReadThroughTheIndex) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> records;
  for (uint64_t i = 0; i < 3000; ++i) {
    char key[16];
    std::snprintf(key, sizeof(key), "%09llu", static_cast<unsigned long long>(i));
    records.emplace_back(key, RecordBytes(i, i % 97 == 0 ? 6000 : 1 + i % 300));
  }
  testing::WriteLmdb(dir.Sub("db"), records);
  auto r = OpenOrDie(dir.Sub("db"), LeafOptions(dir));
  ASSERT_EQ(r->stats().index_residence, "leaves");
  const std::vector<uint64_t> order = Shuffled(3000, 11);
  for (size_t first = 0; first < order.size(); first += 250) {
    std::vector<uint64_t> indices(order.begin() + first, order.begin() + std::min(order.size(), first + 250));
    std::vector<std::string> got;
    ASSERT_OK(ReadBatch(*r, indices, &got));
    for (size_t k = 0; k < indices.size(); ++k) ASSERT_EQ(got[k], records[indices[k]].second) << indices[k];
  }
  const ReaderStats s = r->stats();
  EXPECT_GT(s.leaf_values_read, 0u);
  EXPECT_LT(s.leaf_values_read, 3000u) << "the overflow values' leaves are left to the index";
  // Values of many sizes: their leaves are read whole.
  EXPECT_GT(s.leaf_page_reads, 0u);
  EXPECT_LT(s.leaf_page_reads, s.leaf_values_read);
}

TEST(ReaderLeavesTest, PagedAndAutoUnderABudgetChooseAsTheRuleSays) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 40000, 48);
  ReaderOptions o = LeafOptions(dir);
  o.index_residence = IndexResidence::kPaged;
  EXPECT_EQ(OpenOrDie(dir.Sub("db"), o)->stats().index_residence, "paged");
  o.index_residence = IndexResidence::kAuto;
  o.rss_budget = 1 << 20;  // the held index needs 480 KB, more than its quarter; the leaves 5 KB
  auto r = OpenOrDie(dir.Sub("db"), o);
  const ReaderStats s = r->stats();
  EXPECT_EQ(s.index_residence, "leaves");
  // The paged index's cache (an eighth of the budget) and 8 bytes a leaf of
  // about 60 records.
  EXPECT_GT(s.index_bytes, 128u << 10);
  EXPECT_LT(s.index_bytes, (128u << 10) + 8 * 40000 / 50);
}

// Leaf pages damaged in place under a reader that holds LMDB's lock (and so
// skips the file's change checks: its snapshot is what the index describes):
// a whole leaf read (values of many sizes) checks its page, a regular leaf's
// node read alone (appended values of one size) checks the node.
TEST(ReaderLeavesTest, ADamagedLeafIsCorruptionNamingTheFileNeverItsBytes) {
  for (bool one_size : {false, true}) {
    SCOPED_TRACE(one_size ? "regular leaves" : "leaves read whole");
    TempDir dir;
    if (one_size) {
      testing::WriteNumberedLmdb(dir.Sub("db"), 5000, 48);
    } else {
      std::vector<std::pair<std::string, std::string>> records;
      for (uint64_t i = 0; i < 5000; ++i) records.emplace_back(std::to_string(100000 + i), RecordBytes(i, 1 + i % 90));
      testing::WriteLmdb(dir.Sub("db"), records);
    }
    ReaderOptions o = LeafOptions(dir);
    o.lock = true;
    auto r = OpenOrDie(dir.Sub("db"), o);
    ASSERT_EQ(r->stats().index_residence, "leaves");
    std::vector<std::string> got;
    ASSERT_OK(ReadBatch(*r, {0, 1, 2}, &got));
    // Every page but the two meta pages overwritten.
    const std::string data = dir.Sub("db") + "/data.mdb";
    const int fd = ::open(data.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const uint32_t page_size = 4096;
    const off_t pages = ::lseek(fd, 0, SEEK_END) / page_size;
    const std::string garbage(page_size, '\xa5');
    for (off_t p = 2; p < pages; ++p)
      ASSERT_EQ(::pwrite(fd, garbage.data(), page_size, p * page_size), static_cast<ssize_t>(page_size));
    ::close(fd);
    for (const std::vector<uint64_t>& batch : {std::vector<uint64_t>{0, 1, 2}, std::vector<uint64_t>{4000}}) {
      Status s = ReadBatch(*r, batch, &got);
      EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
      EXPECT_NE(s.message().find(data), std::string::npos) << s.message();
      EXPECT_NE(s.message().find(one_size ? "is not the record" : "is not the leaf page"), std::string::npos)
          << s.message();
    }
  }
}

}  // namespace
}  // namespace lmdbloader
