// Listing a source for `convert`: folders listed in byte order of their
// names whatever order they were made in, labels by class folder, hidden
// entries and non-files left out, names that are not UTF-8 refused naming
// the path; JSONL paths kept inside the manifest's folder; an LMDB's keys
// kept byte for byte (packed integers included) in LMDB's order.
#include "convert/source_listing.h"

#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "corpus/corpus_format.h"
#include "lmdbloader/writer.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

void Touch(const std::string& path, const std::string& bytes = "x") {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

ConvertOptions Options(SourceKind kind, const std::string& source) {
  ConvertOptions o;
  o.source_kind = kind;
  o.source = source;
  return o;
}

std::vector<std::string> Names(const Listing& l) {
  std::vector<std::string> out;
  for (const Item& it : l.items) out.push_back(it.name);
  return out;
}

TEST(SourceListingTest, ImageFolderIsListedInByteOrderWithLabelsByClassFolder) {
  TempDir dir;
  const std::string src = dir.Sub("src");
  // Made out of order: the listing does not depend on the directory's order.
  for (const char* f : {"dog/img2.jpg", "cat/b.png", "dog/img10.jpg", "Zebra/z.jpg", "cat/a.jpg", "dog/img1.jpg"})
    Touch(src + "/" + f, f);
  fs::create_directories(src + "/empty_class");  // a class without files keeps its label
  Touch(src + "/loose.jpg");                     // files beside the classes are not records
  Touch(src + "/.hidden_class/h.jpg");
  Touch(src + "/cat/.DS_Store");
  Touch(src + "/cat/notes.txt");  // no filter on extensions: every file is a record
  ASSERT_EQ(::mkfifo((src + "/cat/pipe.jpg").c_str(), 0600), 0);  // not a regular file: left out
  Listing l;
  ASSERT_OK(ListFolders(Options(SourceKind::kImageFolder, src), false, &l));
  EXPECT_EQ(l.label_names, (std::vector<std::string>{"Zebra", "cat", "dog", "empty_class"}));
  EXPECT_EQ(Names(l), (std::vector<std::string>{"Zebra/z.jpg", "cat/a.jpg", "cat/b.png", "cat/notes.txt",
                                                "dog/img1.jpg", "dog/img10.jpg", "dog/img2.jpg"}));
  const int64_t labels[] = {0, 1, 1, 1, 2, 2, 2};
  for (size_t i = 0; i < l.items.size(); ++i) {
    const Item& it = l.items[i];
    SCOPED_TRACE(it.name);
    EXPECT_TRUE(it.has_label);
    EXPECT_EQ(it.label, labels[i]);
    EXPECT_FALSE(it.frames);
    ASSERT_EQ(it.files.size(), 1u);
    EXPECT_EQ(it.files[0], src + "/" + it.name);
    EXPECT_EQ(it.origin, it.files[0]);
  }
  EXPECT_TRUE(l.skipped.empty());
  // Listed again: the same.
  Listing again;
  ASSERT_OK(ListFolders(Options(SourceKind::kImageFolder, src), false, &again));
  EXPECT_EQ(Names(again), Names(l));
}

TEST(SourceListingTest, SymlinksAreFollowedAndDanglingOnesLeftOut) {
  TempDir dir;
  const std::string src = dir.Sub("src");
  Touch(dir.Sub("elsewhere/real.jpg"), "real");
  Touch(dir.Sub("outside_class/o.jpg"), "o");
  Touch(src + "/cls/own.jpg");
  ASSERT_EQ(::symlink(dir.Sub("elsewhere/real.jpg").c_str(), (src + "/cls/link.jpg").c_str()), 0);
  ASSERT_EQ(::symlink(dir.Sub("gone.jpg").c_str(), (src + "/cls/dangling.jpg").c_str()), 0);
  ASSERT_EQ(::symlink(dir.Sub("outside_class").c_str(), (src + "/linked_class").c_str()), 0);
  Listing l;
  ASSERT_OK(ListFolders(Options(SourceKind::kImageFolder, src), false, &l));
  EXPECT_EQ(l.label_names, (std::vector<std::string>{"cls", "linked_class"}));
  EXPECT_EQ(Names(l), (std::vector<std::string>{"cls/link.jpg", "cls/own.jpg", "linked_class/o.jpg"}));
  EXPECT_EQ(l.items[0].files[0], src + "/cls/link.jpg");  // the link's path; reading it follows the link
  // A source that is itself a link to a folder lists that folder.
  ASSERT_EQ(::symlink(src.c_str(), dir.Sub("src_link").c_str()), 0);
  Listing via;
  ASSERT_OK(ListFolders(Options(SourceKind::kImageFolder, dir.Sub("src_link")), false, &via));
  EXPECT_EQ(Names(via), Names(l));
}

TEST(SourceListingTest, MissingEmptyOrFileSourcesAreErrorsNamingThem) {
  TempDir dir;
  Listing l;
  Status s = ListFolders(Options(SourceKind::kImageFolder, dir.Sub("nowhere")), false, &l);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_NE(s.message().find(dir.Sub("nowhere") + ": not a directory"), std::string::npos) << s.message();
  Touch(dir.Sub("file.jpg"));
  s = ListFolders(Options(SourceKind::kVideoFolder, dir.Sub("file.jpg")), true, &l);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_NE(s.message().find(dir.Sub("file.jpg")), std::string::npos) << s.message();
  fs::create_directories(dir.Sub("empty/class_without_files"));
  Touch(dir.Sub("empty/.hidden/a.jpg"));
  s = ListFolders(Options(SourceKind::kImageFolder, dir.Sub("empty")), false, &l);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("no images found under " + dir.Sub("empty")), std::string::npos) << s.message();
  s = ListFolders(Options(SourceKind::kVideoFolder, dir.Sub("empty")), true, &l);
  EXPECT_NE(s.message().find("no videos found under " + dir.Sub("empty")), std::string::npos) << s.message();
  // SortedEntries of a missing folder: nothing, no throw.
  EXPECT_TRUE(SortedEntries(dir.Sub("nowhere"), true).empty());
  EXPECT_TRUE(SortedEntries(dir.Sub("nowhere"), false).empty());
}

// Record and class names are UTF-8 (msgpack strings, JSON); file names need
// not be: such a name is refused naming its path, whichever level it is at.
TEST(SourceListingTest, NamesThatAreNotUtf8AreRefusedNamingThePath) {
  TempDir dir;
  Touch(dir.Sub("a/cl\xff" "ass/ok.jpg"));
  Touch(dir.Sub("b/cls/bad\xc3(.jpg"));  // a broken two-byte sequence
  Touch(dir.Sub("c/cls/vid\xed\xa0\x80/f0.jpg"));  // an encoded surrogate
  Touch(dir.Sub("d/cls/caf\xc3\xa9/f0.jpg"));  // valid: "café"
  struct Case {
    std::string source, bad;
    bool video;
  };
  for (const Case& c : {Case{dir.Sub("a"), dir.Sub("a/cl\xff" "ass"), false},
                        Case{dir.Sub("b"), dir.Sub("b/cls/bad\xc3(.jpg"), false},
                        Case{dir.Sub("c"), dir.Sub("c/cls/vid\xed\xa0\x80"), true}}) {
    SCOPED_TRACE(c.bad);
    Listing l;
    Status s = ListFolders(Options(SourceKind::kImageFolder, c.source), c.video, &l);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(c.bad + ": the name is not valid UTF-8"), std::string::npos) << s.message();
  }
  Listing l;
  ASSERT_OK(ListFolders(Options(SourceKind::kVideoFolder, dir.Sub("d")), true, &l));
  EXPECT_EQ(Names(l), (std::vector<std::string>{"cls/caf\xc3\xa9"}));
  // With skip_bad such a name is listed as skipped, a class whole, and the
  // labels of the classes kept stay consecutive.
  Touch(dir.Sub("e/a\xff/x.jpg"));
  Touch(dir.Sub("e/b/bad\xff.jpg"));
  Touch(dir.Sub("e/b/good.jpg"));
  Touch(dir.Sub("e/c/more.jpg"));
  ConvertOptions o = Options(SourceKind::kImageFolder, dir.Sub("e"));
  o.skip_bad = true;
  l = Listing();
  ASSERT_OK(ListFolders(o, false, &l));
  EXPECT_EQ(Names(l), (std::vector<std::string>{"b/good.jpg", "c/more.jpg"}));
  EXPECT_EQ(l.label_names, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(l.items[1].label, 1);
  ASSERT_EQ(l.skipped.size(), 2u);
  EXPECT_NE(l.skipped[0].find(dir.Sub("e/a\xff") + ": the name is not valid UTF-8"), std::string::npos);
  EXPECT_NE(l.skipped[1].find(dir.Sub("e/b/bad\xff.jpg")), std::string::npos);
}

TEST(SourceListingTest, VideoFolderFramesInOrderEveryKthAndEmptyVideosNamed) {
  TempDir dir;
  const std::string src = dir.Sub("src");
  for (int f : {3, 0, 4, 1, 2}) Touch(src + "/run/v1/frame" + std::to_string(f) + ".jpg");
  Touch(src + "/run/v1/.thumb.jpg");
  Touch(src + "/run/v1/sub/deeper.jpg");  // folders among frames are not frames
  Touch(src + "/jump/v2/f.jpg");
  Touch(src + "/jump/loose.jpg");  // a file where a video folder is expected: not a video
  fs::create_directories(src + "/jump/v0_empty");
  ConvertOptions o = Options(SourceKind::kVideoFolder, src);
  o.frame_step = 2;
  Listing l;
  Status s = ListFolders(o, true, &l);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(src + "/jump/v0_empty: empty folder (no frames)"), std::string::npos) << s.message();
  o.skip_bad = true;
  l = Listing();
  ASSERT_OK(ListFolders(o, true, &l));
  EXPECT_EQ(l.skipped, (std::vector<std::string>{src + "/jump/v0_empty: empty folder (no frames)"}));
  EXPECT_EQ(l.label_names, (std::vector<std::string>{"jump", "run"}));
  ASSERT_EQ(Names(l), (std::vector<std::string>{"jump/v2", "run/v1"}));
  EXPECT_EQ(l.items[0].label, 0);
  EXPECT_EQ(l.items[1].label, 1);
  EXPECT_TRUE(l.items[1].frames);
  EXPECT_EQ(l.items[1].files, (std::vector<std::string>{src + "/run/v1/frame0.jpg", src + "/run/v1/frame2.jpg",
                                                        src + "/run/v1/frame4.jpg"}));
  EXPECT_EQ(l.items[1].origin, src + "/run/v1");
}

TEST(SourceListingTest, JsonlPathsStayInsideTheManifestsFolderAndBadLinesAreNamed) {
  TempDir dir;
  Touch(dir.Sub("data/a.jpg"));
  Touch(dir.Sub("data/sub/b.jpg"));
  Touch(dir.Sub("secret.jpg"));
  const std::string m = dir.Sub("data/m.jsonl");
  std::ofstream(m) << R"({"name": "a", "path": "a.jpg", "label": 3, "score": 0.5})" "\n"
                   << "   \n"
                   << R"({"name": "clip", "paths": ["sub/b.jpg", "./a.jpg"], "label": -2})" "\n"
                   << R"({"name": "escape", "path": "../secret.jpg"})" "\n"
                   << R"({"name": "a", "path": "a.jpg"})" "\n"
                   << "not json\n"
                   << R"({"name": "big", "path": "a.jpg", "label": 9007199254740993})" "\n"
                   << R"({"name": "min", "path": "a.jpg", "label": -9223372036854775808})" "\n"
                   << R"({"name": "min2", "path": "a.jpg", "n": -9223372036854775808})" "\n";
  Listing l;
  Status s = ListJsonl(Options(SourceKind::kJsonl, m), &l);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(m + ":4: path '../secret.jpg' is outside"), std::string::npos) << s.message();
  ConvertOptions o = Options(SourceKind::kJsonl, m);
  o.skip_bad = true;
  l = Listing();
  ASSERT_OK(ListJsonl(o, &l));
  ASSERT_EQ(Names(l), (std::vector<std::string>{"a", "clip"}));  // the manifest's order
  const std::string root = fs::canonical(dir.Sub("data")).string();
  EXPECT_EQ(l.items[0].files, (std::vector<std::string>{root + "/a.jpg"}));
  EXPECT_EQ(l.items[0].label, 3);
  EXPECT_EQ(l.items[0].extra, nlohmann::json({{"score", 0.5}}));
  EXPECT_EQ(l.items[0].origin, m + ":1");
  EXPECT_TRUE(l.items[1].frames);
  EXPECT_EQ(l.items[1].files, (std::vector<std::string>{root + "/sub/b.jpg", root + "/a.jpg"}));
  EXPECT_EQ(l.items[1].label, -2);
  ASSERT_EQ(l.skipped.size(), 6u);
  EXPECT_EQ(l.skipped[0].rfind(m + ":4: path '../secret.jpg' is outside", 0), 0u) << l.skipped[0];
  EXPECT_EQ(l.skipped[1], m + ":5: duplicate name 'a' (first on line 1)");
  EXPECT_EQ(l.skipped[2], m + ":6: not a JSON object");
  EXPECT_EQ(l.skipped[3], m + ":7: 'label' must be an integer between -2^53 and 2^53");
  EXPECT_EQ(l.skipped[4], m + ":8: 'label' must be an integer between -2^53 and 2^53");  // -2^63 too
  EXPECT_EQ(l.skipped[5], m + ":9: field 'n' is an integer beyond 2^53, which its column cannot hold exactly");
  // A missing manifest is an error naming it.
  s = ListJsonl(Options(SourceKind::kJsonl, dir.Sub("none.jsonl")), &l);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir.Sub("none.jsonl")), std::string::npos) << s.message();
}

std::unique_ptr<Reader> Open(const std::string& path, const std::string& db = "") {
  ReaderOptions ro;
  ro.index_dir = "none";
  ro.db_name = db;
  std::unique_ptr<Reader> r;
  EXPECT_OK(Reader::Open(path, ro, &r));
  return r;
}

std::string BigEndian(uint64_t v, int bytes) {
  std::string k(bytes, '\0');
  for (int b = bytes - 1; b >= 0; --b, v >>= 8) k[b] = static_cast<char>(v & 0xff);
  return k;
}

// Packed-integer keys (bytes past 0x7f, NULs) are names of any bytes: kept
// exactly, in the LMDB's key order, for a corpus keyed by names.
TEST(SourceListingTest, AnLmdbsBinaryKeysBecomeNamesByteForByteInKeyOrder) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> records;
  for (uint64_t i = 0; i < 300; ++i) records.emplace_back(BigEndian(i * 977, 8), "v" + std::to_string(i));
  records.emplace_back(std::string("\xff\xfe\x00\x80", 4), "hash-like");
  records.emplace_back("text key", "t");
  testing::WriteLmdb(dir.Sub("db"), records, "packed");
  ConvertOptions o = Options(SourceKind::kLmdb, dir.Sub("db"));
  o.db_name = "packed";
  auto r = Open(dir.Sub("db"), "packed");
  ASSERT_TRUE(r);
  Listing l;
  ASSERT_OK(ListLmdb(o, *r, &l));
  EXPECT_EQ(l.keys, CorpusKeys::kNames);
  EXPECT_TRUE(l.schema.is_null());  // records stored as they are
  EXPECT_TRUE(l.label_names.empty());
  EXPECT_TRUE(l.columns.empty());
  std::sort(records.begin(), records.end());  // LMDB's order: bytes, unsigned
  ASSERT_EQ(l.items.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(l.items[i].name, records[i].first) << i;
    EXPECT_EQ(l.items[i].position, i);
    EXPECT_FALSE(l.items[i].has_label);
  }
  EXPECT_EQ(l.items[5].origin,
            dir.Sub("db") + " (database 'packed') record 5 (key " + PrintableName(records[5].first) + ")");
  // INTEGERKEY: native-order integers, listed in liblmdb's numeric order.
  std::vector<std::pair<std::string, std::string>> ints;
  for (uint32_t i : {70000u, 3u, 256u, 0xffffffffu}) ints.emplace_back(std::string(reinterpret_cast<char*>(&i), 4), "x");
  testing::WriteLmdb(dir.Sub("ints"), ints, "", false, MDB_INTEGERKEY);
  r = Open(dir.Sub("ints"));
  l = Listing();
  ASSERT_OK(ListLmdb(Options(SourceKind::kLmdb, dir.Sub("ints")), *r, &l));
  std::vector<uint32_t> order;
  for (const Item& it : l.items) {
    ASSERT_EQ(it.name.size(), 4u);
    uint32_t v;
    std::memcpy(&v, it.name.data(), 4);
    order.push_back(v);
  }
  EXPECT_EQ(order, (std::vector<uint32_t>{3u, 256u, 70000u, 0xffffffffu}));
  EXPECT_EQ(l.items[0].origin, dir.Sub("ints") + " record 0 (key 0x03000000)");
}

TEST(SourceListingTest, ARecordLayoutLeavesMetadataKeysOutAndListsThem) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), {{"0", "a"}, {"__keys__", "k"}, {"1", "b"}, {"__len__", "2"}, {"__x", "c"}}, "",
                     false, 0);
  ConvertOptions o = Options(SourceKind::kLmdb, dir.Sub("db"));
  for (RecordLayout layout : {RecordLayout::kAsIs, RecordLayout::kMsgpack}) {
    o.record = layout;
    auto r = Open(dir.Sub("db"));
    Listing l;
    ASSERT_OK(ListLmdb(o, *r, &l));
    std::vector<std::string> names;
    for (const Item& it : l.items) names.push_back(it.name);
    if (layout == RecordLayout::kAsIs) {  // every record kept, as before
      EXPECT_EQ(names, (std::vector<std::string>{"0", "1", "__keys__", "__len__", "__x"}));
      EXPECT_TRUE(l.skipped.empty());
      continue;
    }
    EXPECT_EQ(names, (std::vector<std::string>{"0", "1", "__x"}));
    ASSERT_EQ(l.skipped.size(), 2u);
    EXPECT_EQ(l.skipped[0], dir.Sub("db") + " record 2 (key '__keys__'): a metadata record (a key of the form "
                                            "__name__), not a sample");
  }
  // Nothing but metadata: an error, not an empty corpus.
  testing::WriteLmdb(dir.Sub("meta"), {{"__keys__", "k"}, {"__len__", "0"}}, "", false, 0);
  auto r = Open(dir.Sub("meta"));
  o = Options(SourceKind::kLmdb, dir.Sub("meta"));
  o.record = RecordLayout::kCaffe;
  Listing l;
  Status s = ListLmdb(o, *r, &l);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("no records but metadata"), std::string::npos) << s.message();
}

TEST(SourceListingTest, ADupsortLmdbIsRefusedNamingTheSourceAndDatabase) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), {{"k", "1"}, {"k", "2"}, {"j", "3"}}, "dups", false, MDB_DUPSORT);
  auto r = Open(dir.Sub("db"), "dups");
  ASSERT_TRUE(r);
  ConvertOptions o = Options(SourceKind::kLmdb, dir.Sub("db"));
  o.db_name = "dups";
  Listing l;
  Status s = ListLmdb(o, *r, &l);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(dir.Sub("db") + " (database 'dups'): holds sorted duplicates"), std::string::npos)
      << s.message();
  EXPECT_TRUE(l.items.empty());
}

// A corpus source carries over its names (in record order), keys, schema,
// label names and columns; a corpus keyed by binary names lists them as bytes.
TEST(SourceListingTest, ACorpusSourceCarriesItsNamesKeysSchemaLabelsAndColumns) {
  TempDir dir;
  {
    std::unique_ptr<CorpusWriter> w;
    ASSERT_OK(CorpusWriter::Create(dir.Sub("c"), WriterOptions(), &w));
    for (int i = 0; i < 5; ++i)
      ASSERT_OK(w->Add("n" + std::to_string(4 - i), "rec", {{"label", i - 2}, {"score", i * 0.25}}));
    ASSERT_OK(w->Finish(R"({"label_names": ["a", "b", 7, "c"], "schema": {"encoding": "as-is"}})"));
  }
  auto r = Open(dir.Sub("c"));
  ASSERT_TRUE(r);
  Listing l;
  ASSERT_OK(ListLmdb(Options(SourceKind::kLmdb, dir.Sub("c")), *r, &l));
  EXPECT_EQ(l.keys, CorpusKeys::kRecordNumbers);
  EXPECT_EQ(Names(l), (std::vector<std::string>{"n4", "n3", "n2", "n1", "n0"}));  // record order, not sorted
  EXPECT_EQ(l.schema, nlohmann::json({{"encoding", "as-is"}}));
  EXPECT_EQ(l.label_names, (std::vector<std::string>{"a", "b", "c"}));  // non-strings left out
  EXPECT_EQ(l.columns["label"], (std::vector<double>{-2, -1, 0, 1, 2}));  // int64 column
  EXPECT_EQ(l.columns["score"], (std::vector<double>{0, 0.25, 0.5, 0.75, 1.0}));  // float64 column
  // Keyed by names that are packed integers.
  {
    WriterOptions wo;
    wo.keys = CorpusKeys::kNames;
    std::unique_ptr<CorpusWriter> w;
    ASSERT_OK(CorpusWriter::Create(dir.Sub("named"), wo, &w));
    for (uint64_t i = 0; i < 200; ++i) ASSERT_OK(w->Add(BigEndian(i << 7, 8), "v"));
    ASSERT_OK(w->Finish(R"({"keys": "names", "schema": {"encoding": "as-is"}})"));
  }
  r = Open(dir.Sub("named"));
  ASSERT_TRUE(r);
  l = Listing();
  ASSERT_OK(ListLmdb(Options(SourceKind::kLmdb, dir.Sub("named")), *r, &l));
  EXPECT_EQ(l.keys, CorpusKeys::kNames);
  ASSERT_EQ(l.items.size(), 200u);
  for (uint64_t i = 0; i < 200; ++i) EXPECT_EQ(l.items[i].name, BigEndian(i << 7, 8)) << i;
}

}  // namespace
}  // namespace lmdbloader
