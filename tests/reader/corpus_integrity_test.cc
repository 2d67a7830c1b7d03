// Integrity of corpora: record checksums checked on every read, damaged
// manifests, saved indexes and shard lists reported (or rebuilt), never
// trusted; a plain LMDB is never mistaken for a corpus.
#include <fcntl.h>
#include <lmdb.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/checksum.h"
#include "corpus/corpus_format.h"
#include "lmdb/index_file.h"
#include "lmdbloader/reader.h"
#include "lmdbloader/writer.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::ReadAll;

using testing::TempDir;

constexpr size_t kValue = 5000;

void WriteCorpus(const std::string& path, int records, const std::string& manifest = "{}") {
  std::unique_ptr<CorpusWriter> w;
  ASSERT_OK(CorpusWriter::Create(path, WriterOptions(), &w));
  for (int i = 0; i < records; ++i)
    ASSERT_OK(w->Add("r" + std::to_string(i), testing::RecordBytes(i, kValue), {{"label", i % 3}}));
  ASSERT_OK(w->Finish(manifest));
}

// Flips one bit of every occurrence of `needle` in the file, in place (same
// size; the mtime changes, so a saved index is rebuilt). Every one: the
// writer's last commit leaves a second copy of the page holding the manifest,
// which the older meta page still points to.
void FlipInside(const std::string& path, const std::string& needle, size_t at = 0) {
  std::string bytes = ReadAll(path);
  size_t pos = bytes.find(needle);
  ASSERT_NE(pos, std::string::npos) << "needle not in " << path;
  int fd = ::open(path.c_str(), O_WRONLY);
  for (; pos != std::string::npos; pos = bytes.find(needle, pos + 1)) {
    char c = static_cast<char>(bytes[pos + at] ^ 0x10);
    ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(pos + at)), 1);
  }
  ::close(fd);
}

Status OpenWith(const std::string& path, std::unique_ptr<Reader>* r, AccessMode mode = AccessMode::kPread,
                bool verify = true) {
  ReaderOptions o;
  o.mode = mode;
  o.verify_checksums = verify ? ChecksumPolicy::kEveryRead : ChecksumPolicy::kOff;
  return Reader::Open(path, o, r);
}

TEST(CorpusIntegrityTest, DamagedRecordIsCorruptionNamingRecordAndFileInBothModes) {
  TempDir dir;
  WriteCorpus(dir.Sub("c"), 40);
  FlipInside(dir.Sub("c/data.mdb"), testing::RecordBytes(7, kValue), 1234);
  for (AccessMode mode : {AccessMode::kPread, AccessMode::kMmap}) {
    std::unique_ptr<Reader> r;
    ASSERT_OK(OpenWith(dir.Sub("c"), &r, mode));
    std::string value;
    Status s = r->Read(7, &value);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find("record 7 of " + dir.Sub("c/data.mdb")), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("checksum"), std::string::npos) << s.message();
    ASSERT_OK(r->Read(8, &value));
    EXPECT_EQ(value, testing::RecordBytes(8, kValue));
    uint64_t indices[2] = {8, 7};
    std::string a(kValue, '\0'), b(kValue, '\0');
    char* dsts[2] = {a.data(), b.data()};
    EXPECT_EQ(r->ReadBatch(indices, 2, dsts).code(), Status::Code::kCorruption);
    if (mode == AccessMode::kMmap) {
      RecordView view;
      EXPECT_EQ(r->View(7, &view).code(), Status::Code::kCorruption);
    }
  }
  // Skipping the check hands out the damaged bytes, as asked.
  std::unique_ptr<Reader> r;
  ASSERT_OK(OpenWith(dir.Sub("c"), &r, AccessMode::kPread, /*verify=*/false));
  std::string value;
  ASSERT_OK(r->Read(7, &value));
  EXPECT_NE(value, testing::RecordBytes(7, kValue));
}

// ChecksumPolicy::kFirstRead: damage is caught on a record's first read (and on
// every read until one passes), then the record's bytes are trusted, in this
// process and in processes forked from it. Damage after the check that moves
// no timestamp (a decaying medium) is what it gives up.
TEST(CorpusIntegrityTest, CheckingOnceCatchesDamageOnFirstReadAndSharesWhatWasCheckedAcrossFork) {
  TempDir dir;
  for (AccessMode mode : {AccessMode::kPread, AccessMode::kMmap}) {
    const std::string corpus = dir.Sub(mode == AccessMode::kPread ? "p" : "m"), data = corpus + "/data.mdb";
    WriteCorpus(corpus, 40);
    FlipInside(data, testing::RecordBytes(7, kValue), 1234);
    ReaderOptions o;
    o.mode = mode;
    o.index_dir = "none";
    o.verify_checksums = ChecksumPolicy::kFirstRead;
    std::unique_ptr<Reader> once, every;
    ASSERT_OK(Reader::Open(corpus, o, &once));
    o.verify_checksums = ChecksumPolicy::kEveryRead;
    ASSERT_OK(Reader::Open(corpus, o, &every));
    std::string value;
    EXPECT_EQ(once->Read(7, &value).code(), Status::Code::kCorruption);
    EXPECT_EQ(once->Read(7, &value).code(), Status::Code::kCorruption);  // a failed check is not remembered
    const int checked = mode == AccessMode::kPread ? 9 : 19, first = checked + 2, second = checked + 3;
    ASSERT_OK(once->Read(checked, &value));
    pid_t pid = ::fork();
    if (pid == 0) {
      std::string v;
      ::_exit(once->Read(first, &v).ok() ? 0 : 1);  // checked in the child
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    // Damage written into the file (not a decaying medium, which moves no
    // timestamp) is seen by the check for files written since they were
    // indexed, before any checksum: checked records are refused too.
    FlipInside(data, testing::RecordBytes(checked, kValue), 100);
    FlipInside(data, testing::RecordBytes(first, kValue), 100);
    FlipInside(data, testing::RecordBytes(second, kValue), 100);
    for (int k : {checked, first, second}) {
      Status s = once->Read(k, &value);
      EXPECT_EQ(s.code(), Status::Code::kCorruption) << k;
      EXPECT_NE(s.message().find("changed since it was indexed"), std::string::npos) << s.message();
      EXPECT_EQ(every->Read(k, &value).code(), Status::Code::kCorruption) << k;
    }
    // A reader opened now reads the damaged file as it is: each record is
    // checked at its first read, and refused.
    std::unique_ptr<Reader> fresh;
    o.verify_checksums = ChecksumPolicy::kFirstRead;
    ASSERT_OK(Reader::Open(corpus, o, &fresh));
    for (int k : {checked, first, second}) EXPECT_EQ(fresh->Read(k, &value).code(), Status::Code::kCorruption) << k;
  }
}

TEST(CorpusIntegrityTest, DamagedManifestIsCorruptionNamingTheFile) {
  TempDir dir;
  WriteCorpus(dir.Sub("c"), 5);
  FlipInside(dir.Sub("c/data.mdb"), "lmdbloader-corpus", 3);
  std::unique_ptr<Reader> r;
  Status s = OpenWith(dir.Sub("c"), &r);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find(dir.Sub("c/data.mdb")), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("manifest"), std::string::npos) << s.message();
}

TEST(CorpusIntegrityTest, DamagedColumnIsCorruptionOnRead) {
  TempDir dir;
  WriteCorpus(dir.Sub("c"), 300);
  std::unique_ptr<Reader> r;
  ASSERT_OK(OpenWith(dir.Sub("c"), &r));
  std::string column;
  ASSERT_OK(r->ReadColumn("label", &column));
  r.reset();
  FlipInside(dir.Sub("c/data.mdb"), column.substr(0, 64), 9);
  ASSERT_OK(OpenWith(dir.Sub("c"), &r));
  Status s = r->ReadColumn("label", &column);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("column/label"), std::string::npos) << s.message();
}

TEST(CorpusIntegrityTest, SavedIndexWithAFlippedBitIsRebuiltNotTrusted) {
  TempDir dir;
  WriteCorpus(dir.Sub("c"), 40);
  const std::string idx = dir.Sub("c/lmdbloader.idx");
  std::string bytes = ReadAll(idx);
  ASSERT_GT(bytes.size(), 200u);
  int fd = ::open(idx.c_str(), O_WRONLY);
  char c = static_cast<char>(bytes[150] ^ 0x04);  // inside the offsets
  ASSERT_EQ(::pwrite(fd, &c, 1, 150), 1);
  ::close(fd);
  std::unique_ptr<Reader> r;
  ASSERT_OK(OpenWith(dir.Sub("c"), &r));
  EXPECT_EQ(r->stats().index_source.rfind("built", 0), 0u) << r->stats().index_source;
  std::string value;
  for (uint64_t i = 0; i < r->size(); ++i) {
    ASSERT_OK(r->Read(i, &value));
    EXPECT_EQ(value, testing::RecordBytes(i, kValue));
  }
}

// A saved index that passes every check of its own (checksum, identity,
// bounds) but points at the wrong bytes, saved where the converter saves it.
void ForgeIndexBeside(const std::string& corpus, bool swap_records, bool swap_metadata) {
  const std::string idx = corpus + "/lmdbloader.idx";
  std::unique_ptr<Reader> probe;
  ASSERT_OK(OpenWith(corpus, &probe));  // the identity the index must carry
  RecordIndex real;
  ASSERT_TRUE(IndexFileCodec::Decode(ReadAll(idx), idx, &real).ok());
  RecordIndex forged;
  for (uint64_t i = 0; i < real.size(); ++i) {
    const uint64_t from = swap_records && i < 2 ? 1 - i : i;
    ASSERT_OK(forged.Add(RecordKey(i), real.offset(from), real.value_size(from)));
  }
  std::vector<std::pair<std::string, ValueLocation>> meta(real.meta().begin(), real.meta().end());
  for (size_t k = 0; k < meta.size(); ++k) {
    const ValueLocation& loc = meta[swap_metadata ? (k + 1) % meta.size() : k].second;
    ASSERT_OK(forged.AddMeta(meta[k].first, loc.offset, static_cast<uint32_t>(loc.size)));
  }
  forged.identity = real.identity;
  forged.db_name = real.db_name;
  forged.set_db_flags(real.db_flags());
  ASSERT_OK(SaveIndex(idx, forged));
}

TEST(CorpusIntegrityTest, ForgedSavedIndexPointingMetadataAtOtherBytesIsRebuiltAndSaysSo) {
  TempDir dir;
  WriteCorpus(dir.Sub("c"), 40);
  ForgeIndexBeside(dir.Sub("c"), false, true);
  std::unique_ptr<Reader> r;
  ASSERT_OK(OpenWith(dir.Sub("c"), &r));
  const std::string source = r->stats().index_source;
  EXPECT_NE(source.find("built: the saved index " + dir.Sub("c/lmdbloader.idx") + " disagrees with the data"),
            std::string::npos)
      << source;
  std::string value;
  for (uint64_t i = 0; i < r->size(); ++i) {
    ASSERT_OK(r->Read(i, &value));
    EXPECT_EQ(value, testing::RecordBytes(i, kValue));
  }
}

TEST(CorpusIntegrityTest, ForgedSavedIndexSwappingRecordsIsCorruptionNamingTheIndex) {
  TempDir dir;
  WriteCorpus(dir.Sub("c"), 40);
  ForgeIndexBeside(dir.Sub("c"), true, false);
  std::unique_ptr<Reader> r;
  ASSERT_OK(OpenWith(dir.Sub("c"), &r));
  std::string value;
  Status s = r->Read(0, &value);
  ASSERT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("its location was loaded from " + dir.Sub("c/lmdbloader.idx")), std::string::npos)
      << s.message();
}

// A names value that is not UTF-8 under a checksum that matches it: what
// another writer could produce (CorpusWriter refuses such names).
TEST(CorpusIntegrityTest, ANameThatIsNotUtf8IsCorruptionNamingTheRecordAndTheFile) {
  TempDir dir;
  std::unique_ptr<CorpusWriter> w;
  ASSERT_OK(CorpusWriter::Create(dir.Sub("c"), WriterOptions(), &w));
  EXPECT_EQ(w->Add("bad\xff", "x", {}).code(), Status::Code::kInvalidArgument) << "the writer refuses it";
  ASSERT_OK(w->Add("ok", "x", {}));
  ASSERT_OK(w->Add("bad!", "y", {}));
  ASSERT_OK(w->Finish("{}"));
  w.reset();
  MDB_env* env;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_open(env, dir.Sub("c").c_str(), MDB_NOLOCK, 0644), 0);
  MDB_txn* txn;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  auto get = [&](std::string_view key) {
    MDB_val k{key.size(), const_cast<char*>(key.data())}, v;
    EXPECT_EQ(mdb_get(txn, dbi, &k, &v), 0);
    return std::string(static_cast<char*>(v.mv_data), v.mv_size);
  };
  auto put = [&](std::string_view key, const std::string& value) {
    MDB_val k{key.size(), const_cast<char*>(key.data())}, v{value.size(), const_cast<char*>(value.data())};
    EXPECT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  };
  std::string names = get(kNamesBlobKey);
  names[names.find('!')] = '\xff';
  put(kNamesBlobKey, names);
  nlohmann::json manifest = nlohmann::json::parse(get(kManifestKey));
  manifest["checksums"]["meta"]["names"] = ChecksumHex(Checksum(names));
  const std::string text = manifest.dump();
  put(kManifestKey, text);
  const uint64_t sum = Checksum(text);
  put(kManifestChecksumKey, std::string(reinterpret_cast<const char*>(&sum), 8));
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
  std::unique_ptr<Reader> r;
  ASSERT_OK(OpenWith(dir.Sub("c"), &r));
  std::string name;
  ASSERT_OK(r->Name(0, &name));
  EXPECT_EQ(name, "ok");
  Status s = r->Name(1, &name);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("c/data.mdb: the name of record 1 is not UTF-8 text"), std::string::npos) << s.message();
}

TEST(CorpusIntegrityTest, PlainLmdbWithAMetadataLikeKeyKeepsThatRecord) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), {{"a", "1"}, {"__lmdbloader__/manifest", "{\"format\": 3}"},
                                     {"__lmdbloader__/x", "2"}, {"z", "3"}});
  for (int open = 0; open < 2; ++open) {  // built, then loaded from the saved index
    std::unique_ptr<Reader> r;
    ASSERT_OK(OpenWith(dir.Sub("db"), &r));
    EXPECT_FALSE(r->is_corpus());
    ASSERT_EQ(r->size(), 4u);
    std::string value;
    ASSERT_OK(r->Get("__lmdbloader__/x", &value));
    EXPECT_EQ(value, "2");
  }
}

void WriteShardList(const std::string& dir, const std::string& json) { std::ofstream(dir + "/shards.json") << json; }

TEST(CorpusIntegrityTest, ShardListIsCheckedNotTrusted) {
  TempDir dir;
  const std::string set = dir.Sub("set");
  ::mkdir(set.c_str(), 0755);
  WriteCorpus(set + "/part-00000-of-00002", 3);
  WriteCorpus(set + "/part-00001-of-00002", 4);
  testing::WriteNumberedLmdb(dir.Sub("plain"), 3, 10);
  testing::WriteNumberedLmdb(set + "/plain", 3, 10);
  struct Case {
    const char* list;
    const char* needle;
  } cases[] = {
      {R"({"shards": [{"path": "part-00000-of-00002"}, {"path": "part-00000-of-00002"}]})", "listed twice"},
      {R"({"shards": [{"path": "../plain"}]})", "outside"},
      {R"({"shards": [{"path": "/etc"}]})", "outside"},
      {R"({"shards": [{"path": "part-00000-of-00002"}, {"path": "plain"}]})", "not an lmdbloader corpus"},
      {R"({"shards": [{"path": "part-00000-of-00002", "records": -1}]})", "not a count"},
      {R"({"shards": [{"path": "part-00000-of-00002", "records": 5}]})", "shard list says 5"},
      {R"({"shards": []})", "no shards"},
      {R"([1, 2])", "not a valid shard list"},
  };
  for (const Case& c : cases) {
    WriteShardList(set, c.list);
    std::unique_ptr<Reader> r;
    Status s = OpenWith(set, &r);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << c.list << " -> " << s.ToString();
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << c.list << " -> " << s.message();
    EXPECT_NE(s.message().find(set), std::string::npos) << s.message();
  }
  WriteShardList(set, R"({"shards": [{"path": "part-00000-of-00002", "records": 3},
                                     {"path": "part-00001-of-00002", "records": 4}]})");
  std::unique_ptr<Reader> r;
  ASSERT_OK(OpenWith(set, &r));
  EXPECT_EQ(r->size(), 7u);
}

}  // namespace
}  // namespace lmdbloader
