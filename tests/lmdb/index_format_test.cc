#include "lmdb/index_format.h"

#include <cstring>

#include "base/checksum.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

IndexHeader Header(uint64_t records, bool numbered) {
  IndexHeader h;
  h.flags = (numbered ? 1u : 0u) | 2u | (4u << 16);
  h.identity = FileIdentity{1, 2, 1 << 20, 3, 4, 4096, 5};
  h.db_name = "db";
  h.records = records;
  h.entry_size = numbered ? kNarrowEntry : kWideEntry;
  h.entries_offset = kIndexPage;
  h.blob_offset = kIndexPage + EntryPagesBytes(records, h.entry_size);
  h.blob_bytes = numbered ? 0 : 10;
  h.meta_offset = h.blob_offset + (numbered ? 0 : kIndexPage);
  h.meta_bytes = 8;
  h.leaf_offset = h.meta_offset + h.meta_bytes;
  h.leaf_bytes = 16;  // two leaves
  h.file_size = h.leaf_offset + h.leaf_bytes;
  return h;
}

TEST(IndexFormatTest, HeaderRoundTripsAndChecksItsSections) {
  for (bool numbered : {true, false}) {
    const IndexHeader h = Header(1000, numbered);
    const std::string page = EncodeIndexHeader(h);
    ASSERT_EQ(page.size(), kIndexPage);
    IndexHeader back;
    ASSERT_OK(DecodeIndexHeader(page, "x.idx", h.file_size, &back));
    EXPECT_EQ(back.records, 1000u);
    EXPECT_EQ(back.db_name, "db");
    EXPECT_EQ(back.db_flags(), 4u);
    EXPECT_EQ(back.sequential_keys(), numbered);
    EXPECT_TRUE(back.identity == h.identity);
    // A file of another size than the header gives.
    Status s = DecodeIndexHeader(page, "x.idx", h.file_size + 1, &back);
    EXPECT_EQ(s.code(), Status::Code::kCorruption);
    EXPECT_NE(s.message().find("x.idx"), std::string::npos);
    // Any flipped byte of the header.
    for (size_t at : {size_t{0}, size_t{9}, size_t{40}, size_t{kIndexPage - 1}}) {
      std::string bad = page;
      bad[at] ^= 1;
      EXPECT_FALSE(DecodeIndexHeader(bad, "x.idx", h.file_size, &back).ok()) << at;
    }
  }
}

TEST(IndexFormatTest, EntriesSitWholeInTheirPages) {
  const IndexHeader wide = Header(1000, false);
  EXPECT_EQ(wide.entries_per_page(), 170u);
  EXPECT_EQ(wide.EntryOffset(169) + kWideEntry, kIndexPage + 170 * kWideEntry);
  EXPECT_EQ(wide.EntryOffset(170), 2 * kIndexPage);
  const IndexHeader narrow = Header(1000, true);
  EXPECT_EQ(narrow.EntryOffset(256), 2 * kIndexPage);
}

TEST(IndexFormatTest, AnEntryIsCheckedAgainstItsRecordAndBounds) {
  const IndexHeader h = Header(1000, false);
  char bytes[kWideEntry];
  IndexEntry e{4096, 100, 3, 5};
  EncodeIndexEntry(e, 7, kWideEntry, bytes);
  IndexEntry back;
  ASSERT_OK(DecodeIndexEntry(bytes, 7, h, "x.idx", &back));
  EXPECT_EQ(back.offset, 4096u);
  EXPECT_EQ(back.size, 100u);
  EXPECT_EQ(back.key_begin, 3u);
  EXPECT_EQ(back.key_size, 5u);
  // Read as another record's entry: refused.
  EXPECT_EQ(DecodeIndexEntry(bytes, 8, h, "x.idx", &back).code(), Status::Code::kCorruption);
  // Past the data file, or past the keys, even with a valid check.
  EncodeIndexEntry(IndexEntry{(1 << 20) - 10, 100, 0, 1}, 7, kWideEntry, bytes);
  EXPECT_EQ(DecodeIndexEntry(bytes, 7, h, "x.idx", &back).code(), Status::Code::kCorruption);
  EncodeIndexEntry(IndexEntry{0, 1, 8, 5}, 7, kWideEntry, bytes);
  Status s = DecodeIndexEntry(bytes, 7, h, "x.idx", &back);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find("record 7"), std::string::npos) << s.message();
}

TEST(IndexFormatTest, MetadataRoundTripsAndIsChecked) {
  std::map<std::string, ValueLocation> meta{{"a", {1, 2}}, {"bb", {3, 4}}};
  const std::string bytes = EncodeIndexMeta(meta);
  IndexHeader h = Header(1, true);
  h.meta_sum = Checksum(bytes.data(), bytes.size());
  std::map<std::string, ValueLocation> back;
  ASSERT_OK(DecodeIndexMeta(bytes, h, "x.idx", &back));
  EXPECT_EQ(back.at("bb").offset, 3u);
  h.meta_sum ^= 1;
  EXPECT_EQ(DecodeIndexMeta(bytes, h, "x.idx", &back).code(), Status::Code::kCorruption);
}

}  // namespace
}  // namespace lmdbloader
