// The checked page reader against liblmdb itself (every key and value of
// every kind of tree, in the same order), and against damage: targeted page
// edits and random mutations end in a Corruption status, never a crash (this
// suite runs under ASan + UBSan in CI).
#include "lmdb/lmdb_pages.h"
#include "io/batch_io.h"
#include "lmdbloader/database_info.h"
#include "lmdbloader/leaf_layout.h"

#include <fcntl.h>
#include <lmdb.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::ReadAll;
using testing::WriteAll;

using testing::TempDir;
using Pairs = std::vector<std::pair<std::string, std::string>>;

// Every item the checked walk finds, values read back from the file at the
// offsets it reports; its pages read through `io` when given.
Status WalkPairs(const std::string& dir, const std::string& db_name, Pairs* out, BatchIo* io = nullptr) {
  LmdbFile file;
  LMDBLOADER_RETURN_IF_ERROR(file.Open(dir + "/data.mdb"));
  file.ReadWith(io);
  LmdbMeta meta;
  LMDBLOADER_RETURN_IF_ERROR(file.ReadMeta(0, &meta));
  LmdbTree tree = meta.main_tree;
  if (!db_name.empty()) LMDBLOADER_RETURN_IF_ERROR(file.FindNamedTree(meta, db_name, &tree));
  return file.Walk(meta, tree, [&](const LmdbItem& item) -> Status {
    std::string value(item.value_size, '\0');
    if (::pread(file.fd(), value.data(), value.size(), item.value_offset) != static_cast<ssize_t>(value.size()))
      return Status::IOError("short read");
    if (!item.on_overflow_pages && item.value != value) return Status::Corruption("inline bytes differ");
    out->emplace_back(std::string(item.key), value);
    return Status::OK();
  });
}

struct TreeCase {
  const char* name;
  unsigned flags;
  Pairs records;
  std::string db_name;
};

std::string U32(uint32_t v) { return std::string(reinterpret_cast<char*>(&v), 4); }
std::string U64(uint64_t v) { return std::string(reinterpret_cast<char*>(&v), 8); }

std::vector<TreeCase> Cases() {
  std::mt19937_64 rng(7);
  std::vector<TreeCase> cases;
  Pairs small, big, ints, dups_few, dups_many, fixed, mixed;
  for (int i = 0; i < 3000; ++i) small.emplace_back("key" + std::to_string(i * 7919 % 3001), testing::RecordBytes(i, 100));
  for (int i = 0; i < 300; ++i) big.emplace_back("k" + std::to_string(i), testing::RecordBytes(i, 3000 + 97 * i));
  for (uint32_t i = 0; i < 2000; ++i) ints.emplace_back(U32(i * 2654435761u), std::to_string(i));
  for (int k = 0; k < 200; ++k)
    for (int d = 0; d < 3; ++d) dups_few.emplace_back("key" + std::to_string(k), "dup" + std::to_string(d * 31 % 7));
  for (int k = 0; k < 5; ++k)
    for (int d = 0; d < 900; ++d) dups_many.emplace_back("k" + std::to_string(k), testing::RecordBytes(d, 40));
  for (int k = 0; k < 30; ++k)
    for (int d = 0; d < (k % 3 ? 4 : 800); ++d) fixed.emplace_back("k" + std::to_string(k), U64(rng()));
  for (int i = 0; i < 500; ++i) mixed.emplace_back(std::string(1 + i % 300, static_cast<char>('a' + i % 26)) + std::to_string(i),
                                                   testing::RecordBytes(i, i % 5 == 0 ? 9000 : i % 1500));
  mixed.emplace_back("empty value", "");
  cases.push_back({"small_inline", 0, small, ""});
  cases.push_back({"overflow", 0, big, ""});
  cases.push_back({"integerkey", MDB_INTEGERKEY, ints, ""});
  cases.push_back({"reversekey", MDB_REVERSEKEY, small, ""});
  cases.push_back({"dupsort_subpages", MDB_DUPSORT, dups_few, ""});
  cases.push_back({"dupsort_subtrees", MDB_DUPSORT, dups_many, ""});
  cases.push_back({"dupfixed", MDB_DUPSORT | MDB_DUPFIXED | MDB_INTEGERDUP, fixed, ""});
  cases.push_back({"reversedup", MDB_DUPSORT | MDB_REVERSEDUP, dups_few, ""});
  // Fixed-size duplicates few enough to stay inside their node: P_LEAF2
  // sub-pages, whose mp_lower and mp_upper do not bound the entries (1-byte
  // entries move mp_upper past the sub-page's end).
  for (size_t size : {1, 2, 3, 5}) {
    Pairs subpages;
    for (int k = 0; k < 50; ++k)
      for (int d = 0; d < 1 + k % 6; ++d) subpages.emplace_back("k" + std::to_string(k), std::string(size, char('a' + d)));
    cases.push_back({size == 1 ? "dupfixed_subpages_1" : size == 2 ? "dupfixed_subpages_2"
                                 : size == 3 ? "dupfixed_subpages_3" : "dupfixed_subpages_5",
                     MDB_DUPSORT | MDB_DUPFIXED, subpages, "fixed"});
  }
  cases.push_back({"mixed_sizes_named", 0, mixed, "named"});
  cases.push_back({"empty", 0, {}, ""});
  return cases;
}

// One pread() per run of pages, or a branch's children read at once through
// each engine: the same items.
TEST(LmdbPagesTest, WalkMatchesLiblmdbCursorOnEveryKindOfTree) {
  std::unique_ptr<BatchIo> threads, uring;
  std::string why;
  ASSERT_OK(BatchIo::Create(IoEngine::kThreads, 8, &threads, &why));
  ASSERT_OK(BatchIo::Create(IoEngine::kAuto, 8, &uring, &why));
  for (const TreeCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    testing::WriteLmdb(dir.Sub("db"), c.records, c.db_name, false, c.flags);
    Pairs expected = testing::LiblmdbPairs(dir.Sub("db"), c.db_name);
    for (BatchIo* io : {static_cast<BatchIo*>(nullptr), threads.get(), uring.get()}) {
      Pairs walked;
      ASSERT_OK(WalkPairs(dir.Sub("db"), c.db_name, &walked, io));
      ASSERT_EQ(walked.size(), expected.size());
      EXPECT_TRUE(walked == expected) << "the walk differs from liblmdb's cursor (io " << (io ? IoEngineName(io->kind()) : "none") << ")";
    }
  }
}

// Every leaf page of a tree without duplicates begins one run of keys: the
// runs add up to LMDB's own count of leaf pages. Duplicates that outgrow their
// node get a tree of their own, with runs of their own. (Where liblmdb's
// cursor lands at those page starts is compared with py-lmdb's in
// tests/python/test_compat_differential.py.)
TEST(LmdbPagesTest, LeafLayoutFindsEveryLeafPage) {
  for (const TreeCase& c : Cases()) {
    if (c.records.empty() || !c.db_name.empty()) continue;
    SCOPED_TRACE(c.name);
    TempDir dir;
    testing::WriteLmdb(dir.Sub("db"), c.records, c.db_name, false, c.flags);
    LeafLayout layout;
    ASSERT_OK(ReadLeafLayout(dir.Sub("db"), c.db_name, &layout));
    EXPECT_TRUE(std::is_sorted(layout.key_page_starts.begin(), layout.key_page_starts.end()));
    if (!(c.flags & MDB_DUPSORT)) {
      DatabaseInfo info;
      ASSERT_OK(InspectDatabase(dir.Sub("db"), c.db_name, &info));
      EXPECT_EQ(layout.key_page_starts.size() + 1, info.leaf_pages);
      EXPECT_TRUE(layout.dup_page_starts.empty());
    } else if (std::string(c.name) == "dupsort_subtrees") {
      ASSERT_EQ(layout.dup_page_starts.size(), 5u);  // each of its 5 keys has 900 duplicates: ~11 pages each
      for (const auto& [key, starts] : layout.dup_page_starts) EXPECT_GE(starts.size(), 8u) << "key " << key;
    } else if (std::string(c.name) == "dupsort_subpages") {
      EXPECT_TRUE(layout.dup_page_starts.empty());  // 3 duplicates per key fit in the node
    }
  }
}

TEST(LmdbPagesTest, MainTreeOfEnvironmentWithNamedDatabasesListsThem) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), {{"a", "1"}}, "named");
  Pairs walked;
  ASSERT_OK(WalkPairs(dir.Sub("db"), "", &walked));
  EXPECT_TRUE(walked == testing::LiblmdbPairs(dir.Sub("db"), ""));
  Pairs missing;
  Status s = WalkPairs(dir.Sub("db"), "other", &missing);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
}

// Offsets of the fields the targeted damage edits (LMDB's mdb.c).
constexpr size_t kPage = 4096;
uint64_t RootOf(const std::string& bytes) {
  uint64_t t0, t1, root0, root1;
  std::memcpy(&t0, bytes.data() + 144, 8);
  std::memcpy(&t1, bytes.data() + kPage + 144, 8);
  std::memcpy(&root0, bytes.data() + 88 + 40, 8);
  std::memcpy(&root1, bytes.data() + kPage + 88 + 40, 8);
  return t1 > t0 ? root1 : root0;
}
size_t NewestMeta(const std::string& bytes) {
  uint64_t t0, t1;
  std::memcpy(&t0, bytes.data() + 144, 8);
  std::memcpy(&t1, bytes.data() + kPage + 144, 8);
  return t1 > t0 ? kPage : 0;
}

Status WalkAfter(const std::function<void(std::string*)>& damage, const Pairs& records) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), records);
  std::string path = dir.Sub("db/data.mdb");
  std::string bytes = ReadAll(path);
  damage(&bytes);
  WriteAll(path, bytes);
  Pairs walked;
  return WalkPairs(dir.Sub("db"), "", &walked);
}

Pairs ThreeLevels() {
  Pairs r;
  for (int i = 0; i < 40000; ++i) r.emplace_back("key" + std::to_string(1000000 + i), std::string(60, 'v'));
  return r;
}

void ExpectCorruption(const Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("data.mdb"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

TEST(LmdbPagesTest, BranchChildPointingToItselfIsCorruption) {
  ExpectCorruption(WalkAfter([](std::string* b) {
    uint64_t root = RootOf(*b);
    char* page = b->data() + root * kPage;
    uint16_t ptr;
    std::memcpy(&ptr, page + 16 + 2, 2);  // second child
    uint16_t lo = root & 0xffff, hi = (root >> 16) & 0xffff;
    std::memcpy(page + ptr, &lo, 2);
    std::memcpy(page + ptr + 2, &hi, 2);
  }, ThreeLevels()), "expected a leaf page");
}

TEST(LmdbPagesTest, SubDatabaseFlagOnAPlainValueIsCorruption) {
  Pairs records;
  for (int i = 0; i < 10; ++i) records.emplace_back("k" + std::to_string(i), "value");
  ExpectCorruption(WalkAfter([](std::string* b) {
    char* page = b->data() + RootOf(*b) * kPage;
    uint16_t ptr;
    std::memcpy(&ptr, page + 16, 2);
    uint16_t flags = 0x02;  // F_SUBDATA
    std::memcpy(page + ptr + 4, &flags, 2);
  }, records), "claims a named database");
}

TEST(LmdbPagesTest, PageNumberPastTheFileIsCorruption) {
  ExpectCorruption(WalkAfter([](std::string* b) {
    uint64_t huge = 1ull << 40;
    std::memcpy(b->data() + NewestMeta(*b) + 88 + 40, &huge, 8);
  }, ThreeLevels()), "root page");
  ExpectCorruption(WalkAfter([](std::string* b) {
    char* page = b->data() + RootOf(*b) * kPage;
    uint16_t ptr;
    std::memcpy(&ptr, page + 16 + 4, 2);
    uint16_t hi = 0x7fff;
    std::memcpy(page + ptr + 2, &hi, 2);
  }, ThreeLevels()), "outside pages 2..");
}

TEST(LmdbPagesTest, MapSizeOrLastPageBeyondTheFileIsHarmlessAndPagesBeyondItAreTruncation) {
  Pairs records = ThreeLevels();
  // A map size larger than the file is normal (py-lmdb's map_size): read as usual.
  EXPECT_OK(WalkAfter([](std::string* b) {
    uint64_t huge = 1ull << 50;
    std::memcpy(b->data() + NewestMeta(*b) + 32, &huge, 8);
  }, records));
  // So is a last page past the file's end: liblmdb counts pages that a
  // transaction allocated and freed without writing them.
  EXPECT_OK(WalkAfter([](std::string* b) {
    uint64_t last;
    std::memcpy(&last, b->data() + NewestMeta(*b) + 136, 8);
    last += 20;
    std::memcpy(b->data() + NewestMeta(*b) + 136, &last, 8);
  }, records));
  // Not past the meta page's own map size, which liblmdb never allocates beyond.
  ExpectCorruption(WalkAfter([](std::string* b) {
    uint64_t last = 1ull << 40;
    std::memcpy(b->data() + NewestMeta(*b) + 136, &last, 8);
  }, records), "past its own map");
  // A tree that reaches past the file's end is truncation.
  ExpectCorruption(WalkAfter([](std::string* b) { b->resize(b->size() - 2 * kPage); }, records),
                   "past the end of the file (truncated?");
}

// liblmdb's compacting copy asserts inside mdb_cursor_init on such a free tree.
TEST(LmdbPagesTest, FreePageTreeClaimingSortedDuplicatesIsCorruption) {
  ExpectCorruption(WalkAfter([](std::string* b) {
    uint16_t flags = 0x04;  // MDB_DUPSORT in the free tree's md_flags
    std::memcpy(b->data() + NewestMeta(*b) + 40 + 4, &flags, 2);
  }, ThreeLevels()), "free-page tree claims sorted duplicates");
}

TEST(LmdbPagesTest, EmptyAndTinyFilesAreNotLmdb) {
  TempDir dir;
  for (size_t size : {0, 1, 151, 4096, 4097}) {
    std::string path = dir.Sub("f" + std::to_string(size));
    WriteAll(path, std::string(size, '\0'));
    LmdbFile file;
    ASSERT_OK(file.Open(path));
    LmdbMeta meta;
    Status s = file.ReadMeta(0, &meta);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << size << ": " << s.ToString();
    EXPECT_NE(s.message().find("not an LMDB file"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  }
}

// LMDB 1.0's page header is 8 bytes longer: its meta (magic, then data format
// 3) starts at byte 24, where py-lmdb's lib_version=1 and lmdb-js put it, and
// is read; MDB_DEVEL's format 999 there is a format this reader does not know.
TEST(LmdbPagesTest, AnotherDataFormatIsUnsupportedNotCorruption) {
  TempDir dir;
  std::string bytes(2 * kPage, '\0');
  const uint32_t magic = 0xBEEFC0DE, format = 999;
  std::memcpy(bytes.data() + 24, &magic, 4);
  std::memcpy(bytes.data() + 28, &format, 4);
  const std::string path = dir.Sub("newer.mdb");
  WriteAll(path, bytes);
  LmdbFile file;
  ASSERT_OK(file.Open(path));
  LmdbMeta meta;
  Status s = file.ReadMeta(0, &meta);
  EXPECT_EQ(s.code(), Status::Code::kUnsupported) << s.ToString();
  EXPECT_NE(s.message().find(path + ": LMDB data format 999 is not supported"), std::string::npos)
      << s.message();
}

// Random damage over every kind of tree: each walk ends OK or in Corruption,
// and under ASan + UBSan no mutation makes the reader touch memory it should
// not. The full-file fuzzer (fuzz/corrupt_databases.py) covers whole processes.
TEST(LmdbPagesTest, RandomMutationsEndInCorruptionNeverACrash) {
  std::mt19937_64 rng(20261122);
  std::unique_ptr<BatchIo> io;  // half the walks read their batches through it
  std::string why;
  ASSERT_OK(BatchIo::Create(IoEngine::kThreads, 8, &io, &why));
  int corrupted = 0, ok = 0;
  for (const TreeCase& c : Cases()) {
    TempDir dir;
    testing::WriteLmdb(dir.Sub("db"), c.records, c.db_name, false, c.flags);
    const std::string path = dir.Sub("db/data.mdb");
    const std::string pristine = ReadAll(path);
    for (int round = 0; round < 150; ++round) {
      std::string bytes = pristine;
      switch (round % 4) {
        case 0:  // bit flips
          for (int k = 0; k < 1 + static_cast<int>(rng() % 8); ++k) bytes[rng() % bytes.size()] ^= 1 << (rng() % 8);
          break;
        case 1: {  // a run of random bytes inside one page
          size_t at = rng() % bytes.size(), n = 1 + rng() % 64;
          for (size_t i = at; i < std::min(bytes.size(), at + n); ++i) bytes[i] = static_cast<char>(rng());
          break;
        }
        case 2:  // truncation
          bytes.resize(rng() % bytes.size());
          break;
        default: {  // two pages swapped
          size_t pages = bytes.size() / kPage;
          if (pages < 4) break;
          size_t a = 2 + rng() % (pages - 2), b = 2 + rng() % (pages - 2);
          std::string tmp = bytes.substr(a * kPage, kPage);
          bytes.replace(a * kPage, kPage, bytes, b * kPage, kPage);
          bytes.replace(b * kPage, kPage, tmp);
        }
      }
      WriteAll(path, bytes);
      Pairs walked;
      Status s = WalkPairs(dir.Sub("db"), c.db_name, &walked, round % 2 ? io.get() : nullptr);
      if (s.ok()) {
        ++ok;
      } else {
        ++corrupted;
        EXPECT_TRUE(s.code() == Status::Code::kCorruption || s.IsNotFound()) << c.name << ": " << s.ToString();
      }
    }
  }
  EXPECT_GT(corrupted, 0);
  std::printf("random mutations: %d walked, %d reported as damaged\n", ok, corrupted);
}

// A writer's commit between opening the file and reading its meta page grows
// the file with pages the new snapshot reaches (here, overflow values past the
// old end): the walk reads them, bounded by the file as it is after the
// commit, not by its size when it was opened.
TEST(LmdbPagesTest, CommitBetweenOpenAndMetaGrowsTheFileAndWalksClean) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("db"), 50, 100);
  LmdbFile file;
  ASSERT_OK(file.Open(dir.Sub("db") + "/data.mdb"));
  const uint64_t opened_at = file.file_size();

  MDB_env* env = nullptr;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_mapsize(env, 1u << 26), 0);
  ASSERT_EQ(mdb_env_open(env, dir.Sub("db").c_str(), MDB_NOSYNC, 0644), 0);
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  const std::string big(5 * kPage, 'x');
  for (int i = 0; i < 20; ++i) {
    std::string key = "zz" + std::to_string(i);
    MDB_val k{key.size(), key.data()}, v{big.size(), const_cast<char*>(big.data())};
    ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  }
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);

  LmdbMeta meta;
  ASSERT_OK(file.ReadMeta(0, &meta));
  ASSERT_GT(meta.last_pgno * kPage, opened_at);  // the commit's pages lie past the size at open
  EXPECT_GT(file.file_size(), opened_at);
  uint64_t items = 0, on_overflow = 0;
  EXPECT_OK(file.Walk(meta, meta.main_tree, [&](const LmdbItem& item) -> Status {
    ++items;
    on_overflow += item.on_overflow_pages;
    return Status::OK();
  }));
  EXPECT_EQ(items, 70u);
  EXPECT_EQ(on_overflow, 20u);
}

// The writer watch's reading of LMDB's last committed transaction, from a
// mapping of the two meta pages and (where a file system cannot map) with
// pread: both follow every commit, whichever meta page it wrote.
TEST(LmdbPagesTest, CommittedTxnidFollowsEveryCommitMappedOrRead) {
  TempDir dir;
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_mapsize(env, 1u << 24), 0);
  ASSERT_EQ(mdb_env_open(env, dir.path().c_str(), MDB_NOSYNC, 0644), 0);
  const std::string data = dir.Sub("data.mdb");
  int fd = ::open(data.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  for (int commit = 0; commit < 5; ++commit) {
    MDB_txn* txn = nullptr;
    MDB_dbi dbi;
    ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
    ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
    std::string key = "k" + std::to_string(commit), value(100, 'v');
    MDB_val k{key.size(), key.data()}, v{value.size(), value.data()};
    ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
    ASSERT_EQ(mdb_txn_commit(txn), 0);
    MDB_envinfo info;
    ASSERT_EQ(mdb_env_info(env, &info), 0);
    const uint32_t page_size = static_cast<uint32_t>(::sysconf(_SC_PAGESIZE));  // what liblmdb writes with
    const std::string pages = ReadAll(data).substr(0, 2 * page_size);
    uint64_t mapped = 0, read = 0;
    ASSERT_OK(ReadCommittedTxnid(fd, pages.data(), page_size, 16, data, &mapped));
    ASSERT_OK(ReadCommittedTxnid(fd, nullptr, page_size, 16, data, &read));
    EXPECT_EQ(mapped, info.me_last_txnid) << commit;
    EXPECT_EQ(read, info.me_last_txnid) << commit;
  }
  ::close(fd);
  mdb_env_close(env);
  uint64_t txnid = 0;
  Status s = ReadCommittedTxnid(-1, nullptr, 4096, 16, data, &txnid);
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_NE(s.message().find(data), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace lmdbloader
