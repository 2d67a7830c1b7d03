// Inspection (`lmdbloader stat`) against liblmdb itself: every count
// InspectDatabase reads from the file equals what mdb_env_info, mdb_env_stat
// and mdb_stat report for databases written with every kind of option; the
// named databases are the main tree's entries liblmdb opens as databases;
// shard sets sum their parts; bad paths and files are errors naming them.
#include "lmdbloader/database_info.h"
#include "lmdbloader/leaf_layout.h"
#include "lmdbloader/named_databases.h"

#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "lmdbloader/reader.h"
#include "lmdbloader/shard_set.h"
#include "lmdbloader/writer.h"
#include "corpus/page_check.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::ReadAll;
using testing::WriteAll;

using testing::TempDir;
namespace fs = std::filesystem;
using Pairs = std::vector<std::pair<std::string, std::string>>;

std::string BigEndian(uint64_t v) {
  std::string k(8, '\0');
  for (int b = 7; b >= 0; --b, v >>= 8) k[b] = static_cast<char>(v & 0xff);
  return k;
}

// Runs `body` in one write transaction of the environment at `path`.
void WriteTxn(const std::string& path, bool nosubdir, const std::function<void(MDB_txn*)>& body) {
  if (!nosubdir) ::mkdir(path.c_str(), 0755);
  MDB_env* env;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_mapsize(env, 64ull << 20), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 8), 0);
  ASSERT_EQ(mdb_env_open(env, path.c_str(), MDB_NOLOCK | (nosubdir ? MDB_NOSUBDIR : 0), 0644), 0);
  MDB_txn* txn;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  body(txn);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

void Put(MDB_txn* txn, const char* db, unsigned flags, const Pairs& records) {
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, db, MDB_CREATE | flags, &dbi), 0);
  for (const auto& [k, v] : records) {
    MDB_val key{k.size(), const_cast<char*>(k.data())}, val{v.size(), const_cast<char*>(v.data())};
    ASSERT_EQ(mdb_put(txn, dbi, &key, &val, 0), 0);
  }
}

// A read transaction of liblmdb's own on the environment in directory `dir`
// (up to 8 named databases), what a test holds lmdbloader's answers to;
// aborted and closed with the object.
class LiblmdbTxn {
 public:
  explicit LiblmdbTxn(const std::string& dir) {
    EXPECT_EQ(mdb_env_create(&env_), 0);
    mdb_env_set_maxdbs(env_, 8);
    const int opened = mdb_env_open(env_, dir.c_str(), MDB_RDONLY | MDB_NOLOCK, 0644);
    EXPECT_EQ(opened, 0) << dir;
    if (opened == 0) {
      EXPECT_EQ(mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn_), 0);
    }
  }
  ~LiblmdbTxn() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
    mdb_env_close(env_);
  }
  LiblmdbTxn(const LiblmdbTxn&) = delete;
  LiblmdbTxn& operator=(const LiblmdbTxn&) = delete;
  MDB_txn* get() const { return txn_; }

 private:
  MDB_env* env_ = nullptr;
  MDB_txn* txn_ = nullptr;
};

// What liblmdb reports for database `db_name` of the environment at `path`,
// in InspectDatabase's terms.
DatabaseInfo Liblmdb(const std::string& path, const std::string& db_name, bool nosubdir) {
  DatabaseInfo out;
  MDB_env* env;
  EXPECT_EQ(mdb_env_create(&env), 0);
  mdb_env_set_maxdbs(env, 8);
  EXPECT_EQ(mdb_env_open(env, path.c_str(), MDB_RDONLY | MDB_NOLOCK | (nosubdir ? MDB_NOSUBDIR : 0), 0644), 0);
  MDB_envinfo ei;
  MDB_stat es;
  EXPECT_EQ(mdb_env_info(env, &ei), 0);
  EXPECT_EQ(mdb_env_stat(env, &es), 0);
  MDB_txn* txn;
  EXPECT_EQ(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), 0);
  MDB_dbi dbi;
  EXPECT_EQ(mdb_dbi_open(txn, db_name.empty() ? nullptr : db_name.c_str(), 0, &dbi), 0);
  MDB_stat st;
  EXPECT_EQ(mdb_stat(txn, dbi, &st), 0);
  mdb_txn_abort(txn);
  mdb_env_close(env);
  out.data_path = nosubdir ? path : path + "/data.mdb";
  struct stat fst;
  EXPECT_EQ(::stat(out.data_path.c_str(), &fst), 0);
  out.file_bytes = static_cast<uint64_t>(fst.st_size);
  out.page_size = es.ms_psize;
  out.depth = st.ms_depth;
  out.branch_pages = st.ms_branch_pages;
  out.leaf_pages = st.ms_leaf_pages;
  out.overflow_pages = st.ms_overflow_pages;
  out.entries = st.ms_entries;
  out.last_txnid = ei.me_last_txnid;
  out.last_pgno = ei.me_last_pgno;
  out.map_size = ei.me_mapsize;
  return out;
}

void ExpectSame(const DatabaseInfo& got, const DatabaseInfo& want) {
  EXPECT_EQ(got.data_path, want.data_path);
  EXPECT_EQ(got.file_bytes, want.file_bytes);
  EXPECT_EQ(got.page_size, want.page_size);
  EXPECT_EQ(got.depth, want.depth);
  EXPECT_EQ(got.branch_pages, want.branch_pages);
  EXPECT_EQ(got.leaf_pages, want.leaf_pages);
  EXPECT_EQ(got.overflow_pages, want.overflow_pages);
  EXPECT_EQ(got.entries, want.entries);
  EXPECT_EQ(got.last_txnid, want.last_txnid);
  EXPECT_EQ(got.last_pgno, want.last_pgno);
  EXPECT_EQ(got.map_size, want.map_size);
}

struct Case {
  const char* name;
  bool nosubdir;
  std::vector<std::function<void(MDB_txn*)>> txns;  // committed in turn
  std::vector<std::string> dbs;                     // databases compared ("" main)
};

std::vector<Case> Cases() {
  Pairs small, big, ints, dups, few_dups;
  for (int i = 0; i < 5000; ++i) small.emplace_back("key" + std::to_string(i * 7919 % 5003), testing::RecordBytes(i, 90));
  for (int i = 0; i < 120; ++i) big.emplace_back(BigEndian(i), testing::RecordBytes(i, 2500 + 301 * i));
  for (uint32_t i = 0; i < 3000; ++i) {
    uint32_t k = i * 2654435761u;
    ints.emplace_back(std::string(reinterpret_cast<char*>(&k), 4), std::to_string(i));
  }
  for (int k = 0; k < 4; ++k)
    for (int d = 0; d < 700; ++d) dups.emplace_back("k" + std::to_string(k), testing::RecordBytes(d, 48));
  for (int k = 0; k < 300; ++k) few_dups.emplace_back("k" + std::to_string(k % 100), "d" + std::to_string(k));
  std::vector<Case> cases;
  cases.push_back({"main_inline", false, {[=](MDB_txn* t) { Put(t, nullptr, 0, small); }}, {""}});
  cases.push_back({"main_overflow_values", false, {[=](MDB_txn* t) { Put(t, nullptr, 0, big); }}, {""}});
  cases.push_back({"integerkey", false, {[=](MDB_txn* t) { Put(t, nullptr, MDB_INTEGERKEY, ints); }}, {""}});
  cases.push_back({"reversekey", false, {[=](MDB_txn* t) { Put(t, nullptr, MDB_REVERSEKEY, small); }}, {""}});
  cases.push_back({"dupsort_subtrees", false, {[=](MDB_txn* t) { Put(t, nullptr, MDB_DUPSORT, dups); }}, {""}});
  cases.push_back({"dupsort_subpages", false, {[=](MDB_txn* t) { Put(t, nullptr, MDB_DUPSORT, few_dups); }}, {""}});
  cases.push_back({"nosubdir_file", true, {[=](MDB_txn* t) { Put(t, nullptr, 0, big); }}, {""}});
  cases.push_back({"named_databases",
                   false,
                   {[=](MDB_txn* t) {
                      Put(t, "images", 0, big);
                      Put(t, "ints", MDB_INTEGERKEY, ints);
                      Put(t, "dups", MDB_DUPSORT, dups);
                    }},
                   {"", "images", "ints", "dups"}});
  // Several commits, then deletes: the counts are the last commit's, which
  // liblmdb reads from the newer meta page.
  auto del_every_third = [](MDB_txn* t) {
    MDB_dbi dbi;
    ASSERT_EQ(mdb_dbi_open(t, nullptr, 0, &dbi), 0);
    for (int i = 0; i < 120; i += 3) {
      std::string k = BigEndian(i);
      MDB_val key{k.size(), k.data()};
      ASSERT_EQ(mdb_del(t, dbi, &key, nullptr), 0);
    }
  };
  Pairs more;
  for (int i = 120; i < 400; ++i) more.emplace_back(BigEndian(i), testing::RecordBytes(i, 200));
  cases.push_back({"commits_and_deletes",
                   true,
                   {[=](MDB_txn* t) { Put(t, nullptr, 0, big); }, [=](MDB_txn* t) { Put(t, nullptr, 0, more); },
                    del_every_third, [=](MDB_txn* t) { Put(t, "side", 0, small); }},
                   {"", "side"}});
  cases.push_back({"empty", false, {[](MDB_txn* t) { Put(t, nullptr, 0, {}); }}, {""}});
  return cases;
}

TEST(InspectTest, EveryCountEqualsLiblmdbsForEveryKindOfDatabase) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    const std::string path = dir.Sub(c.nosubdir ? "db.mdb" : "db");
    for (const auto& txn : c.txns) WriteTxn(path, c.nosubdir, txn);
    for (const std::string& db : c.dbs) {
      SCOPED_TRACE("database '" + db + "'");
      DatabaseInfo info;
      ASSERT_OK(InspectDatabase(path, db, &info));
      ExpectSame(info, Liblmdb(path, db, c.nosubdir));
    }
  }
}

// The figures the cases above rely on are not all zero or one: the cases do
// reach overflow pages, deeper trees and later transactions.
TEST(InspectTest, TheCasesReachOverflowPagesDepthAndLaterTransactions) {
  TempDir dir;
  Case c = Cases()[8];  // commits_and_deletes: four commits
  for (const auto& txn : c.txns) WriteTxn(dir.Sub("db.mdb"), true, txn);
  DatabaseInfo info;
  ASSERT_OK(InspectDatabase(dir.Sub("db.mdb"), "", &info));
  EXPECT_EQ(info.last_txnid, 4u);
  EXPECT_EQ(info.entries, 400u - 40u + 1u);  // 400 records, 40 deleted, one named database
  EXPECT_GT(info.overflow_pages, 0u);
  EXPECT_GE(info.depth, 2u);
  EXPECT_EQ(info.page_size, static_cast<uint32_t>(::sysconf(_SC_PAGESIZE)));
  ASSERT_OK(InspectDatabase(dir.Sub("db.mdb"), "side", &info));
  EXPECT_EQ(info.entries, 5000u);
  EXPECT_GE(info.depth, 2u);
}

TEST(InspectTest, NamedDatabasesAreThoseLiblmdbOpensAndNoPlainKey) {
  TempDir dir;
  WriteTxn(dir.Sub("db"), false, [](MDB_txn* t) {
    Put(t, "zeta", 0, {{"a", "1"}});
    Put(t, "alpha", MDB_DUPSORT, {{"a", "1"}, {"a", "2"}});
    Put(t, "with space", MDB_INTEGERKEY, {});
    Put(t, nullptr, 0, {{"plain key", "a value, not a database"}});
  });
  std::vector<std::string> names;
  ASSERT_OK(ListNamedDatabases(dir.Sub("db"), &names));
  EXPECT_EQ(names, (std::vector<std::string>{"alpha", "with space", "zeta"}));  // the main tree's order
  // liblmdb opens each listed name as a database and refuses the plain key.
  {
    LiblmdbTxn txn(dir.Sub("db"));
    ASSERT_NE(txn.get(), nullptr);
    MDB_dbi dbi;
    for (const std::string& n : names) EXPECT_EQ(mdb_dbi_open(txn.get(), n.c_str(), 0, &dbi), 0) << n;
    EXPECT_EQ(mdb_dbi_open(txn.get(), "plain key", 0, &dbi), MDB_INCOMPATIBLE);
  }
  // The names are stable: listed again (the list is cleared first), the same.
  ASSERT_OK(ListNamedDatabases(dir.Sub("db"), &names));
  EXPECT_EQ(names.size(), 3u);
  // A database without named ones lists none; a missing database is NotFound.
  testing::WriteNumberedLmdb(dir.Sub("plain"), 10, 10);
  ASSERT_OK(ListNamedDatabases(dir.Sub("plain"), &names));
  EXPECT_TRUE(names.empty());
  DatabaseInfo info;
  Status s = InspectDatabase(dir.Sub("db"), "missing", &info);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("missing"), std::string::npos) << s.message();
}

void WriteCorpus(const std::string& path, int first, int count) {
  std::unique_ptr<CorpusWriter> w;
  ASSERT_OK(CorpusWriter::Create(path, WriterOptions(), &w));
  for (int i = first; i < first + count; ++i)
    ASSERT_OK(w->Add("r" + std::to_string(i), testing::RecordBytes(i, 3000), {{"label", i % 3}}));
  ASSERT_OK(w->Finish("{}"));
}

TEST(InspectTest, CorpusIsItsMainTreeAndAShardSetSumsItsParts) {
  TempDir dir;
  WriteCorpus(dir.Sub("corpus"), 0, 50);
  DatabaseInfo info;
  ASSERT_OK(InspectDatabase(dir.Sub("corpus"), "", &info));
  ExpectSame(info, Liblmdb(dir.Sub("corpus"), "", false));
  EXPECT_GT(info.entries, 50u);  // the records and the corpus's metadata values
  // Three parts of different sizes and their list.
  const int sizes[3] = {30, 200, 7};
  DatabaseInfo sum;
  int first = 0;
  for (uint32_t p = 0; p < 3; ++p) {
    const std::string part = dir.Sub("set/" + ShardName(p, 3));
    fs::create_directories(dir.Sub("set"));
    WriteCorpus(part, first, sizes[p]);
    first += sizes[p];
    DatabaseInfo one = Liblmdb(part, "", false);
    sum.file_bytes += one.file_bytes;
    sum.page_size = one.page_size;
    sum.depth = std::max(sum.depth, one.depth);
    sum.branch_pages += one.branch_pages;
    sum.leaf_pages += one.leaf_pages;
    sum.overflow_pages += one.overflow_pages;
    sum.entries += one.entries;
    sum.last_txnid = std::max(sum.last_txnid, one.last_txnid);
    sum.last_pgno += one.last_pgno;
    sum.map_size += one.map_size;
  }
  uint64_t records = 0;
  ASSERT_OK(WriteShardList(dir.Sub("set"), &records));
  ASSERT_EQ(records, 237u);
  sum.data_path = dir.Sub("set");
  ASSERT_OK(InspectDatabase(dir.Sub("set"), "", &info));
  ExpectSame(info, sum);
  EXPECT_GE(info.depth, 2u);  // the 200-record part's tree, the deepest
  // Leaf pages of a set belong to its parts: no layout for the set.
  LeafLayout layout;
  Status s = ReadLeafLayout(dir.Sub("set"), "", &layout);
  EXPECT_EQ(s.code(), Status::Code::kUnsupported) << s.ToString();
  // A set with a part gone is an error naming the part.
  fs::remove_all(dir.Sub("set/" + ShardName(1, 3)));
  s = InspectDatabase(dir.Sub("set"), "", &info);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(ShardName(1, 3)), std::string::npos) << s.message();
}

// ReadLeafLayout's page starts are where liblmdb's cursor shows its quirk:
// after MDB_SET fails for a key just below key k, MDB_NEXT returns key k
// itself exactly when k begins a leaf page, and key k + 1 otherwise.
TEST(InspectTest, LeafPageStartsAreWhereLiblmdbsCursorStepsOntoTheMissedKey) {
  struct Layout {
    const char* name;
    size_t value_size;
    std::string db;
  };
  for (const Layout& c : {Layout{"inline values", 100, ""}, Layout{"mixed overflow values", 0, "named"}}) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    const int n = 1500;
    Pairs records;  // keys 2, 4, 6, ...: the odd numbers between them are missing
    for (int i = 0; i < n; ++i)
      records.emplace_back(BigEndian(2 * i + 2), testing::RecordBytes(i, c.value_size ? c.value_size : i % 7 ? 60 : 5000));
    testing::WriteLmdb(dir.Sub("db"), records, c.db);
    LeafLayout layout;
    ASSERT_OK(ReadLeafLayout(dir.Sub("db"), c.db, &layout));
    EXPECT_GT(layout.key_page_starts.size(), 5u);
    EXPECT_TRUE(layout.dup_page_starts.empty());
    std::vector<uint64_t> quirks;
    LiblmdbTxn txn(dir.Sub("db"));
    ASSERT_NE(txn.get(), nullptr);
    MDB_dbi dbi;
    ASSERT_EQ(mdb_dbi_open(txn.get(), c.db.empty() ? nullptr : c.db.c_str(), 0, &dbi), 0);
    MDB_cursor* cur;
    ASSERT_EQ(mdb_cursor_open(txn.get(), dbi, &cur), 0);
    for (int k = 0; k + 1 < n; ++k) {
      std::string below = BigEndian(2 * k + 1);
      MDB_val key{below.size(), below.data()}, val;
      ASSERT_EQ(mdb_cursor_get(cur, &key, &val, MDB_SET), MDB_NOTFOUND);
      ASSERT_EQ(mdb_cursor_get(cur, &key, &val, MDB_NEXT), 0);
      const std::string got(static_cast<char*>(key.mv_data), key.mv_size);
      if (got == BigEndian(2 * k + 2)) {
        quirks.push_back(static_cast<uint64_t>(k));
      } else {
        ASSERT_EQ(got, BigEndian(2 * k + 4)) << "key " << k;
      }
    }
    mdb_cursor_close(cur);
    EXPECT_EQ(layout.key_page_starts, quirks);
  }
}

// Every entry point on the same bad input: an error naming the path, no crash.
void ExpectErrorNaming(const std::string& path, const std::string& needle) {
  DatabaseInfo info;
  Status s = InspectDatabase(path, "", &info);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(needle), std::string::npos) << "InspectDatabase: " << s.ToString();
  std::vector<std::string> names;
  s = ListNamedDatabases(path, &names);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(needle), std::string::npos) << "ListNamedDatabases: " << s.ToString();
  LeafLayout layout;
  s = ReadLeafLayout(path, "", &layout);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(needle), std::string::npos) << "ReadLeafLayout: " << s.ToString();
}

TEST(InspectTest, MissingNonLmdbAndTruncatedFilesAreErrorsNamingThem) {
  TempDir dir;
  {
    SCOPED_TRACE("missing");
    ExpectErrorNaming(dir.Sub("nowhere"), dir.Sub("nowhere"));
    DatabaseInfo info;
    EXPECT_EQ(InspectDatabase(dir.Sub("nowhere"), "", &info).code(), Status::Code::kIOError);
  }
  {
    SCOPED_TRACE("a text file");
    std::string text;
    for (int i = 0; i < 4000; ++i) text += "not an LMDB file\n";
    WriteAll(dir.Sub("notes.txt"), text);
    ExpectErrorNaming(dir.Sub("notes.txt"), dir.Sub("notes.txt"));
  }
  {
    SCOPED_TRACE("a folder whose data.mdb is zeros");
    fs::create_directories(dir.Sub("zeros"));
    WriteAll(dir.Sub("zeros/data.mdb"), std::string(64 << 10, '\0'));
    ExpectErrorNaming(dir.Sub("zeros"), dir.Sub("zeros/data.mdb"));
  }
  {
    SCOPED_TRACE("an empty folder");
    fs::create_directories(dir.Sub("empty"));
    ExpectErrorNaming(dir.Sub("empty"), dir.Sub("empty"));
  }
  // Truncated: the meta pages survive, the pages they point to do not. The
  // counts are the tree's header, in the meta page: inspection gives them
  // with the file's real size; the walks find the pages missing.
  testing::WriteNumberedLmdb(dir.Sub("cut"), 3000, 500);
  const std::string data = dir.Sub("cut/data.mdb");
  std::string bytes = ReadAll(data);
  DatabaseInfo whole;
  ASSERT_OK(InspectDatabase(dir.Sub("cut"), "", &whole));
  for (size_t keep : {size_t{3} * 4096, bytes.size() / 2}) {
    SCOPED_TRACE("truncated to " + std::to_string(keep) + " bytes");
    WriteAll(data, bytes.substr(0, keep));
    DatabaseInfo info;
    ASSERT_OK(InspectDatabase(dir.Sub("cut"), "", &info));
    EXPECT_EQ(info.file_bytes, keep);
    EXPECT_EQ(info.entries, 3000u);
    EXPECT_LT(info.file_bytes, (info.last_pgno + 1) * info.page_size);
    std::vector<std::string> problems;
    ASSERT_OK(CheckPages(dir.Sub("cut"), "", &problems));
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find(data), std::string::npos) << problems[0];
    EXPECT_NE(problems[0].find("truncated"), std::string::npos) << problems[0];
    LeafLayout layout;
    Status s = ReadLeafLayout(dir.Sub("cut"), "", &layout);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find(data), std::string::npos) << s.message();
  }
  // Cut inside the meta pages: not an LMDB file any more, for every entry point.
  WriteAll(data, bytes.substr(0, 100));
  ExpectErrorNaming(dir.Sub("cut"), data);
  std::vector<std::string> problems;
  Status s = CheckPages(dir.Sub("cut"), "", &problems);
  EXPECT_TRUE(!s.ok() || (problems.size() == 1 && problems[0].find(data) != std::string::npos));
}

// CheckPages reads what opening skips, the header of every overflow run: a
// sound file has no problem, a damaged header is one naming the file.
TEST(InspectTest, CheckPagesFindsADamagedOverflowHeaderThatTheCountsDoNotShow) {
  TempDir dir;
  Pairs big;
  for (int i = 0; i < 20; ++i) big.emplace_back(BigEndian(i), testing::RecordBytes(i, 9000));
  testing::WriteLmdb(dir.Sub("db"), big);
  std::vector<std::string> problems;
  ASSERT_OK(CheckPages(dir.Sub("db"), "", &problems));
  EXPECT_TRUE(problems.empty()) << problems.front();
  // The overflow run of record 5 begins one page header before its bytes.
  const std::string data = dir.Sub("db/data.mdb");
  std::string bytes = ReadAll(data);
  size_t at = bytes.find(testing::RecordBytes(5, 9000));
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(at % 4096, 16u);  // LMDB's page header
  const size_t flags = at - 16 + 10;  // mp_flags: P_OVERFLOW (0x04)
  ASSERT_EQ(bytes[flags] & 0x04, 0x04);
  bytes[flags] = 0x02;  // now claims to be a leaf page
  WriteAll(data, bytes);
  DatabaseInfo info;
  ASSERT_OK(InspectDatabase(dir.Sub("db"), "", &info));  // the counts are in the tree's header
  ExpectSame(info, Liblmdb(dir.Sub("db"), "", false));
  ASSERT_OK(CheckPages(dir.Sub("db"), "", &problems));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find(data), std::string::npos) << problems[0];
}

}  // namespace
}  // namespace lmdbloader
