// LeafTable: which records a walk finds on usable leaves, its saved form and
// the checks of that form, and LeafValue against liblmdb's own pages (the
// values it finds equal the ones the index locates) and against damaged ones.
#include "lmdb/leaf_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lmdb/index_builder.h"
#include "lmdb/record_key.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;

constexpr LeafPageFormat kFormat{4096, 16};

TEST(LeafTableTest, RecordsOnLeavesOfInlineRecordsAloneAreFound) {
  LeafTable t;
  for (int i = 0; i < 3; ++i) t.Note(5, true, true);   // records 0-2
  t.Note(9, false, true);                               // metadata first: the leaf is unusable
  t.Note(9, true, true);                                // record 3
  for (int i = 0; i < 2; ++i) t.Note(12, true, true);  // records 4-5
  t.Note(14, true, false);                              // record 6 on overflow pages
  t.Note(15, true, true);                               // record 7
  t.Finish();
  EXPECT_EQ(t.leaves(), 5u);
  EXPECT_EQ(t.usable_leaves(), 3u);
  EXPECT_EQ(t.records(), 8u);
  EXPECT_EQ(t.MemoryBytes(), 5 * kLeafEntryBytes);
  LeafSpot spot;
  ASSERT_TRUE(t.Find(2, &spot));
  EXPECT_EQ(spot.pgno, 5u);
  EXPECT_EQ(spot.node, 2u);
  EXPECT_EQ(spot.nodes, 3u);
  EXPECT_FALSE(t.Find(3, &spot)) << "record 3 shares its leaf with metadata";
  ASSERT_TRUE(t.Find(5, &spot));
  EXPECT_EQ(spot.pgno, 12u);
  EXPECT_EQ(spot.node, 1u);
  EXPECT_EQ(spot.nodes, 2u);
  EXPECT_FALSE(t.Find(6, &spot)) << "an overflow value";
  ASSERT_TRUE(t.Find(7, &spot));
  EXPECT_EQ(spot.pgno, 15u);
  EXPECT_EQ(spot.node, 0u);
  EXPECT_FALSE(t.Find(8, &spot)) << "past the last record";
}

TEST(LeafTableTest, LeavesOfTheTablesOneShapeAreRegular) {
  LeafTable t;
  t.Begin(kFormat);
  // Values of 50 bytes under 9-byte keys, each node 100 bytes below the last.
  auto leaf = [&](uint64_t pgno, std::vector<uint64_t> value_at, uint64_t size = 50) {
    for (uint64_t at : value_at) t.Note(pgno, true, true, pgno * 4096 + at, size, 9);
  };
  leaf(5, {3950, 3850, 3750});  // sets the shape
  leaf(6, {3950, 3850, 3750, 3650});
  leaf(7, {3950, 3800});         // another stride
  leaf(8, {3950, 3850}, 40);     // another value size
  leaf(9, {3950});               // one node of the shape
  leaf(10, {3850, 3950});        // not in LMDB's append order
  t.Finish();
  EXPECT_EQ(t.usable_leaves(), 6u);
  EXPECT_EQ(t.regular_leaves(), 3u);
  EXPECT_EQ(t.shape().value_top, 3950u);
  EXPECT_EQ(t.shape().stride, 100u);
  EXPECT_EQ(t.shape().node_head, 8u + 9u);
  LeafSpot spot;
  ASSERT_TRUE(t.Find(5, &spot));  // leaf 6, node 2
  EXPECT_TRUE(spot.regular);
  EXPECT_EQ(spot.pgno, 6u);
  EXPECT_EQ(spot.value_offset, 6u * 4096 + 3750);
  EXPECT_EQ(spot.node_offset, 6u * 4096 + 3750 - 17);
  for (uint64_t r : {7u, 9u, 12u}) {
    ASSERT_TRUE(t.Find(r, &spot)) << r;
    EXPECT_FALSE(spot.regular) << r;
  }
  ASSERT_TRUE(t.Find(11, &spot));
  EXPECT_TRUE(spot.regular);
  EXPECT_EQ(spot.pgno, 9u);
  LeafTable back;
  ASSERT_OK(LeafTable::Decode(t.Encode(), t.records(), kFormat, "x.idx", &back));
  EXPECT_EQ(back.regular_leaves(), 3u);
  ASSERT_TRUE(back.Find(5, &spot));
  EXPECT_EQ(spot.value_offset, 6u * 4096 + 3750);
  // A regular leaf said to hold more nodes than its page has room for.
  LeafTable crowded;
  crowded.Begin(kFormat);
  for (uint64_t j = 0; j < 30; ++j) crowded.Note(3, true, true, 3 * 4096 + 3950 - j * 100, 50, 9);
  crowded.Finish();
  std::string bad = crowded.Encode();
  EXPECT_OK(LeafTable::Decode(bad, 30, kFormat, "x.idx", &back));
  EXPECT_EQ(LeafTable::Decode(bad, 60, kFormat, "x.idx", &back).code(), Status::Code::kCorruption);
}

// Find against a plain search of the leaves' first records, for leaves as
// appends fill them (equal, the last partial: the guess is exact), nearly
// equal (the guess a leaf or two off) and of any size (far off).
TEST(LeafTableTest, FindAgreesWithASearchOfEveryLeafWhateverTheLeafSizes) {
  std::mt19937 rng(7);
  const std::vector<std::vector<uint32_t>> layouts = {
      {48}, {48, 48, 48, 16}, std::vector<uint32_t>(4000, 48), {}, {}, {}};
  for (size_t case_no = 0; case_no < layouts.size(); ++case_no) {
    std::vector<uint32_t> sizes = layouts[case_no];
    if (case_no == 2) sizes.push_back(17);
    for (int i = 0; sizes.size() < 3000 && case_no >= 3; ++i)
      sizes.push_back(case_no == 3 ? 48 - (rng() % 3 == 0) : case_no == 4 ? 1 + rng() % 60 : (i < 100 ? 200 : 1));
    LeafTable t;
    std::vector<uint64_t> firsts;
    uint64_t records = 0;
    for (size_t leaf = 0; leaf < sizes.size(); ++leaf) {
      firsts.push_back(records);
      for (uint32_t j = 0; j < sizes[leaf]; ++j, ++records) t.Note(2 + leaf, true, true);
    }
    t.Finish();
    ASSERT_EQ(t.records(), records);
    LeafSpot spot;
    for (uint64_t r = 0; r < records; ++r) {
      const size_t leaf = std::upper_bound(firsts.begin(), firsts.end(), r) - firsts.begin() - 1;
      ASSERT_TRUE(t.Find(r, &spot)) << case_no << " " << r;
      ASSERT_EQ(spot.pgno, 2 + leaf) << case_no << " " << r;
      ASSERT_EQ(spot.node, r - firsts[leaf]) << case_no << " " << r;
      ASSERT_EQ(spot.nodes, sizes[leaf]) << case_no << " " << r;
    }
    EXPECT_FALSE(t.Find(records, &spot));
  }
}

TEST(LeafTableTest, NothingUsableHoldsNothing) {
  LeafTable t;
  for (int i = 0; i < 100; ++i) t.Note(2 + i, true, false);  // every value on overflow pages
  t.Finish();
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.Encode(), "");
  LeafSpot spot;
  EXPECT_FALSE(t.Find(0, &spot));
}

TEST(LeafTableTest, TheSavedFormRoundTripsAndIsChecked) {
  LeafTable t;
  for (uint64_t i = 0; i < 1000; ++i) t.Note(2 + i / 7, true, i / 7 != 3);
  t.Finish();
  const std::string bytes = t.Encode();
  ASSERT_EQ(bytes.size(), kLeafShapeBytes + t.leaves() * kLeafEntryBytes);
  LeafTable back;
  ASSERT_OK(LeafTable::Decode(bytes, 1000, kFormat, "x.idx", &back));
  EXPECT_EQ(back.leaves(), t.leaves());
  EXPECT_EQ(back.usable_leaves(), t.usable_leaves());
  for (uint64_t i = 0; i < 1000; ++i) {
    LeafSpot a, b;
    ASSERT_EQ(t.Find(i, &a), back.Find(i, &b)) << i;
    EXPECT_EQ(a.pgno, b.pgno);
    EXPECT_EQ(a.node, b.node);
    EXPECT_EQ(a.nodes, b.nodes);
  }
  auto corrupt = [&](std::string bad, uint64_t records, const char* what) {
    LeafTable out;
    Status s = LeafTable::Decode(bad, records, kFormat, "x.idx", &out);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << what;
    EXPECT_NE(s.message().find("x.idx"), std::string::npos) << s.message();
  };
  corrupt(bytes.substr(0, bytes.size() - 3), 1000, "not whole entries");
  LeafTable out;
  EXPECT_EQ(LeafTable::Decode(bytes, 1000, LeafPageFormat{0, 16}, "x.idx", &out).code(), Status::Code::kCorruption)
      << "pages of no size";
  corrupt(bytes, 10, "first records past the record count");
  const size_t e = kLeafShapeBytes;  // the first entry
  std::string swapped = bytes;
  std::memcpy(&swapped[e + 8 + 4], "\x00\x00\x00\x00", 4);  // leaf 1 starts at record 0 again: leaf 0 empty
  corrupt(swapped, 1000, "an empty usable leaf");
  std::string meta_page = bytes;
  std::memcpy(&meta_page[e + 8], "\x01\x00\x00\x00", 4);
  corrupt(meta_page, 1000, "a meta page as a leaf");
  std::string late = bytes;
  std::memcpy(&late[e + 4], "\x05\x00\x00\x00", 4);  // the first leaf must start at record 0
  corrupt(late, 1000, "the first leaf after record 0");
}

// A database walked as the reader walks it: its leaf table, and each
// record's place as the index has it.
struct Walked {
  DataLocation location;
  std::unique_ptr<LmdbEnv> env;
  RecordIndex index;
  LeafTable leaves;
};

void Walk(const std::string& path, Walked* w) {
  ASSERT_OK(ResolveLocation(path, &w->location));
  ASSERT_OK(LmdbEnv::Open(w->location, /*lock=*/false, "", &w->env));
  ASSERT_OK(WalkIndex(*w->env, w->location, "", "", &w->index, &w->leaves));
  w->index.identity = w->env->identity();  // the walk leaves it to its caller
}

// Records 0 .. count-1 each in a regular leaf, at the offset the index
// has, its node passing the read's check (against its key with `keys`).
void ExpectRegularLeaves(const Walked& w, uint64_t count, const std::string& data, bool keys) {
  for (uint64_t i = 0; i < count; ++i) {
    LeafSpot spot;
    ASSERT_TRUE(w.leaves.Find(i, &spot)) << i;
    ASSERT_TRUE(spot.regular) << i;
    EXPECT_EQ(spot.value_offset, w.index.offset(i)) << i;
    const std::string key = RecordKey(i);
    ASSERT_OK(LeafNodeCheck(data.data() + spot.node_offset, spot, w.leaves.shape(), kFormat, keys ? &key : nullptr,
                            w.location.data_path));
  }
}

std::string Page(const std::string& file, uint64_t pgno, uint32_t page_size) {
  std::string out(page_size, '\0');
  const int fd = ::open(file.c_str(), O_RDONLY);
  EXPECT_EQ(::pread(fd, out.data(), page_size, static_cast<off_t>(pgno * page_size)), static_cast<ssize_t>(page_size));
  ::close(fd);
  return out;
}

TEST(LeafTableTest, EveryValueOfALeafIsWhereTheIndexFindsIt) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 3000, 64);
  Walked w;
  Walk(dir.Sub("db"), &w);
  ASSERT_FALSE(w.leaves.empty());
  EXPECT_EQ(w.leaves.records(), 3000u);
  const LeafPageFormat format{w.index.identity.page_size, w.index.identity.page_header};
  for (uint64_t i = 0; i < 3000; ++i) {
    LeafSpot spot;
    ASSERT_TRUE(w.leaves.Find(i, &spot)) << i;
    const std::string page = Page(w.location.data_path, spot.pgno, format.page_size);
    const std::string key = RecordKey(i);
    uint32_t at = 0, size = 0;
    ASSERT_OK(LeafValue(page.data(), spot, format, &key, w.location.data_path, &at, &size));
    const ValueLocation loc{w.index.offset(i), w.index.value_size(i)};
    EXPECT_EQ(spot.pgno * format.page_size + at, loc.offset) << i;
    EXPECT_EQ(size, loc.size) << i;
    EXPECT_EQ(page.substr(at, size), testing::RecordBytes(i, 64)) << i;
  }
}

TEST(LeafTableTest, ALeafPageThatIsNotWhatTheTableSaysIsCorruption) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 500, 64);
  Walked w;
  Walk(dir.Sub("db"), &w);
  const LeafPageFormat format{w.index.identity.page_size, w.index.identity.page_header};
  LeafSpot spot;
  ASSERT_TRUE(w.leaves.Find(20, &spot));
  const std::string page = Page(w.location.data_path, spot.pgno, format.page_size);
  const std::string key = RecordKey(20);
  auto refused = [&](const std::string& bad, const LeafSpot& where, const std::string* k, const char* what) {
    uint32_t at = 0, size = 0;
    Status s = LeafValue(bad.data(), where, format, k, w.location.data_path, &at, &size);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << what;
    EXPECT_NE(s.message().find(w.location.data_path), std::string::npos) << s.message();
  };
  auto with = [&](size_t offset, uint16_t v) {
    std::string bad = page;
    std::memcpy(&bad[offset], &v, 2);
    return bad;
  };
  // Page header (LMDB 0.9): pgno 0-7, pad 8-9, flags 10-11, lower 12-13, upper 14-15.
  uint16_t lower = 0, upper = 0, node_at = 0;
  std::memcpy(&lower, &page[12], 2);
  std::memcpy(&upper, &page[14], 2);
  std::memcpy(&node_at, &page[16 + 2 * spot.node], 2);
  refused(with(0, static_cast<uint16_t>(spot.pgno + 1)), spot, nullptr, "another page number");
  refused(with(10, 0x01), spot, nullptr, "a branch page");
  refused(with(10, 0x04), spot, nullptr, "an overflow page");
  refused(with(12, static_cast<uint16_t>(lower - 2)), spot, nullptr, "one node fewer");
  refused(with(12, static_cast<uint16_t>(upper + 2)), spot, nullptr, "bounds that cross");
  refused(with(16 + 2 * spot.node, static_cast<uint16_t>(format.page_size - 4)), spot, nullptr, "a node past the page");
  refused(with(16 + 2 * spot.node, static_cast<uint16_t>(upper - 2)), spot, nullptr, "a node in the free space");
  refused(with(node_at + 4, 0x01), spot, nullptr, "an overflow node");
  refused(with(node_at + 2, 1), spot, nullptr, "a value past the page");
  refused(with(node_at + 6, 4000), spot, nullptr, "a key past the page");
  const std::string other = RecordKey(21);
  refused(page, spot, &other, "another key");
  LeafSpot shorter = spot;
  shorter.nodes -= 1;
  refused(page, shorter, nullptr, "a leaf of another node count");
  uint32_t at = 0, size = 0;
  EXPECT_OK(LeafValue(page.data(), spot, format, &key, w.location.data_path, &at, &size));
}

// Appended records of one size (as converters write them) make every leaf
// regular: each record's node is where the table computes it, and a node
// that is not that record's is refused.
TEST(LeafTableTest, AppendedRecordsLieWhereTheRegularLeavesSay) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 3000, 64);
  Walked w;
  Walk(dir.Sub("db"), &w);
  EXPECT_EQ(w.leaves.regular_leaves(), w.leaves.leaves());
  const std::string data = testing::ReadAll(w.location.data_path);
  const LeafShape& shape = w.leaves.shape();
  ExpectRegularLeaves(w, 3000, data, /*keys=*/true);
  LeafSpot spot;
  ASSERT_TRUE(w.leaves.Find(100, &spot));
  const std::string other = RecordKey(101);
  Status s = LeafNodeCheck(data.data() + spot.node_offset, spot, shape, kFormat, &other, w.location.data_path);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find(w.location.data_path), std::string::npos) << s.message();
  for (size_t at : {size_t{0}, size_t{2}, size_t{4}, size_t{6}}) {  // size, its high half, flags, key size
    std::string node = data.substr(spot.node_offset, shape.node_head + shape.value_size);
    node[at] ^= 1;
    EXPECT_EQ(LeafNodeCheck(node.data(), spot, shape, kFormat, nullptr, w.location.data_path).code(), Status::Code::kCorruption)
        << at;
  }
}

// Appended values on overflow pages (2 KiB with 4 KiB pages): each leaf's
// runs follow each other, so a record's run is computed, and read with its
// page header, which is checked.
TEST(LeafTableTest, AppendedOverflowValuesLieWhereTheTableComputesThem) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 1500, 2048);
  Walked w;
  Walk(dir.Sub("db"), &w);
  ASSERT_TRUE(w.leaves.shape().overflow());
  EXPECT_EQ(w.leaves.shape().stride, 1u);  // one page a value
  EXPECT_EQ(w.leaves.regular_leaves(), w.leaves.leaves());
  EXPECT_EQ(w.leaves.MemoryBytes(), w.leaves.leaves() * kOverflowLeafEntryBytes);
  const std::string data = testing::ReadAll(w.location.data_path);
  const LeafShape& shape = w.leaves.shape();
  ExpectRegularLeaves(w, 1500, data, /*keys=*/false);
  LeafTable back;
  ASSERT_OK(LeafTable::Decode(w.leaves.Encode(), 1500, kFormat, "x.idx", &back));
  LeafSpot spot, again;
  ASSERT_TRUE(w.leaves.Find(700, &spot));
  ASSERT_TRUE(back.Find(700, &again));
  EXPECT_EQ(spot.value_offset, again.value_offset);
  for (size_t at : {size_t{0}, size_t{10}, size_t{12}}) {  // page number, flags, run length
    std::string head = data.substr(spot.node_offset, 16);
    head[at] ^= (at == 12 ? 1 : 4);
    if (at == 12) head[12] = 0;  // a run of 0 pages
    EXPECT_EQ(LeafNodeCheck(head.data(), spot, shape, kFormat, nullptr, w.location.data_path).code(),
              Status::Code::kCorruption)
        << at;
  }
}

TEST(LeafTableTest, MetadataAndOverflowValuesLeaveTheirLeavesToTheIndex) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> records;
  for (uint64_t i = 0; i < 400; ++i) records.emplace_back(RecordKey(i), testing::RecordBytes(i, i == 200 ? 9000 : 40));
  records.emplace_back(std::string("\xff__meta", 7), "m");
  testing::WriteLmdb(dir.Sub("db"), records);
  DataLocation location;
  ASSERT_OK(ResolveLocation(dir.Sub("db"), &location));
  std::unique_ptr<LmdbEnv> env;
  ASSERT_OK(LmdbEnv::Open(location, false, "", &env));
  RecordIndex index;
  LeafTable leaves;
  ASSERT_OK(WalkIndex(*env, location, "", std::string_view("\xff__", 3), &index, &leaves));
  EXPECT_EQ(leaves.records(), 400u);
  LeafSpot spot;
  EXPECT_TRUE(leaves.Find(0, &spot));
  EXPECT_FALSE(leaves.Find(200, &spot)) << "its leaf holds an overflow value";
  EXPECT_FALSE(leaves.Find(399, &spot)) << "its leaf holds the metadata";
  EXPECT_LT(leaves.usable_leaves(), leaves.leaves());
}

}  // namespace
}  // namespace lmdbloader
