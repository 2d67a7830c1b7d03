#include "reader/set_listing.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "lmdbloader/reader.h"
#include "reader_test_util.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;

using testing::MemberRecords;
std::string ValueOf(int f, int r) { return testing::MemberValue(f, r); }

// The folder's mtime 10 s back: a folder changed within the last second is
// not trusted to a listing (set_listing.h).
void Settle(const std::string& dir) {
  std::filesystem::last_write_time(dir, std::filesystem::file_time_type::clock::now() - std::chrono::seconds(10));
}

// `files` single-file databases chunk-NNNNN.lmdb of `per` records in `dir`, settled.
void WriteSet(const std::string& dir, int files, int per) {
  std::filesystem::create_directories(dir);
  for (int f = 0; f < files; ++f) {
    char name[32];
    std::snprintf(name, sizeof(name), "chunk-%05d.lmdb", f);
    testing::WriteLmdb(dir + "/" + name, MemberRecords(f, per), "", /*nosubdir=*/true);
  }
  Settle(dir);
}

// A settled folder of `files` members of `per` records (WriteSet), and
// options whose index_dir (where the listing goes) is beside it.
struct ListedSet {
  ListedSet(int files, int per) : set(dir.Sub("set")) {
    WriteSet(set, files, per);
    options.index_dir = dir.Sub("cache");
  }
  TempDir dir;
  std::string set;
  ReaderOptions options;
  std::unique_ptr<Reader> r;
};

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Overwrites `path` in place (same inode, as `cp` onto it or rsync --inplace
// do) with a database of `records` records of file `f`.
void RewriteInPlace(const std::string& scratch, const std::string& path, int f, int records) {
  testing::WriteLmdb(scratch, MemberRecords(f, records), "", /*nosubdir=*/true);
  testing::WriteAll(path, testing::ReadAll(scratch));
}

TEST(SetListingTest, EncodesAndDecodesAndRefusesEveryDamage) {
  SetListing l;
  l.source.kind = SetKind::kFolder;
  l.source.name = l.source.folder = "/data/set";
  l.source.dir_device = 7;
  l.source.dir_mtime_ns = 123;
  l.source.dir_stat_ok = true;
  l.db_name = "train";
  l.data_bytes = 99;
  l.paths = MemberPaths({"/data/set/a.lmdb", "/data/set/b.lmdb"});
  l.records = {3, 5};
  l.identities = {{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}};
  const std::string bytes = EncodeSetListing(l);
  SetListing back;
  ASSERT_OK(DecodeSetListing(bytes, "x.lst", &back));
  EXPECT_EQ(back.paths[1], "/data/set/b.lmdb");
  EXPECT_EQ(back.records, l.records);
  EXPECT_TRUE(back.identities[1] == l.identities[1]);
  EXPECT_TRUE(SameSetSource(back.source, l.source));
  EXPECT_EQ(back.db_name, "train");
  // Every cut, and every byte changed, is refused naming the file.
  for (size_t n = 0; n < bytes.size(); ++n) {
    Status s = DecodeSetListing(bytes.substr(0, n), "x.lst", &back);
    ASSERT_FALSE(s.ok()) << n;
    EXPECT_TRUE(Contains(s.message(), "x.lst")) << s.message();
  }
  for (size_t at = 0; at < bytes.size(); ++at) {
    std::string bad = bytes;
    bad[at] ^= 0x20;
    EXPECT_FALSE(DecodeSetListing(bad, "x.lst", &back).ok()) << at;
  }
}

TEST(SetListingTest, LoadSaysMissingEmptyAndCutApart) {
  TempDir dir;
  SetListing l;
  l.source.kind = SetKind::kList;
  l.source.name = "list";
  l.paths = MemberPaths({"/data/a.lmdb"});
  l.records = {4};
  l.identities = {{1, 2, 3, 4, 5, 6}};
  const std::string path = dir.path() + "/set.lst";
  SetListing back;
  EXPECT_EQ(LoadSetListing(path, &back).code(), Status::Code::kNotFound);
  ASSERT_OK(SaveSetListing(path, l));
  ASSERT_OK(LoadSetListing(path, &back));
  EXPECT_EQ(back.records, l.records);
  // Cut in place (same inode): read as damaged, never a fault past its end.
  const std::string bytes = testing::ReadAll(path);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(bytes.size() / 2)), 0);
  Status cut = LoadSetListing(path, &back);
  EXPECT_EQ(cut.code(), Status::Code::kCorruption) << cut.message();
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  EXPECT_EQ(LoadSetListing(path, &back).code(), Status::Code::kCorruption);
  EXPECT_FALSE(LoadSetListing(dir.path(), &back).ok());
}

TEST(SetListingTest, ASecondOpenReadsNoMemberAndAChangedMemberIsNamedAtItsRead) {
  ListedSet fixture(4, 3);
  auto& [dir, set, options, r] = fixture;
  ASSERT_OK(Reader::Open(set, options, &r));
  EXPECT_TRUE(Contains(r->stats().index_source, "saved to")) << r->stats().index_source;
  ASSERT_OK(Reader::Open(set, options, &r));
  EXPECT_TRUE(Contains(r->stats().index_source, "saved listing")) << r->stats().index_source;
  ASSERT_EQ(r->size(), 12u);
  std::string v;
  for (int i = 0; i < 12; ++i) {
    ASSERT_OK(r->Read(i, &v));
    EXPECT_EQ(v, ValueOf(i / 3, i % 3));
  }
  // A member damaged in place (the folder's times do not move): the open
  // reads no member, so it succeeds; that member's read names it.
  testing::WriteAll(set + "/chunk-00001.lmdb", std::string(9000, 'j'));
  ASSERT_OK(Reader::Open(set, options, &r));
  EXPECT_EQ(r->size(), 12u);
  ASSERT_OK(r->Read(0, &v));
  Status s = r->Read(4, &v);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_TRUE(Contains(s.message(), set + "/chunk-00001.lmdb")) << s.message();
  EXPECT_TRUE(Contains(s.message(), "listing is deleted")) << s.message();
  // The next open counts again, and says what a walk says.
  s = Reader::Open(set, options, &r);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_TRUE(Contains(s.message(), set + "/chunk-00001.lmdb")) << s.message();
  options.skip_bad_files = true;
  ASSERT_OK(Reader::Open(set, options, &r));
  EXPECT_EQ(r->size(), 9u);
  EXPECT_EQ(r->stats().files_skipped, 1u);
}

TEST(SetListingTest, AMemberRewrittenInPlaceIsNeverReadAtOldPositions) {
  ListedSet fixture(3, 3);
  auto& [dir, set, options, r] = fixture;
  ASSERT_OK(Reader::Open(set, options, &r));
  // Another count: the read refuses it (positions after it would move).
  RewriteInPlace(dir.Sub("other.lmdb"), set + "/chunk-00001.lmdb", 7, 5);
  ASSERT_OK(Reader::Open(set, options, &r));
  std::string v;
  Status s = r->Read(3, &v);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_TRUE(Contains(s.message(), set + "/chunk-00001.lmdb")) << s.message();
  EXPECT_TRUE(Contains(s.message(), "listing")) << s.message();
  ASSERT_OK(Reader::Open(set, options, &r));  // counted again
  EXPECT_EQ(r->size(), 11u);
  ASSERT_OK(r->Read(7, &v));
  EXPECT_EQ(v, ValueOf(7, 4));
  // The same count, other records: read as a fresh count reads them.
  ASSERT_OK(Reader::Open(set, options, &r));
  EXPECT_TRUE(Contains(r->stats().index_source, "saved listing"));
  RewriteInPlace(dir.Sub("other2.lmdb"), set + "/chunk-00002.lmdb", 9, 3);
  ASSERT_OK(Reader::Open(set, options, &r));
  ASSERT_OK(r->Read(8, &v));
  EXPECT_EQ(v, ValueOf(9, 0));
  ASSERT_OK(Reader::Open(set, options, &r));
  EXPECT_TRUE(Contains(r->stats().index_source, "meta pages")) << r->stats().index_source;
}

TEST(SetListingTest, AMemberAddedOrDeletedIsSeenByTheFolder) {
  ListedSet fixture(3, 2);
  auto& [dir, set, options, r] = fixture;
  ASSERT_OK(Reader::Open(set, options, &r));
  testing::WriteLmdb(set + "/chunk-00009.lmdb", {{"k", "added"}}, "", true);
  ASSERT_OK(Reader::Open(set, options, &r));
  EXPECT_EQ(r->size(), 7u);
  std::string v;
  ASSERT_OK(r->Read(6, &v));
  EXPECT_EQ(v, "added");
  Settle(set);
  ASSERT_OK(Reader::Open(set, options, &r));
  ASSERT_OK(Reader::Open(set, options, &r));
  EXPECT_TRUE(Contains(r->stats().index_source, "saved listing"));
  std::filesystem::remove(set + "/chunk-00000.lmdb");
  ASSERT_OK(Reader::Open(set, options, &r));
  EXPECT_EQ(r->size(), 5u);
  ASSERT_OK(r->Read(0, &v));
  EXPECT_EQ(v, ValueOf(1, 0));
  // index_dir "none": nothing saved, every open counts.
  options.index_dir = "none";
  ASSERT_OK(Reader::Open(set, options, &r));
  ASSERT_OK(Reader::Open(set, options, &r));
  EXPECT_TRUE(Contains(r->stats().index_source, "meta pages"));
}

TEST(SetListingTest, AListAndAGlobAreTheirOwnKeys) {
  ListedSet fixture(3, 2);
  auto& [dir, set, options, r] = fixture;
  const std::vector<std::string> list = {set + "/chunk-00002.lmdb", set + "/chunk-00000.lmdb"};
  ASSERT_OK(Reader::Open(list, options, &r));
  ASSERT_OK(Reader::Open(list, options, &r));
  EXPECT_TRUE(Contains(r->stats().index_source, "saved listing"));
  std::string v;
  ASSERT_OK(r->Read(2, &v));
  EXPECT_EQ(v, ValueOf(0, 0));
  ASSERT_OK(Reader::Open({list[1], list[0]}, options, &r));  // another order, another set
  EXPECT_TRUE(Contains(r->stats().index_source, "meta pages"));
  ASSERT_OK(r->Read(2, &v));
  EXPECT_EQ(v, ValueOf(2, 0));
  ASSERT_OK(Reader::Open(set + "/chunk-0000[01]*", options, &r));
  ASSERT_OK(Reader::Open(set + "/chunk-0000[01]*", options, &r));
  EXPECT_TRUE(Contains(r->stats().index_source, "saved listing"));
  EXPECT_EQ(r->size(), 4u);
  // Relative paths from another working directory are another set.
  SetSource list_source;
  const std::string here = SetListingPath(list_source, {"a.lmdb"}, "", options);
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(set.c_str()), 0);
  const std::string there = SetListingPath(list_source, {"a.lmdb"}, "", options);
  ASSERT_EQ(::chdir(cwd), 0);
  EXPECT_NE(here, there);
  EXPECT_EQ(SetListingPath(list_source, {"/a.lmdb"}, "", options), SetListingPath(list_source, {"/a.lmdb"}, "", options));
  // A damaged listing is counted past and written again.
  for (const auto& e : std::filesystem::directory_iterator(dir.Sub("cache")))
    if (e.path().extension() == ".lst") testing::WriteAll(e.path().string(), "LMDBLSET garbage");
  ASSERT_OK(Reader::Open(set + "/chunk-0000[01]*", options, &r));
  EXPECT_TRUE(Contains(r->stats().index_source, "saved to"));
  EXPECT_EQ(r->size(), 4u);
}

}  // namespace
}  // namespace lmdbloader
