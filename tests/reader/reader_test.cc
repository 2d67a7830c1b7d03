#include "lmdbloader/reader.h"

#include <fcntl.h>
#include <lmdb.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "corpus/corpus_format.h"
#include "io/fault_guard.h"
#include "reader_test_util.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::OpenOrDie;
using testing::RecordBytes;
using testing::TempDir;

ReaderOptions NoSavedIndex() {
  ReaderOptions options;
  options.index_dir = "none";
  return options;
}

class ReaderModesTest : public ::testing::TestWithParam<AccessMode> {};

TEST_P(ReaderModesTest, ReadsEveryRecordByPositionKeyAndBatch) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 300, 3000);
  ReaderOptions options;
  options.mode = GetParam();
  auto r = OpenOrDie(dir.Sub("db"), options);
  ASSERT_EQ(r->size(), 300u);
  std::string value;
  for (uint64_t i = 0; i < 300; ++i) {
    ASSERT_OK(r->Read(i, &value));
    ASSERT_EQ(value, RecordBytes(i, 3000)) << "record " << i;
  }
  ASSERT_OK(r->Get(RecordKey(123), &value));
  EXPECT_EQ(value, RecordBytes(123, 3000));
  EXPECT_TRUE(r->Get("missing", &value).IsNotFound());

  std::vector<uint64_t> indices = {299, 0, 150, 150};
  std::vector<std::string> out(indices.size(), std::string(3000, '\0'));
  std::vector<char*> dsts;
  for (auto& o : out) dsts.push_back(o.data());
  ASSERT_OK(r->ReadBatch(indices.data(), indices.size(), dsts.data()));
  for (size_t k = 0; k < indices.size(); ++k) EXPECT_EQ(out[k], RecordBytes(indices[k], 3000));

  ReaderStats stats = r->stats();
  EXPECT_EQ(stats.records, 300u);
  EXPECT_EQ(stats.records_read, 305u);
  EXPECT_EQ(stats.bytes_read, 305u * 3000);
  EXPECT_EQ(stats.mode, GetParam() == AccessMode::kMmap ? "mmap" : "pread");
}

INSTANTIATE_TEST_SUITE_P(Modes, ReaderModesTest,
                         ::testing::Values(AccessMode::kAuto, AccessMode::kPread, AccessMode::kMmap));

TEST(ReaderTest, ForeignKeysNamedDatabaseAndSingleFile) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> records = {
      {"video/b", "bee"}, {"video/a", "ay"}, {"img/zz", std::string(5000, 'z')}, {"", "empty-key?"}};
  records.pop_back();  // LMDB rejects empty keys
  testing::WriteLmdb(dir.Sub("named"), records, "frames");
  testing::WriteLmdb(dir.Sub("single.lmdb"), records, "", /*nosubdir=*/true);

  ReaderOptions named;
  named.db_name = "frames";
  for (auto [path, options] : {std::pair{dir.Sub("named"), named}, std::pair{dir.Sub("single.lmdb"), ReaderOptions{}}}) {
    auto r = OpenOrDie(path, options);
    ASSERT_EQ(r->size(), 3u);
    std::string key, value;
    ASSERT_OK(r->Key(0, &key));
    EXPECT_EQ(key, "img/zz");  // key order
    ASSERT_OK(r->Key(2, &key));
    EXPECT_EQ(key, "video/b");
    ASSERT_OK(r->Get("video/a", &value));
    EXPECT_EQ(value, "ay");
    ASSERT_OK(r->Read(0, &value));
    EXPECT_EQ(value, std::string(5000, 'z'));
    uint64_t at = 0;
    ASSERT_OK(r->LowerBound("video", &at));
    EXPECT_EQ(at, 1u);
    EXPECT_TRUE(r->Get("video/c", &value).IsNotFound());
  }
}

TEST(ReaderTest, SavedIndexIsLoadedAndRebuiltWhenStale) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 50, 100);
  { auto r = OpenOrDie(dir.Sub("db")); EXPECT_NE(r->stats().index_source.find("saved to"), std::string::npos); }
  { auto r = OpenOrDie(dir.Sub("db")); EXPECT_EQ(r->stats().index_source.rfind("loaded", 0), 0u); }
  // A new write changes LMDB's transaction id: the saved index is stale.
  testing::WriteLmdb(dir.Sub("db"), {{RecordKey(50), "new"}});
  auto r = OpenOrDie(dir.Sub("db"));
  EXPECT_EQ(r->stats().index_source.rfind("built", 0), 0u);
  EXPECT_EQ(r->size(), 51u);
  std::string value;
  ASSERT_OK(r->Read(50, &value));
  EXPECT_EQ(value, "new");
}

TEST(ReaderTest, IndexGoesToCacheDirWhenDatabaseDirIsReadOnly) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 10, 10);
  ::chmod(dir.path().c_str(), 0755);
  ::chmod(dir.Sub("db").c_str(), 0555);
  ::mkdir(dir.Sub("cache").c_str(), 0777);
  ::chmod(dir.Sub("cache").c_str(), 0777);
  int code = testing::RunUnprivileged([&] {
    ReaderOptions options;
    options.index_dir = dir.Sub("cache");
    std::unique_ptr<Reader> r;
    Status s = Reader::Open(dir.Sub("db"), options, &r);
    if (!s.ok()) {
      std::fprintf(stderr, "open failed: %s\n", s.ToString().c_str());
      return 1;
    }
    std::string source = r->stats().index_source;
    if (source.find("saved to " + dir.Sub("cache")) == std::string::npos) {
      std::fprintf(stderr, "index source: %s\n", source.c_str());
      return 2;
    }
    return 0;
  });
  EXPECT_EQ(code, 0);
  ::chmod(dir.Sub("db").c_str(), 0755);
}

TEST(ReaderTest, ViewsSurviveRemapAndClose) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 20, 10000);
  ReaderOptions options;
  options.mode = AccessMode::kMmap;
  RecordView view;
  {
    auto r = OpenOrDie(dir.Sub("db"), options);
    ASSERT_OK(r->View(7, &view));
    ASSERT_OK(r->Remap());
    EXPECT_EQ(view.bytes(), RecordBytes(7, 10000));
    EXPECT_EQ(r->stats().remaps, 1u);
  }
  EXPECT_EQ(view.bytes(), RecordBytes(7, 10000));  // the reader is gone, the view is not
}

TEST(ReaderTest, ViewInPreadModeIsInvalidArgument) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 2, 10);
  auto r = OpenOrDie(dir.Sub("db"));
  RecordView view;
  EXPECT_EQ(r->View(0, &view).code(), Status::Code::kInvalidArgument);
}

TEST(ReaderTest, ManyThreadsReadAtOnce) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 2000, 700);
  for (AccessMode mode : {AccessMode::kPread, AccessMode::kMmap}) {
    ReaderOptions options;
    options.mode = mode;
    options.rss_budget = 16 << 20;
    auto r = OpenOrDie(dir.Sub("db"), options);
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::string v;
        for (uint64_t i = t; i < 2000; i += 3) {
          if (!r->Read(i, &v).ok() || v != RecordBytes(i, 700)) ++bad;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(bad.load(), 0) << AccessModeName(mode);
  }
}

TEST(ReaderTest, ChildAfterForkReopensAndReadsCorrectly) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 100, 5000);
  for (bool lock : {false, true}) {
    ReaderOptions options;
    options.lock = lock;
    auto r = OpenOrDie(dir.Sub("db"), options);
    std::string v;
    ASSERT_OK(r->Read(1, &v));
    pid_t pid = ::fork();
    if (pid == 0) {
      int bad = 0;
      for (uint64_t i = 0; i < 100; ++i)
        if (!r->Read(i, &v).ok() || v != RecordBytes(i, 5000)) ++bad;
      ::_exit(bad == 0 ? 0 : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "lock=" << lock;
    ASSERT_OK(r->Read(2, &v));  // the parent's handles still work
    EXPECT_EQ(v, RecordBytes(2, 5000));
  }
}

// ---- Bad input: each gives a Status of the right kind that names the file.

void ExpectOpenError(const std::string& path, Status::Code code, const std::string& fragment,
                     ReaderOptions options = {}) {
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(path, options, &r);
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
  EXPECT_EQ(r, nullptr);
}

TEST(ReaderErrorsTest, MissingPath) {
  ExpectOpenError("/nonexistent/db", Status::Code::kIOError, "/nonexistent/db: No such file");
  TempDir dir;
  ExpectOpenError(dir.path(), Status::Code::kIOError, dir.Sub("data.mdb"));
}

TEST(ReaderErrorsTest, NotAnLmdbFile) {
  TempDir dir;
  std::string path = dir.Sub("junk.bin");
  std::ofstream(path) << std::string(20000, 'j');
  ExpectOpenError(path, Status::Code::kCorruption, path);
  ExpectOpenError(path, Status::Code::kCorruption, "not an LMDB file");
}

TEST(ReaderErrorsTest, TruncatedFile) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 200, 5000);
  std::string data = dir.Sub("db/data.mdb");
  ::truncate(data.c_str(), 5 * 4096);
  ExpectOpenError(dir.Sub("db"), Status::Code::kCorruption, "truncated");
}

TEST(ReaderErrorsTest, CorruptedPages) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 3000, 100);
  std::string data = dir.Sub("db/data.mdb");
  // Overwrite everything past the two meta pages with junk: the tree pages
  // the meta page points at are garbage now.
  struct stat st;
  ::stat(data.c_str(), &st);
  int fd = ::open(data.c_str(), O_WRONLY);
  std::string junk(st.st_size - 2 * 4096, '\x5a');
  ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), 2 * 4096), static_cast<ssize_t>(junk.size()));
  ::close(fd);
  ExpectOpenError(dir.Sub("db"), Status::Code::kCorruption, data, NoSavedIndex());
}

TEST(ReaderErrorsTest, PermissionDenied) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 2, 10);
  ::chmod(dir.path().c_str(), 0755);
  ::chmod(dir.Sub("db/data.mdb").c_str(), 0);
  int code = testing::RunUnprivileged([&] {
    std::unique_ptr<Reader> r;
    Status s = Reader::Open(dir.Sub("db"), {}, &r);
    bool ok = s.code() == Status::Code::kIOError && r == nullptr &&
              s.message().find(dir.Sub("db/data.mdb")) != std::string::npos &&
              s.message().find("Permission denied") != std::string::npos;
    if (!ok) std::fprintf(stderr, "unexpected: %s\n", s.ToString().c_str());
    return ok ? 0 : 1;
  });
  EXPECT_EQ(code, 0);
}

TEST(ReaderErrorsTest, MissingNamedDatabase) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), {{"a", "b"}}, "present");
  ReaderOptions options;
  options.db_name = "absent";
  ExpectOpenError(dir.Sub("db"), Status::Code::kNotFound, "absent", options);
}

TEST(ReaderTest, DupsortPositionsRunOverKeyDuplicatePairs) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), {{"b", "2"}, {"a", "2"}, {"a", "1"}, {"b", "0"}, {"c", "9"}}, "dups", false,
                     MDB_DUPSORT);
  ReaderOptions options;
  options.db_name = "dups";
  for (int open = 0; open < 2; ++open) {  // built, then loaded from the saved index
    std::unique_ptr<Reader> r;
    ASSERT_OK(Reader::Open(dir.Sub("db"), options, &r));
    EXPECT_EQ(r->db_flags() & MDB_DUPSORT, static_cast<unsigned>(MDB_DUPSORT));
    ASSERT_EQ(r->size(), 5u);
    std::vector<std::string> pairs;
    for (uint64_t i = 0; i < r->size(); ++i) {
      std::string k, v;
      ASSERT_OK(r->Key(i, &k));
      ASSERT_OK(r->Read(i, &v));
      pairs.push_back(k + "=" + v);
    }
    EXPECT_EQ(pairs, (std::vector<std::string>{"a=1", "a=2", "b=0", "b=2", "c=9"}));
    uint64_t pos = 0;
    ASSERT_OK(r->Find("b", &pos));
    EXPECT_EQ(pos, 2u);
  }
}

TEST(ReaderErrorsTest, InvalidOptions) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 100000, 8);
  ReaderOptions tiny_window;
  tiny_window.mmap_window = 10;
  ExpectOpenError(dir.Sub("db"), Status::Code::kInvalidArgument, "mmap_window", tiny_window);
  ReaderOptions tiny_budget;
  tiny_budget.rss_budget = 100000;
  ExpectOpenError(dir.Sub("db"), Status::Code::kInvalidArgument, "below the floor of 1048576 bytes", tiny_budget);
  ReaderOptions held;
  held.rss_budget = 1 << 20;  // smaller than 100k records x 12 bytes
  held.index_residence = IndexResidence::kResident;
  ExpectOpenError(dir.Sub("db"), Status::Code::kInvalidArgument, "smaller than the record index", held);
  ReaderOptions paged_without_file;
  paged_without_file.index_residence = IndexResidence::kPaged;
  paged_without_file.index_dir = "none";
  ExpectOpenError(dir.Sub("db"), Status::Code::kInvalidArgument, "index_dir must not be 'none'", paged_without_file);
}

TEST(ReaderTest, ABudgetUnderTheResidentIndexOpensItPaged) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 100000, 8);
  ReaderOptions options;
  options.rss_budget = 1 << 20;  // the resident index would need 1.2 MB
  options.index_dir = dir.Sub("idx");
  auto r = OpenOrDie(dir.Sub("db"), options);
  // Which form was chosen (paged, with the table of leaves: 8 bytes a leaf
  // fit the budget's quarter); what the process holds is measured by the
  // kernel in tests/python/test_large_corpus.py.
  EXPECT_EQ(r->stats().index_residence, "leaves");
  std::string v;
  for (uint64_t i : {0ull, 1ull, 4096ull, 99999ull}) {
    ASSERT_OK(r->Read(i, &v));
    EXPECT_EQ(v, RecordBytes(i, 8));
  }
}

// Every record of a WriteNumberedLmdb database, as written.
int BadRecords(Reader& r, uint64_t records, uint32_t bytes) {
  int bad = 0;
  std::string v;
  for (uint64_t i = 0; i < records; ++i)
    if (!r.Read(i, &v).ok() || v != RecordBytes(i, bytes)) ++bad;
  return bad;
}

// A scratch cleaner empties the index folder under a running job: the
// paged reader reads on, and so does a child forked from it, through the
// descriptor it inherited; a child that lost that descriptor too (closed
// by a caller) indexes the data again instead of failing.
TEST(ReaderTest, APagedIndexDeletedUnderTheReaderStillReadsInForkedChildren) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 100000, 8);
  ReaderOptions options;
  options.rss_budget = 1 << 20;  // paged: the resident index would need 1.2 MB
  options.index_dir = dir.Sub("idx");
  options.index_residence = IndexResidence::kPaged;  // every read through the index file
  auto r = OpenOrDie(dir.Sub("db"), options);
  ASSERT_EQ(r->stats().index_residence, "paged");
  const std::string saved = r->stats().index_source.substr(r->stats().index_source.find(dir.Sub("idx")));
  const std::string index_file = saved.substr(0, saved.find(')'));
  ASSERT_TRUE(std::filesystem::exists(index_file)) << index_file;
  std::filesystem::remove_all(dir.Sub("idx"));
  for (bool lose_descriptor : {false, true}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (lose_descriptor) {
        for (int fd = 3; fd < 1024; ++fd) {
          char link[4096];
          const ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), link, sizeof(link) - 1);
          if (n > 0 && std::string(link, static_cast<size_t>(n)) == index_file + " (deleted)") ::close(fd);
        }
      }
      ::_exit(BadRecords(*r, 100000, 8) == 0 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "lose_descriptor=" << lose_descriptor;
  }
  EXPECT_EQ(BadRecords(*r, 100000, 8), 0);
  // The child that indexed the data again saved its index anew.
  EXPECT_TRUE(std::filesystem::exists(index_file)) << index_file;
}

TEST(ReaderErrorsTest, IndexOutOfRange) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 5, 10);
  auto r = OpenOrDie(dir.Sub("db"));
  std::string v;
  Status s = r->Read(5, &v);
  EXPECT_EQ(s.code(), Status::Code::kOutOfRange);
  EXPECT_NE(s.message().find("index 5 out of range for " + dir.Sub("db") + " (5 records)"), std::string::npos)
      << s.message();
  uint64_t indices[] = {0, 99};
  char buf[2][10];
  char* dsts[] = {buf[0], buf[1]};
  EXPECT_EQ(r->ReadBatch(indices, 2, dsts).code(), Status::Code::kOutOfRange);
  char small[4];
  EXPECT_EQ(r->ReadInto(0, small, sizeof(small)).code(), Status::Code::kInvalidArgument);
}

TEST(ReaderErrorsTest, FileTruncatedAfterOpenIsAnErrorNotACrash) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 100, 5000);
  auto r = OpenOrDie(dir.Sub("db"), NoSavedIndex());
  ::truncate(dir.Sub("db/data.mdb").c_str(), 8192);
  std::string v;
  Status s = r->Read(99, &v);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("data.mdb"), std::string::npos);
}

// A plain mapping dies of SIGBUS here; the Reader's guarded mapping reads
// zeros and reports the shrink on every read since.
TEST(ReaderErrorsTest, FileTruncatedUnderMappingIsAnErrorNotSigbus) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 100, 5000);
  ReaderOptions options = NoSavedIndex();
  options.mode = AccessMode::kMmap;
  auto r = OpenOrDie(dir.Sub("db"), options);
  std::string v;
  ASSERT_OK(r->Read(99, &v));
  RecordView view;
  ASSERT_OK(r->View(98, &view));
  ASSERT_OK(r->Remap());  // the view keeps the old mapping, whose pages are released: it reads the file again
  ASSERT_EQ(::truncate(dir.Sub("db/data.mdb").c_str(), 8192), 0);
  EXPECT_OK(r->CheckMappings());  // nothing read past the end yet
  Status s = r->Read(99, &v);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_NE(s.message().find("data.mdb"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("shrank under its mapping"), std::string::npos) << s.ToString();
  EXPECT_EQ(r->Read(0, &v).code(), Status::Code::kIOError);  // every later read of that mapping
  EXPECT_EQ(r->CheckMappings().code(), Status::Code::kIOError);
  EXPECT_EQ(view.bytes(), std::string(5000, '\0'));  // its pages are gone: zeros, not a crash
  RecordView after;
  EXPECT_EQ(r->View(97, &after).code(), Status::Code::kIOError);
}

// Rewrites every value of the database at `dir` in one committed write
// transaction (LMDB reuses the pages freed two transactions back), from a
// child process: a second environment of the same file in this process would
// drop this process's locks, the lock-file reader's slot included.
void RewriteAll(const std::string& dir, uint64_t count, size_t value_size, char fill) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    MDB_env* env = nullptr;
    MDB_txn* txn = nullptr;
    MDB_dbi dbi;
    if (mdb_env_create(&env) || mdb_env_set_mapsize(env, 1ull << 30) || mdb_env_open(env, dir.c_str(), 0, 0644) ||
        mdb_txn_begin(env, nullptr, 0, &txn) || mdb_dbi_open(txn, nullptr, 0, &dbi))
      _exit(2);
    std::string value(value_size, fill);
    for (uint64_t i = 0; i < count; ++i) {
      char key[8];
      for (int b = 0; b < 8; ++b) key[b] = static_cast<char>(i >> (56 - 8 * b));
      MDB_val k{8, key}, v{value.size(), value.data()};
      if (mdb_put(txn, dbi, &k, &v, 0)) _exit(3);
    }
    _exit(mdb_txn_commit(txn) ? 4 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// Three commits rewrite every value (LMDB's two meta pages are reused by
// then, and freed pages with them); returns how many of the 200 records of
// 3000 bytes `snapshot` reads differently from before.
int ChangedAfterThreeRewrites(const std::string& db, Reader* snapshot) {
  RewriteAll(db, 200, 3000, 'a');
  RewriteAll(db, 200, 3000, 'b');
  RewriteAll(db, 200, 3000, 'c');
  std::string v;
  int changed = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    if (!snapshot->Read(i, &v).ok()) return -1;
    changed += v != RecordBytes(i, 3000);
  }
  return changed;
}

// Without the lock file nothing keeps a writer from reusing the pages a
// reader indexed: after a commit, reads are an error naming the file, not
// another transaction's bytes. With it, the reader keeps its snapshot.
TEST_P(ReaderModesTest, WriterCommitWithoutLockFileIsAnErrorNotOtherBytes) {
  TempDir dir;
  const std::string db = dir.Sub("db");
  testing::WriteNumberedLmdb(db, 200, 3000);
  ReaderOptions unlocked = NoSavedIndex(), locked = NoSavedIndex();
  unlocked.mode = locked.mode = GetParam();
  locked.lock = true;
  auto plain = OpenOrDie(db, unlocked);
  auto snapshot = OpenOrDie(db, locked);
  std::string v;
  ASSERT_OK(plain->Read(5, &v));
  ASSERT_OK(plain->CheckMappings());
  RewriteAll(db, 200, 3000, 'a');
  RewriteAll(db, 200, 3000, 'b');
  RewriteAll(db, 200, 3000, 'c');
  Status s = plain->Read(5, &v);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_NE(s.message().find(db + "/data.mdb: a writer committed"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("lock=True"), std::string::npos) << s.ToString();
  std::vector<uint64_t> batch = {1, 2, 3};
  std::vector<std::string> out(3, std::string(3000, '\0'));
  std::vector<char*> dsts = {out[0].data(), out[1].data(), out[2].data()};
  EXPECT_EQ(plain->ReadBatch(batch.data(), 3, dsts.data()).code(), Status::Code::kIOError);
  EXPECT_EQ(plain->CheckMappings().code(), Status::Code::kIOError);
  if (GetParam() == AccessMode::kMmap) {
    RecordView view;
    EXPECT_EQ(plain->View(7, &view).code(), Status::Code::kIOError);
  }
  for (uint64_t i : {0, 5, 199}) {
    ASSERT_OK(snapshot->Read(i, &v));
    EXPECT_EQ(v, RecordBytes(i, 3000)) << i;
  }
  // Reopened, it reads the new transaction.
  auto fresh = OpenOrDie(db, unlocked);
  ASSERT_OK(fresh->Read(5, &v));
  EXPECT_EQ(v, std::string(3000, 'c'));
}

// liblmdb's mdb_env_close clears every reader-table slot of the process, and
// a second environment of one file resets the process's locks: each Reader
// of a database in a process shares one environment, so another reader of it
// opening and closing leaves this one's snapshot held, and the writer's next
// commits go to other pages (before, all 200 values read as the writer's).
TEST_P(ReaderModesTest, AnotherReaderOfTheSameDatabaseClosingKeepsTheSnapshot) {
  TempDir dir;
  const std::string db = dir.Sub("db");
  testing::WriteNumberedLmdb(db, 200, 3000);
  ReaderOptions locked = NoSavedIndex();
  locked.mode = GetParam();
  locked.lock = true;
  auto snapshot = OpenOrDie(db, locked);
  {
    auto other = OpenOrDie(db, locked);
    auto third = OpenOrDie(db, locked);  // two at once, closed in the order they opened
    std::string v;
    ASSERT_OK(other->Read(7, &v));
    other.reset();
    ASSERT_OK(third->Read(8, &v));
  }
  EXPECT_EQ(ChangedAfterThreeRewrites(db, snapshot.get()), 0);
  auto fresh = OpenOrDie(db, locked);  // a new reader sees the last commit
  std::string v;
  ASSERT_OK(fresh->Read(5, &v));
  EXPECT_EQ(v, std::string(3000, 'c'));
}

// The readers of a database in a process share one environment, whose map
// can adopt a writer's larger map only while none of them holds a snapshot
// (lmdb.h, mdb_env_set_mapsize): a reader opened meanwhile is refused, naming
// the file and what to do, and opens once the other is closed.
TEST(ReaderTest, WriterGrowingTheMapPastASharedEnvironmentIsAClearError) {
  TempDir dir;
  const std::string db = dir.Sub("db");
  testing::WriteNumberedLmdb(db, 10, 100);  // a map of 64 MiB and a little
  ReaderOptions locked = NoSavedIndex();
  locked.lock = true;
  auto first = OpenOrDie(db, locked);
  RewriteAll(db, 24000, 4000, 'a');  // a 1 GiB map, 94 MiB of pages
  std::unique_ptr<Reader> second;
  Status s = Reader::Open(db, locked, &second);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_NE(s.message().find(db + "/data.mdb"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("close that reader"), std::string::npos) << s.ToString();
  std::string v;
  ASSERT_OK(first->Read(3, &v));
  EXPECT_EQ(v, RecordBytes(3, 100));
  first.reset();
  second = OpenOrDie(db, locked);
  EXPECT_EQ(second->size(), 24000u);
  ASSERT_OK(second->Read(3, &v));
  EXPECT_EQ(v, std::string(4000, 'a'));
}

// Record i as commit `gen` of LiveWriter writes it: i and gen, then a byte
// of both, repeated; every fourth record on 1-3 overflow pages.
std::string LiveValue(uint32_t i, uint32_t gen) {
  const size_t size = i % 4 == 0 ? 2100 + (gen * 131 + i * 17) % 10000 : 40 + (gen * 7 + i) % 400;
  std::string v(size, static_cast<char>(i * 31 + gen));
  std::memcpy(v.data(), &i, 4);
  std::memcpy(v.data() + 4, &gen, 4);
  return v;
}

// Whether `v` is record i as some commit wrote it.
bool IsLiveValue(uint32_t i, const std::string& v) {
  uint32_t key = 0, gen = 0;
  if (v.size() < 8) return false;
  std::memcpy(&key, v.data(), 4);
  std::memcpy(&gen, v.data() + 4, 4);
  return key == i && v == LiveValue(i, gen);
}

// A writer in a child process: commits `count` records (gen 0), writes a
// byte to `ready`, then rewrites 20 of them per transaction until `seconds`
// have passed. Exits with the number of commits (capped at 255) or 0 on error.
pid_t StartLiveWriter(const std::string& dir, uint32_t count, double seconds, int ready) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  MDB_env* env = nullptr;
  if (mdb_env_create(&env) || mdb_env_set_mapsize(env, 256ull << 20) || mdb_env_open(env, dir.c_str(), MDB_NOSYNC, 0644))
    _exit(0);
  auto commit = [&](uint32_t gen, uint32_t first, uint32_t n, uint32_t step) {
    MDB_txn* txn = nullptr;
    MDB_dbi dbi;
    if (mdb_txn_begin(env, nullptr, 0, &txn) || mdb_dbi_open(txn, nullptr, 0, &dbi)) _exit(0);
    for (uint32_t k = 0; k < n; ++k) {
      const uint32_t i = (first + k * step) % count;
      char key[4] = {static_cast<char>(i >> 24), static_cast<char>(i >> 16), static_cast<char>(i >> 8),
                     static_cast<char>(i)};
      std::string value = LiveValue(i, gen);
      MDB_val kv{4, key}, vv{value.size(), value.data()};
      if (mdb_put(txn, dbi, &kv, &vv, 0)) _exit(0);
    }
    if (mdb_txn_commit(txn)) _exit(0);
  };
  commit(0, 0, count, 1);
  if (write(ready, "r", 1) != 1) _exit(0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint32_t gen = 1;
  for (; std::chrono::steady_clock::now() < deadline; ++gen) commit(gen, gen * 7919, 20, 37);
  mdb_env_close(env);
  _exit(gen > 255 ? 255 : static_cast<int>(gen));
}

// lock=True readers of one database in two threads of this process open,
// check and close again and again while a writer commits: each open walks
// a snapshot that the writer keeps from reuse, so none reports damage and
// every record read is one a commit wrote for it (the pages it reads are
// never the writer's newer ones).
TEST(ReaderTest, LockReadersReopeningBesideACommittingWriterReadTheirSnapshots) {
  TempDir dir;
  const std::string db = dir.Sub("db");
  std::filesystem::create_directory(db);
  constexpr uint32_t kCount = 300;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t writer = StartLiveWriter(db, kCount, 3.0, ready[1]);
  ASSERT_GE(writer, 0);
  char byte;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  std::atomic<bool> stop{false};
  std::atomic<int> opens{0};
  std::vector<std::string> errors[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      ReaderOptions options = NoSavedIndex();
      options.lock = true;
      options.mode = t == 0 ? AccessMode::kMmap : AccessMode::kPread;
      std::string v;
      for (uint64_t round = 0; !stop.load(); ++round) {
        std::unique_ptr<Reader> r;
        Status s = Reader::Open(db, options, &r);
        ++opens;
        if (!s.ok()) {
          errors[t].push_back(s.ToString());
          continue;
        }
        if (r->size() != kCount) errors[t].push_back(std::to_string(r->size()) + " records");
        for (uint64_t i = round % 7; i < r->size(); i += 29) {
          s = r->Read(i, &v);
          if (!s.ok() || !IsLiveValue(static_cast<uint32_t>(i), v))
            errors[t].push_back("record " + std::to_string(i) + ": " + (s.ok() ? "other bytes" : s.ToString()));
        }
      }
    });
  }
  int status = 0;
  ASSERT_EQ(::waitpid(writer, &status, 0), writer);
  stop = true;
  for (auto& th : threads) th.join();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_GT(WEXITSTATUS(status), 20) << "commits while the readers opened";
  EXPECT_GT(opens.load(), 40);
  for (int t = 0; t < 2; ++t)
    EXPECT_TRUE(errors[t].empty()) << errors[t].size() << " wrong, first: " << errors[t].front();
  std::printf("%d opens beside %d+ commits\n", opens.load(), WEXITSTATUS(status));
}

// A child after fork that drops its copy of a lock=True reader unused leaves
// the parent's snapshot alone: ending the transaction there would free the
// parent's slot of the lock file, shared by both.
TEST(ReaderTest, ChildDroppingAnInheritedSnapshotKeepsTheParents) {
  TempDir dir;
  const std::string db = dir.Sub("db");
  testing::WriteNumberedLmdb(db, 200, 3000);
  ReaderOptions locked = NoSavedIndex();
  locked.lock = true;
  auto snapshot = OpenOrDie(db, locked);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    snapshot.reset();
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(ChangedAfterThreeRewrites(db, snapshot.get()), 0);
}

// A shard set of thousands of parts maps thousands of files: mappings past
// the first block of guard slots are guarded too.
TEST(ReaderErrorsTest, MappingsBeyondFiveThousandAreStillGuarded) {
  TempDir dir;
  const std::string path = dir.Sub("file");
  std::ofstream(path) << std::string(1 << 16, 'x');
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<std::pair<void*, int>> guarded;
  for (int i = 0; i < 5000; ++i) {
    void* p = ::mmap(nullptr, 1 << 16, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_NE(p, MAP_FAILED);
    guarded.emplace_back(p, GuardMapping(p, 1 << 16));
    ASSERT_GE(guarded.back().second, 0) << "mapping " << i;
  }
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  const auto* last = static_cast<const volatile char*>(guarded.back().first);
  EXPECT_EQ(last[1 << 15], 0);  // past the end: zeros, not SIGBUS
  EXPECT_TRUE(MappingShrank(guarded.back().second));
  EXPECT_FALSE(MappingShrank(guarded.front().second));
  for (auto& [p, handle] : guarded) {
    UnguardMapping(handle);
    ::munmap(p, 1 << 16);
  }
  ::close(fd);
}

// Faults the guard does not own reach the handler it replaced: here the
// default action, which ends the process.
TEST(ReaderErrorsTest, SigbusOutsideGuardedMappingsStillEndsTheProcess) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 100, 5000);
  ReaderOptions options = NoSavedIndex();
  options.mode = AccessMode::kMmap;
  auto r = OpenOrDie(dir.Sub("db"), options);  // installs the guard
  const std::string other = dir.Sub("other");
  std::ofstream(other) << std::string(1 << 16, 'x');
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(other.c_str(), O_RDWR);
    auto* p = static_cast<volatile char*>(::mmap(nullptr, 1 << 16, PROT_READ, MAP_SHARED, fd, 0));
    if (::ftruncate(fd, 0) != 0) ::_exit(3);
    char c = p[1 << 15];  // SIGBUS: not a guarded mapping
    ::_exit(c == 0 ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  // Killed by SIGBUS (or, under a sanitizer, its report and exit status 1).
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the fault was swallowed";
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 3);
}

// After fork the Reader opens its data file again and closes the inherited
// copy, but only while that number is still the data file: a caller that
// closed descriptors it does not own may have opened a file of its own there.
TEST(ReaderForkTest, AChildNeverClosesADescriptorTheCallerReused) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 50, 1000);
  auto r = OpenOrDie(dir.Sub("db"), NoSavedIndex());
  const std::string data = std::filesystem::canonical(dir.Sub("db") + "/data.mdb").string();
  int reader_fd = -1;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(entry.path(), ec).string() == data)
      reader_fd = std::stoi(entry.path().filename().string());
  }
  ASSERT_GE(reader_fd, 0);
  const std::string mine = dir.Sub("mine");
  std::ofstream(mine) << "the caller's";
  pid_t pid = ::fork();
  if (pid == 0) {
    int f = ::open(mine.c_str(), O_RDONLY);
    if (f < 0 || ::dup2(f, reader_fd) != reader_fd) ::_exit(10);  // the number is the caller's now
    ::close(f);
    std::string value;
    if (!r->Read(3, &value).ok() || value != testing::RecordBytes(3, 1000)) ::_exit(11);  // reopens
    struct stat got, want;
    if (::fstat(reader_fd, &got) != 0 || ::stat(mine.c_str(), &want) != 0) ::_exit(12);  // closed
    ::_exit(got.st_ino == want.st_ino ? 0 : 13);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// In a forked child: installs `handler` as the process's SIGBUS handler, then
// opens `path` in mmap mode, which puts the guard in front of it (exits 10
// or 11 when either fails).
std::unique_ptr<Reader> GuardInFrontOf(void (*handler)(int, siginfo_t*, void*), const std::string& path) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGBUS, &sa, nullptr) != 0) ::_exit(10);
  ReaderOptions options = NoSavedIndex();
  options.mode = AccessMode::kMmap;
  std::unique_ptr<Reader> r;
  if (!Reader::Open(path, options, &r).ok()) ::_exit(11);
  return r;
}

// A mapping of 64 KiB of `path`, a file the guard knows nothing of, whose
// file is then truncated: touching its second half raises SIGBUS (exits 12
// when it cannot be set up).
volatile char* ForeignTruncatedMapping(const std::string& path) {
  std::ofstream(path) << std::string(1 << 16, 'x');
  int fd = ::open(path.c_str(), O_RDWR);
  void* p = ::mmap(nullptr, 1 << 16, PROT_READ, MAP_SHARED, fd, 0);
  if (fd < 0 || p == MAP_FAILED || ::ftruncate(fd, 0) != 0) ::_exit(12);
  return static_cast<volatile char*>(p);
}

// A caller's own SIGBUS handler, installed before the guard, still gets the
// faults the guard does not own, with their address; guarded mappings still
// read past a truncation as an error. In a child: the handlers are the
// process's.
sigjmp_buf g_caller_jump;
volatile uintptr_t g_caller_fault = 0;
void CallerSigbusHandler(int, siginfo_t* info, void*) {
  g_caller_fault = reinterpret_cast<uintptr_t>(info->si_addr);
  siglongjmp(g_caller_jump, 1);
}

TEST(ReaderErrorsTest, ACallersSigbusHandlerStillGetsFaultsThatAreNotTheGuards) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 100, 5000);
  const std::string other = dir.Sub("other");
  pid_t pid = ::fork();
  if (pid == 0) {
    std::unique_ptr<Reader> r = GuardInFrontOf(CallerSigbusHandler, dir.Sub("db"));
    volatile char* p = ForeignTruncatedMapping(other);
    if (sigsetjmp(g_caller_jump, 1) == 0) {
      char c = p[1 << 15];  // SIGBUS: not a guarded mapping
      ::_exit(c == 0 ? 13 : 14);  // swallowed
    }
    if (g_caller_fault != reinterpret_cast<uintptr_t>(p + (1 << 15))) ::_exit(15);
    // The guard still owns its own mappings' faults.
    if (::truncate((dir.Sub("db") + "/data.mdb").c_str(), 8192) != 0) ::_exit(16);
    std::string value;
    Status s = r->Read(99, &value);
    ::_exit(s.ok() ? 17 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A caller's handler that returns without resolving the fault: the access
// faults again at once, and the guard then applies the default action
// instead of handing the same fault on forever (a hang).
void ReturningSigbusHandler(int, siginfo_t*, void*) {}

TEST(ReaderErrorsTest, AFaultTheCallersHandlerLeavesUnresolvedEndsTheProcessNotAHang) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 100, 5000);
  const std::string other = dir.Sub("other");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(20);  // a hang ends by SIGALRM, and fails the test
    std::unique_ptr<Reader> r = GuardInFrontOf(ReturningSigbusHandler, dir.Sub("db"));
    volatile char* p = ForeignTruncatedMapping(other);
    char c = p[1 << 15];
    ::_exit(c == 0 ? 13 : 14);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGBUS);
}

}  // namespace
}  // namespace lmdbloader
