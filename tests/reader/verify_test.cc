// VerifyDatabase (`lmdbloader verify`): a sound corpus or LMDB has no
// problem; one changed byte in a corpus's record or metadata is one problem
// naming the file and the record or value; a plain LMDB has no checksums, so
// only its structure is checked; a file that cannot be walked is an error.
#include "lmdbloader/verify.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <msgpack.hpp>

#include "lmdbloader/convert.h"
#include "lmdbloader/reader.h"
#include "lmdbloader/shard_set.h"
#include "lmdbloader/writer.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::ReadAll;

using testing::TempDir;
namespace fs = std::filesystem;

constexpr size_t kValue = 3000;

// Record i as `convert` writes it: a msgpack map of the image's bytes and a label.
std::string MapRecord(uint64_t i) {
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  pk.pack_map(2);
  pk.pack(std::string("image"));
  const std::string bytes = testing::RecordBytes(i, kValue);
  pk.pack_bin(static_cast<uint32_t>(bytes.size()));
  pk.pack_bin_body(bytes.data(), static_cast<uint32_t>(bytes.size()));
  pk.pack(std::string("label"));
  pk.pack(static_cast<int>(i % 3));
  return std::string(b.data(), b.size());
}

void WriteCorpus(const std::string& path, int records, bool maps = true, const std::string& manifest = "{}") {
  std::unique_ptr<CorpusWriter> w;
  ASSERT_OK(CorpusWriter::Create(path, WriterOptions(), &w));
  for (int i = 0; i < records; ++i)
    ASSERT_OK(w->Add("r" + std::to_string(i), maps ? MapRecord(i) : testing::RecordBytes(i, kValue),
                     {{"label", i % 3}}));
  ASSERT_OK(w->Finish(manifest));
}

// Flips one bit at `at` in every copy of `needle` in the file (the last
// commit leaves an older copy of some pages, which the older meta points to).
void FlipInside(const std::string& path, const std::string& needle, size_t at) {
  const std::string bytes = ReadAll(path);
  size_t pos = bytes.find(needle);
  ASSERT_NE(pos, std::string::npos) << "needle not in " << path;
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  for (; pos != std::string::npos; pos = bytes.find(needle, pos + 1)) {
    char c = static_cast<char>(bytes[pos + at] ^ 0x10);
    ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(pos + at)), 1);
  }
  ::close(fd);
}

VerifyReport Verify(const std::string& path, ReaderOptions options = ReaderOptions()) {
  VerifyReport report;
  Status s = VerifyDatabase(path, options, &report);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return report;
}

std::string Joined(const VerifyReport& r) {
  std::string out;
  for (const std::string& p : r.problems) out += p + "\n";
  return out;
}

TEST(VerifyTest, ASoundCorpusAndASoundLmdbHaveNoProblem) {
  TempDir dir;
  WriteCorpus(dir.Sub("c"), 60);
  VerifyReport r = Verify(dir.Sub("c"));
  EXPECT_TRUE(r.opened);
  EXPECT_EQ(r.records, 60u);
  EXPECT_TRUE(r.problems.empty()) << Joined(r);
  testing::WriteNumberedLmdb(dir.Sub("plain"), 80, 5000);  // values on overflow pages
  r = Verify(dir.Sub("plain"));
  EXPECT_TRUE(r.opened);
  EXPECT_EQ(r.records, 80u);
  EXPECT_TRUE(r.problems.empty()) << Joined(r);
  // A named database is verified when named.
  testing::WriteLmdb(dir.Sub("named"), {{"a", "1"}, {"b", "22"}, {"c", "333"}}, "things");
  ReaderOptions o;
  o.db_name = "things";
  r = Verify(dir.Sub("named"), o);
  EXPECT_EQ(r.records, 3u);
  EXPECT_TRUE(r.problems.empty()) << Joined(r);
}

TEST(VerifyTest, OneChangedByteInARecordIsOneProblemNamingTheRecordAndTheFile) {
  for (AccessMode mode : {AccessMode::kPread, AccessMode::kMmap}) {
    for (ChecksumPolicy policy : {ChecksumPolicy::kEveryRead, ChecksumPolicy::kFirstRead}) {
      SCOPED_TRACE(std::string(mode == AccessMode::kPread ? "pread" : "mmap") +
                   (policy == ChecksumPolicy::kFirstRead ? ", checked once" : ", every read"));
      TempDir dir;
      WriteCorpus(dir.Sub("c"), 40);
      FlipInside(dir.Sub("c/data.mdb"), testing::RecordBytes(7, kValue), 1234);
      ReaderOptions o;
      o.mode = mode;
      o.verify_checksums = policy;
      VerifyReport r = Verify(dir.Sub("c"), o);
      EXPECT_TRUE(r.opened);
      EXPECT_EQ(r.records, 40u);  // every record still counted and read
      ASSERT_EQ(r.problems.size(), 1u) << Joined(r);
      EXPECT_EQ(r.problems[0].rfind("record 7: ", 0), 0u) << r.problems[0];
      EXPECT_NE(r.problems[0].find(dir.Sub("c/data.mdb")), std::string::npos) << r.problems[0];
      EXPECT_NE(r.problems[0].find("checksum"), std::string::npos) << r.problems[0];
    }
  }
}

TEST(VerifyTest, SkippingChecksumsIsRefusedRatherThanAnsweredUnchecked) {
  TempDir dir;
  WriteCorpus(dir.Sub("c"), 10);
  FlipInside(dir.Sub("c/data.mdb"), testing::RecordBytes(3, kValue), 99);
  ReaderOptions o;
  o.verify_checksums = ChecksumPolicy::kOff;
  VerifyReport r;
  Status s = VerifyDatabase(dir.Sub("c"), o, &r);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find(dir.Sub("c")), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("verify_checksums=false"), std::string::npos) << s.ToString();
}

TEST(VerifyTest, APlainLmdbHasNoChecksumsToSkipSoTheRequestChangesNothing) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), {{"a", "1"}, {"b", "2"}});
  ReaderOptions o;
  o.verify_checksums = ChecksumPolicy::kOff;
  VerifyReport r;
  ASSERT_OK(VerifyDatabase(dir.Sub("db"), o, &r));
  EXPECT_EQ(r.records, 2u);
  EXPECT_TRUE(r.problems.empty()) << Joined(r);
}

TEST(VerifyTest, DamagedNamesOrColumnIsAProblemNamingTheValueNotARecord) {
  {
    SCOPED_TRACE("names");
    TempDir dir;
    WriteCorpus(dir.Sub("c"), 40);
    FlipInside(dir.Sub("c/data.mdb"), "r17r18r19", 1);  // "r17" becomes "r07"
    VerifyReport r = Verify(dir.Sub("c"));
    EXPECT_TRUE(r.opened);
    ASSERT_FALSE(r.problems.empty());
    for (const std::string& p : r.problems) {
      EXPECT_NE(p.find("names"), std::string::npos) << p;
      EXPECT_NE(p.find(dir.Sub("c/data.mdb")), std::string::npos) << p;
      EXPECT_EQ(p.find("record "), std::string::npos) << p;
    }
  }
  {
    SCOPED_TRACE("label column");
    TempDir dir;
    WriteCorpus(dir.Sub("c"), 300);
    std::string column;
    {
      std::unique_ptr<Reader> reader;
      ASSERT_OK(Reader::Open(dir.Sub("c"), ReaderOptions(), &reader));
      ASSERT_OK(reader->ReadColumn("label", &column));
    }
    FlipInside(dir.Sub("c/data.mdb"), column.substr(0, 64), 9);
    VerifyReport r = Verify(dir.Sub("c"));
    ASSERT_FALSE(r.problems.empty());
    for (const std::string& p : r.problems) {
      EXPECT_NE(p.find("column/label"), std::string::npos) << p;
      EXPECT_NE(p.find(dir.Sub("c/data.mdb")), std::string::npos) << p;
    }
  }
  {
    SCOPED_TRACE("another column: only the manifest's checksums show it");
    TempDir dir;
    std::unique_ptr<CorpusWriter> w;
    ASSERT_OK(CorpusWriter::Create(dir.Sub("c"), WriterOptions(), &w));
    for (int i = 0; i < 300; ++i) ASSERT_OK(w->Add("r" + std::to_string(i), MapRecord(i), {{"score", i * 0.37}}));
    ASSERT_OK(w->Finish("{}"));
    std::string column;
    {
      std::unique_ptr<Reader> reader;
      ASSERT_OK(Reader::Open(dir.Sub("c"), ReaderOptions(), &reader));
      ASSERT_OK(reader->ReadColumn("score", &column));
    }
    FlipInside(dir.Sub("c/data.mdb"), column.substr(80, 64), 9);
    VerifyReport r = Verify(dir.Sub("c"));
    ASSERT_EQ(r.problems.size(), 1u) << Joined(r);
    EXPECT_NE(r.problems[0].find("column/score"), std::string::npos) << r.problems[0];
    EXPECT_NE(r.problems[0].find(dir.Sub("c/data.mdb")), std::string::npos) << r.problems[0];
  }
  {
    SCOPED_TRACE("manifest: the corpus does not open");
    TempDir dir;
    WriteCorpus(dir.Sub("c"), 10);
    FlipInside(dir.Sub("c/data.mdb"), "lmdbloader-corpus", 3);
    VerifyReport r = Verify(dir.Sub("c"));
    EXPECT_FALSE(r.opened);
    EXPECT_EQ(r.records, 0u);
    ASSERT_EQ(r.problems.size(), 1u) << Joined(r);
    EXPECT_NE(r.problems[0].find(dir.Sub("c/data.mdb")), std::string::npos) << r.problems[0];
  }
}

// Records are msgpack maps unless the manifest's schema says "as-is": other
// bytes are a problem each, at most kMaxProblems of them.
TEST(VerifyTest, RecordsThatAreNotMsgpackMapsAreProblemsUpToTheLimit) {
  TempDir dir;
  WriteCorpus(dir.Sub("raw"), 150, /*maps=*/false);
  VerifyReport r = Verify(dir.Sub("raw"));
  EXPECT_EQ(r.records, 150u);
  ASSERT_EQ(r.problems.size(), VerifyReport::kMaxProblems);
  EXPECT_EQ(r.problems[0].rfind("record 0: ", 0), 0u) << r.problems[0];
  EXPECT_NE(r.problems[0].find("msgpack"), std::string::npos) << r.problems[0];
  EXPECT_EQ(r.problems[99].rfind("record 99: ", 0), 0u) << r.problems[99];
  // The same bytes declared as stored as they were are sound.
  WriteCorpus(dir.Sub("as_is"), 150, /*maps=*/false, R"({"schema": {"encoding": "as-is"}})");
  r = Verify(dir.Sub("as_is"));
  EXPECT_TRUE(r.problems.empty()) << Joined(r);
  // A msgpack value that is not a map (an array here) is named as such.
  std::unique_ptr<CorpusWriter> w;
  ASSERT_OK(CorpusWriter::Create(dir.Sub("array"), WriterOptions(), &w));
  ASSERT_OK(w->Add("a", MapRecord(0)));
  ASSERT_OK(w->Add("b", std::string("\x92\x01\x02", 3)));  // [1, 2]
  ASSERT_OK(w->Finish("{}"));
  r = Verify(dir.Sub("array"));
  ASSERT_EQ(r.problems.size(), 1u) << Joined(r);
  EXPECT_EQ(r.problems[0], "record 1: not a msgpack map");
}

// A plain LMDB carries no checksums: a changed value byte is not seen (the
// value is read back as it is), but damaged page structure is.
TEST(VerifyTest, APlainLmdbIsCheckedForStructureOnly) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 30, 6000);
  const std::string data = dir.Sub("db/data.mdb");
  FlipInside(data, testing::RecordBytes(11, 6000), 100);
  VerifyReport r = Verify(dir.Sub("db"));
  EXPECT_TRUE(r.opened);
  EXPECT_EQ(r.records, 30u);
  EXPECT_TRUE(r.problems.empty()) << Joined(r);
  // The overflow page run holding record 12 no longer says it is one.
  std::string bytes = ReadAll(data);
  const size_t at = bytes.find(testing::RecordBytes(12, 6000));
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(at % static_cast<size_t>(::sysconf(_SC_PAGESIZE)), 16u);  // an overflow page's data follows its header
  int fd = ::open(data.c_str(), O_WRONLY);
  const char leaf = 0x02;
  ASSERT_EQ(::pwrite(fd, &leaf, 1, static_cast<off_t>(at - 16 + 10)), 1);  // mp_flags
  ::close(fd);
  r = Verify(dir.Sub("db"));
  ASSERT_FALSE(r.problems.empty());
  EXPECT_NE(r.problems[0].find(data), std::string::npos) << r.problems[0];
}

// `convert --from lmdb` keeps an LMDB's keys, packed integers included, as
// the names of a corpus keyed by names: such names need not be UTF-8.
TEST(VerifyTest, ACorpusKeyedByBinaryNamesVerifies) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> records;
  for (uint32_t i = 0; i < 50; ++i) {
    uint32_t k = 0xfffffff0u - i * 0x01010101u;  // bytes >= 0x80: not UTF-8
    records.emplace_back(std::string(reinterpret_cast<char*>(&k), 4), testing::RecordBytes(i, 700));
  }
  testing::WriteLmdb(dir.Sub("src"), records, "", false, 0);
  ConvertOptions o;
  o.source_kind = SourceKind::kLmdb;
  o.source = dir.Sub("src");
  o.output = dir.Sub("c");
  ConvertSummary summary;
  ASSERT_OK(Convert(o, &summary));
  VerifyReport r = Verify(dir.Sub("c"));
  EXPECT_TRUE(r.opened);
  EXPECT_EQ(r.records, 50u);
  EXPECT_TRUE(r.problems.empty()) << Joined(r);
  // Damage still shows: the records carry checksums like any corpus's.
  FlipInside(dir.Sub("c/data.mdb"), testing::RecordBytes(20, 700), 50);
  r = Verify(dir.Sub("c"));
  ASSERT_EQ(r.problems.size(), 1u) << Joined(r);
  EXPECT_NE(r.problems[0].find("checksum"), std::string::npos) << r.problems[0];
}

// In a shard set, a damaged record is named by its position in the set and
// the file of the part that holds it.
TEST(VerifyTest, AShardSetNamesThePartAndTheRecordsPositionInTheSet) {
  TempDir dir;
  for (int c = 0; c < 2; ++c) {
    fs::create_directories(dir.Sub("src/class_" + std::to_string(c)));
    for (int i = 0; i < 5; ++i)
      std::ofstream(dir.Sub("src/class_" + std::to_string(c) + "/img" + std::to_string(i) + ".jpg"),
                    std::ios::binary)
          << testing::RecordBytes(c * 100 + i, 900);
  }
  ConvertOptions o;
  o.source = dir.Sub("src");
  o.output = dir.Sub("set");
  o.num_shards = 3;  // records [0, 3), [3, 6), [6, 10)
  ConvertSummary summary;
  ASSERT_OK(Convert(o, &summary));
  VerifyReport r = Verify(dir.Sub("set"));
  EXPECT_EQ(r.records, 10u);
  EXPECT_TRUE(r.problems.empty()) << Joined(r);
  const std::string part = dir.Sub("set/" + ShardName(1, 3) + "/data.mdb");
  FlipInside(part, testing::RecordBytes(4, 900), 500);  // class_0/img4: record 4
  r = Verify(dir.Sub("set"));
  EXPECT_EQ(r.records, 10u);
  ASSERT_EQ(r.problems.size(), 1u) << Joined(r);
  EXPECT_EQ(r.problems[0].rfind("record 4: ", 0), 0u) << r.problems[0];
  EXPECT_NE(r.problems[0].find(part), std::string::npos) << r.problems[0];
}

TEST(VerifyTest, WhatCannotBeWalkedIsAnErrorOrAProblemNamingIt) {
  TempDir dir;
  VerifyReport report;
  Status s = VerifyDatabase(dir.Sub("nowhere"), ReaderOptions(), &report);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir.Sub("nowhere")), std::string::npos) << s.message();
  EXPECT_FALSE(report.opened);
  // A file that is not an LMDB: nothing opens, and the report says why.
  std::ofstream(dir.Sub("notes.txt")) << std::string(20000, 'x');
  VerifyReport r = Verify(dir.Sub("notes.txt"));
  EXPECT_FALSE(r.opened);
  ASSERT_FALSE(r.problems.empty());
  for (const std::string& p : r.problems) EXPECT_NE(p.find(dir.Sub("notes.txt")), std::string::npos) << p;
  // A corpus cut short: the walk's truncation is reported, never a crash.
  WriteCorpus(dir.Sub("cut"), 100);
  const std::string data = dir.Sub("cut/data.mdb");
  fs::resize_file(data, fs::file_size(data) / 2);
  r = Verify(dir.Sub("cut"));
  ASSERT_FALSE(r.problems.empty());
  EXPECT_NE(r.problems[0].find(data), std::string::npos) << r.problems[0];
  EXPECT_NE(Joined(r).find("truncated"), std::string::npos) << Joined(r);
}

// A folder of LMDBs, a glob, a list: each file verified, every problem
// naming its file, a bad file among sound ones not the end of the check.
TEST(VerifyTest, ASetOfFilesIsVerifiedFileByFileNamingEachBadOne) {
  TempDir dir;
  fs::create_directories(dir.Sub("set"));
  testing::WriteNumberedLmdb(dir.Sub("set/a"), 10, 6000);
  testing::WriteNumberedLmdb(dir.Sub("set/b"), 20, 6000);
  testing::WriteLmdb(dir.Sub("set/c.lmdb"), {{"k", "v"}}, "", /*nosubdir=*/true);
  VerifyReport r = Verify(dir.Sub("set"));
  EXPECT_TRUE(r.opened);
  EXPECT_EQ(r.records, 31u);
  EXPECT_EQ(r.files, 3u);
  EXPECT_TRUE(r.problems.empty()) << Joined(r);
  r = Verify(dir.Sub("set/[ab]"));
  EXPECT_EQ(r.records, 30u);
  EXPECT_TRUE(r.problems.empty()) << Joined(r);
  ASSERT_OK(VerifyDatabase({dir.Sub("set/c.lmdb"), dir.Sub("set/a")}, ReaderOptions(), &r));
  EXPECT_EQ(r.records, 11u);
  EXPECT_EQ(r.files, 2u);
  // b's page structure damaged (as in APlainLmdbIsCheckedForStructureOnly),
  // a folder named like an LMDB without data.mdb, a file that is none.
  const std::string data = dir.Sub("set/b/data.mdb");
  const std::string bytes = ReadAll(data);
  const size_t at = bytes.find(testing::RecordBytes(12, 6000));
  ASSERT_NE(at, std::string::npos);
  int fd = ::open(data.c_str(), O_WRONLY);
  const char leaf = 0x02;
  ASSERT_EQ(::pwrite(fd, &leaf, 1, static_cast<off_t>(at - 16 + 10)), 1);
  ::close(fd);
  fs::create_directories(dir.Sub("set/x.lmdb"));
  std::ofstream(dir.Sub("set/d.mdb")) << std::string(20000, 'x');
  r = Verify(dir.Sub("set"));
  EXPECT_FALSE(r.opened);
  EXPECT_EQ(r.files, 5u);
  EXPECT_EQ(r.records, 31u);  // a, b and c still read
  for (const char* bad : {"set/b/data.mdb", "set/x.lmdb looks like an LMDB folder but holds no data.mdb", "set/d.mdb"})
    EXPECT_NE(Joined(r).find(dir.Sub(bad)), std::string::npos) << bad << " in\n" << Joined(r);
  for (const std::string& p : r.problems)
    EXPECT_TRUE(p.find(dir.Sub("set/b")) != std::string::npos || p.find(dir.Sub("set/x.lmdb")) != std::string::npos ||
                p.find(dir.Sub("set/d.mdb")) != std::string::npos)
        << p;
}

}  // namespace
}  // namespace lmdbloader
