// ParseCorpusManifest: what the writer writes parses back, field for field;
// anything else is refused with the status that says what it is (not a
// manifest, a damaged one, or a later format).
#include "corpus/corpus_manifest.h"

#include <lmdb.h>

#include <memory>
#include <string>

#include "base/checksum.h"
#include "corpus/corpus_format.h"
#include "lmdbloader/writer.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;

// The value of `key` in the main database, read with liblmdb itself.
std::string ReadWithLiblmdb(const std::string& dir, std::string_view key) {
  MDB_env* env = nullptr;
  EXPECT_EQ(mdb_env_create(&env), 0);
  EXPECT_EQ(mdb_env_open(env, dir.c_str(), MDB_RDONLY | MDB_NOLOCK, 0644), 0);
  MDB_txn* txn = nullptr;
  EXPECT_EQ(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), 0);
  MDB_dbi dbi;
  EXPECT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  MDB_val k{key.size(), const_cast<char*>(key.data())}, v{};
  std::string out;
  if (mdb_get(txn, dbi, &k, &v) == 0) out.assign(static_cast<const char*>(v.mv_data), v.mv_size);
  mdb_txn_abort(txn);
  mdb_env_close(env);
  return out;
}

void WriteCorpus(const std::string& target, CorpusKeys keys, bool columns) {
  WriterOptions options;
  options.keys = keys;
  std::unique_ptr<CorpusWriter> writer;
  ASSERT_OK(CorpusWriter::Create(target, options, &writer));
  for (int i = 0; i < 5; ++i) {
    std::map<std::string, double> values;
    if (columns) values = {{"label", i % 2}, {"weight", 0.5 * i}};
    ASSERT_OK(writer->Add("r" + std::to_string(i), testing::RecordBytes(i, 100), values));
  }
  ASSERT_OK(writer->Finish(R"({"source": "test"})"));
}

TEST(CorpusManifestTest, WhatTheWriterWritesParsesBackFieldForField) {
  TempDir dir;
  for (CorpusKeys keys : {CorpusKeys::kRecordNumbers, CorpusKeys::kNames}) {
    const std::string target = dir.Sub(keys == CorpusKeys::kNames ? "names" : "numbers");
    WriteCorpus(target, keys, /*columns=*/true);
    const std::string text = ReadWithLiblmdb(target, kManifestKey);
    ASSERT_FALSE(text.empty());
    CorpusManifest m;
    ASSERT_OK(ParseCorpusManifest(text, target, &m));
    EXPECT_EQ(m.records, 5u);
    EXPECT_EQ(m.keys, keys);
    EXPECT_TRUE(m.has_checksums);
    EXPECT_EQ(m.column_dtypes, (std::map<std::string, std::string>{{"label", "<i8"}, {"weight", "<f8"}}));
    // Every metadata value the manifest vouches for is in the file with that
    // checksum, and the record checksums are among them.
    ASSERT_TRUE(m.meta_sums.count(std::string(kChecksumsKey)));
    for (const auto& [key, sum] : m.meta_sums) {
      EXPECT_TRUE(IsMetaKey(key)) << key;
      EXPECT_EQ(Checksum(ReadWithLiblmdb(target, key)), sum) << key;
    }
  }
}

TEST(CorpusManifestTest, AManifestOfTheFirstFormatWithoutOptionalFieldsParses) {
  // What the writer wrote before columns, checksums and "keys" existed: the
  // optional fields take their defaults.
  CorpusManifest m;
  ASSERT_OK(ParseCorpusManifest(R"({"format": "lmdbloader-corpus", "version": 1, "records": 0})", "/c", &m));
  EXPECT_EQ(m.records, 0u);
  EXPECT_EQ(m.keys, CorpusKeys::kRecordNumbers);
  EXPECT_FALSE(m.has_checksums);
  EXPECT_TRUE(m.column_dtypes.empty());
  ASSERT_OK(ParseCorpusManifest(
      R"({"format": "lmdbloader-corpus", "records": 18446744073709551615, "keys": "numbers", "extra": [1]})",
      "/c", &m));
  EXPECT_EQ(m.records, UINT64_MAX);
}

TEST(CorpusManifestTest, TextThatIsNoCorpusManifestIsNotFound) {
  for (const char* text : {"", "not json", "[]", "42", R"({"records": 3})", R"({"format": "other", "records": 3})",
                           R"({"format": 1, "records": 3})"}) {
    CorpusManifest m;
    Status s = ParseCorpusManifest(text, "/data/c", &m);
    EXPECT_EQ(s.code(), Status::Code::kNotFound) << text;
    EXPECT_NE(s.message().find("/data/c"), std::string::npos) << s.message();
  }
}

TEST(CorpusManifestTest, DamagedFieldsAreCorruptionNamingTheCorpusAndTheField) {
  struct Case {
    const char *fields, *reason;
  };
  for (const Case& c : {
           Case{R"("records": -1)", "'records' is not a non-negative integer"},
           Case{R"("records": 1.5)", "'records' is not a non-negative integer"},
           Case{R"("records": "3")", "'records' is not a non-negative integer"},
           Case{R"("records": 3, "keys": 1)", "'keys' is not a string"},
           Case{R"("records": 3, "columns": [])", "'columns' is not an object"},
           Case{R"("records": 3, "columns": {"label": {"dtype": "<f4"}})", "column 'label' has no dtype"},
           Case{R"("records": 3, "columns": {"label": {}})", "column 'label' has no dtype"},
           Case{R"("records": 3, "checksums": {"algorithm": "xxh3-64"})", "'checksums' is malformed"},
           Case{R"("records": 3, "checksums": "xxh3-64")", "'checksums' is malformed"},
       }) {
    CorpusManifest m;
    const std::string text = std::string(R"({"format": "lmdbloader-corpus", )") + c.fields + "}";
    Status s = ParseCorpusManifest(text, "/data/c", &m);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << text;
    EXPECT_NE(s.message().find("corpus /data/c"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.reason), std::string::npos) << s.message();
  }
}

TEST(CorpusManifestTest, MetadataChecksumsAreSixteenLowercaseHexDigits) {
  auto parse = [](const std::string& hex, CorpusManifest* m) {
    return ParseCorpusManifest(std::string(R"({"format": "lmdbloader-corpus", "records": 1, "checksums": )") +
                                   R"({"algorithm": ")" + kChecksumAlgorithm + R"(", "meta": {"names": )" + hex +
                                   "}}}",
                               "/c", m);
  };
  CorpusManifest m;
  ASSERT_OK(parse(R"("0123456789abcdef")", &m));
  EXPECT_EQ(m.meta_sums.at(std::string(kNamesBlobKey)), 0x0123456789abcdefull);
  for (const char* bad : {R"("0123456789ABCDEF")", R"("0123456789abcde")", R"("0123456789abcdef0")",
                          R"("0123456789abcdeg")", "81985529216486895"}) {
    Status s = parse(bad, &m);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << bad;
    EXPECT_NE(s.message().find("the checksum of names is malformed"), std::string::npos) << s.message();
  }
}

TEST(CorpusManifestTest, ALaterFormatIsUnsupportedNamingWhatThisReaderKnows) {
  CorpusManifest m;
  Status s = ParseCorpusManifest(R"({"format": "lmdbloader-corpus", "records": 1, "keys": "hashes"})", "/c", &m);
  EXPECT_EQ(s.code(), Status::Code::kUnsupported);
  EXPECT_NE(s.message().find("'hashes'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'numbers' and 'names'"), std::string::npos) << s.message();
  s = ParseCorpusManifest(
      R"({"format": "lmdbloader-corpus", "records": 1, "checksums": {"algorithm": "crc32c", "meta": {}}})", "/c", &m);
  EXPECT_EQ(s.code(), Status::Code::kUnsupported);
  EXPECT_NE(s.message().find("'crc32c' is unknown"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace lmdbloader
