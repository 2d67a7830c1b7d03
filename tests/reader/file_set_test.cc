#include "reader/file_set.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <atomic>
#include <functional>
#include <random>
#include <thread>

#include "lmdbloader/reader.h"
#include "reader_test_util.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;

// Value of record r of file f: says where it comes from.
std::string ValueOf(int f, int r) { return testing::MemberValue(f, r); }

// `files` databases of `per` records each in `dir`, half folders holding
// data.mdb, half single files named *.lmdb; file f's keys are k0, k1, ...
void WriteFiles(const std::string& dir, int files, int per) {
  std::filesystem::create_directories(dir);
  for (int f = 0; f < files; ++f) {
    const auto records = testing::MemberRecords(f, per);
    char name[32];
    std::snprintf(name, sizeof(name), "chunk-%05d", f);
    if (f % 2 == 0) testing::WriteLmdb(dir + "/" + name, records);
    else testing::WriteLmdb(dir + "/" + name + ".lmdb", records, "", /*nosubdir=*/true);
  }
}

// The records at `batch`, through ValueSizes and ReadBatch as a caller reads them.
Status ReadValues(Reader& r, const std::vector<uint64_t>& batch, std::vector<std::string>* values) {
  std::vector<uint64_t> sizes(batch.size());
  LMDBLOADER_RETURN_IF_ERROR(r.ValueSizes(batch.data(), batch.size(), sizes.data()));
  values->assign(batch.size(), "");
  std::vector<char*> dsts(batch.size());
  for (size_t k = 0; k < batch.size(); ++k) {
    (*values)[k].resize(sizes[k]);
    dsts[k] = (*values)[k].data();
  }
  return r.ReadBatch(batch.data(), batch.size(), dsts.data());
}

TEST(FileSetTest, AFolderListsItsDatabasesInOrderAndNothingElse) {
  TempDir dir;
  WriteFiles(dir.Sub("set"), 4, 3);
  std::ofstream(dir.Sub("set/README.txt")) << "not a database";
  std::filesystem::create_directories(dir.Sub("set/empty-folder"));
  bool is_set = false;
  std::vector<std::string> files;
  ASSERT_OK(ListFileSet(dir.Sub("set"), &is_set, &files));
  ASSERT_TRUE(is_set);
  // The *.lmdb files' lock files (NAME-lock) are left out.
  EXPECT_EQ(files, (std::vector<std::string>{dir.Sub("set/chunk-00000"), dir.Sub("set/chunk-00001.lmdb"),
                                             dir.Sub("set/chunk-00002"), dir.Sub("set/chunk-00003.lmdb")}));
  ASSERT_OK(ListFileSet(dir.Sub("set/chunk-0000[12]*"), &is_set, &files));
  EXPECT_TRUE(is_set);
  EXPECT_EQ(files.size(), 2u);
  // One database, a missing path: not a set.
  ASSERT_OK(ListFileSet(dir.Sub("set/chunk-00000"), &is_set, &files));
  EXPECT_FALSE(is_set);
  ASSERT_OK(ListFileSet(dir.Sub("missing"), &is_set, &files));
  EXPECT_FALSE(is_set);
  // The converter's shard parts without their list are no set: opening the
  // folder says which command writes the list.
  std::filesystem::create_directories(dir.Sub("shards"));
  testing::WriteNumberedLmdb(dir.Sub("shards/part-00000-of-00002"), 3, 8);
  ASSERT_OK(ListFileSet(dir.Sub("shards"), &is_set, &files));
  EXPECT_FALSE(is_set);
}

TEST(FileSetTest, AFolderOrPatternWithoutDatabasesIsAnErrorNamingIt) {
  TempDir dir;
  std::filesystem::create_directories(dir.Sub("none"));
  std::ofstream(dir.Sub("none/notes.txt")) << "x";
  bool is_set = false;
  std::vector<std::string> files;
  Status s = ListFileSet(dir.Sub("none"), &is_set, &files);
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_NE(s.message().find(dir.Sub("none/data.mdb") + ": No such file"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("nor is " + dir.Sub("none") + " a set of databases"), std::string::npos) << s.message();
  s = ListFileSet(dir.Sub("none/*.lmdb"), &is_set, &files);
  EXPECT_NE(s.message().find("no file matches " + dir.Sub("none/*.lmdb")), std::string::npos) << s.message();
}

TEST(FileSetTest, ManyFilesReadAsOneUnderASmallDescriptorLimit) {
  TempDir dir;
  const int kFiles = 300, kPer = 7;
  WriteFiles(dir.Sub("set"), kFiles, kPer);
  // 96 descriptors: 8 files open at once (a quarter of what is left above 64).
  struct rlimit limit {96, 96};
  struct rlimit before;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &before), 0);
  limit.rlim_max = before.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
  ReaderOptions options;
  options.rss_budget = 8 << 20;
  options.index_dir = dir.Sub("idx");
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open(dir.Sub("set"), options, &r));
  ASSERT_EQ(r->size(), uint64_t{kFiles} * kPer);
  // Every record, in a shuffled order, in batches spanning many files.
  std::vector<uint64_t> order(r->size());
  for (uint64_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(3));
  for (size_t first = 0; first < order.size(); first += 256) {
    const size_t n = std::min<size_t>(256, order.size() - first);
    std::vector<uint64_t> sizes(n);
    ASSERT_OK(r->ValueSizes(order.data() + first, n, sizes.data()));
    std::vector<std::string> values(n);
    std::vector<char*> dsts(n);
    for (size_t k = 0; k < n; ++k) {
      values[k].resize(sizes[k]);
      dsts[k] = values[k].data();
    }
    ASSERT_OK(r->ReadBatch(order.data() + first, n, dsts.data()));
    for (size_t k = 0; k < n; ++k) {
      const uint64_t i = order[first + k];
      ASSERT_EQ(values[k], ValueOf(static_cast<int>(i / kPer), static_cast<int>(i % kPer))) << i;
    }
  }
  const ReaderStats stats = r->stats();
  EXPECT_EQ(stats.files, uint64_t{kFiles});
  EXPECT_LE(stats.files_open, 8u);
  EXPECT_LE(stats.index_bytes, (8u << 20) / 4);
  // Keys are each file's own: the first file that holds one; positions name it.
  std::string key;
  ASSERT_OK(r->Key(kPer + 2, &key));
  EXPECT_EQ(key, "k102");
  uint64_t at = 0;
  ASSERT_OK(r->Find("k103", &at));
  EXPECT_EQ(at, 3u);
  EXPECT_TRUE(r->Find("absent", &at).IsNotFound());
  EXPECT_EQ(r->LowerBound("k", &at).code(), Status::Code::kUnsupported);
  // A child after fork reads its own way.
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::string v;
    int bad = 0;
    for (uint64_t i = 0; i < r->size(); i += 13)
      if (!r->Read(i, &v).ok() || v != ValueOf(static_cast<int>(i / kPer), static_cast<int>(i % kPer))) ++bad;
    ::_exit(bad == 0 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &before), 0);
}

// The index folder emptied under a set read with paged indexes: a forked
// child reads every record, through the descriptors it inherited, or, where
// it lost them (closed by a caller), by indexing each file again.
TEST(FileSetTest, PagedIndexesDeletedUnderTheReaderStillReadInForkedChildren) {
  TempDir dir;
  const int kFiles = 6, kPer = 800;  // keys k100 to k899 sort as their records
  WriteFiles(dir.Sub("set"), kFiles, kPer);
  ReaderOptions options;
  options.index_residence = IndexResidence::kPaged;
  options.index_dir = dir.Sub("idx");
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open(dir.Sub("set"), options, &r));
  auto bad_records = [&] {
    int bad = 0;
    std::string v;
    for (uint64_t i = 0; i < r->size(); ++i)
      if (!r->Read(i, &v).ok() || v != ValueOf(static_cast<int>(i / kPer), static_cast<int>(i % kPer))) ++bad;
    return bad;
  };
  ASSERT_EQ(bad_records(), 0);  // every file open, its index paged
  std::filesystem::remove_all(dir.Sub("idx"));
  for (bool lose_descriptors : {false, true}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int lost = 0;
      for (int fd = 3; lose_descriptors && fd < 1024; ++fd) {
        char link[4096];
        const ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), link, sizeof(link) - 1);
        const std::string target(link, n > 0 ? static_cast<size_t>(n) : 0);
        if (target.rfind(dir.Sub("idx"), 0) == 0 && target.find(" (deleted)") != std::string::npos)
          lost += ::close(fd) == 0;
      }
      ::_exit(lose_descriptors && lost != kFiles ? 2 : bad_records() == 0 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "lose_descriptors=" << lose_descriptors << " exit " << WEXITSTATUS(status);
  }
  EXPECT_EQ(bad_records(), 0);
  EXPECT_TRUE(std::filesystem::exists(dir.Sub("idx")));  // the second child indexed the files again
}

TEST(FileSetTest, ThreadsReadingAcrossFilesSeeTheirOwnRecords) {
  // Files opened and closed under one thread's reads while others read:
  // a file a read pins is never closed under it.
  TempDir dir;
  const int kFiles = 120, kPer = 5;
  WriteFiles(dir.Sub("set"), kFiles, kPer);
  struct rlimit before;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &before), 0);
  struct rlimit limit {96, before.rlim_max};  // 8 files open at once
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0);
  ReaderOptions options;
  options.rss_budget = 2 << 20;  // 512 KiB of indexes: files' indexes dropped and read again too
  options.index_dir = dir.Sub("idx");
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open(dir.Sub("set"), options, &r));
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<uint64_t> batch(40);
      std::vector<std::string> values;
      for (int round = 0; round < 60; ++round) {
        for (auto& i : batch) i = rng() % r->size();
        if (!ReadValues(*r, batch, &values).ok()) {
          ++bad;
          continue;
        }
        for (size_t k = 0; k < batch.size(); ++k)
          if (values[k] != ValueOf(static_cast<int>(batch[k] / kPer), static_cast<int>(batch[k] % kPer))) ++bad;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(r->stats().files_open, 8u + 4u);  // one over a thread at most, while all are pinned
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &before), 0);
}

TEST(FileSetTest, ADamagedFileIsAnErrorNamingItOrSkippedWhenAsked) {
  TempDir dir;
  WriteFiles(dir.Sub("set"), 3, 4);
  testing::WriteAll(dir.Sub("set/chunk-00001.lmdb"), std::string(9000, 'j'));
  ReaderOptions options;
  options.index_dir = dir.Sub("idx");
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(dir.Sub("set"), options, &r);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find(dir.Sub("set/chunk-00001.lmdb")), std::string::npos) << s.message();
  options.skip_bad_files = true;
  ASSERT_OK(Reader::Open(dir.Sub("set"), options, &r));
  EXPECT_EQ(r->size(), 8u);
  EXPECT_EQ(r->stats().files_skipped, 1u);
  std::string v;
  ASSERT_OK(r->Read(4, &v));
  EXPECT_EQ(v, ValueOf(2, 0));
}

// A set of three databases of one layout each beside what the cases add:
// a.lmdb (a single file), b.lmdb/ (a folder LMDB named like a file) and
// c.mdb (a single file), 10, 20 and 40 records.
void WriteMixedSet(const std::string& dir) {
  std::filesystem::create_directories(dir);
  auto records = [](int f, int n) {
    std::vector<std::pair<std::string, std::string>> out;
    for (int r = 0; r < n; ++r) out.push_back({"k" + std::to_string(100 + r), ValueOf(f, r)});
    return out;
  };
  testing::WriteLmdb(dir + "/a.lmdb", records(0, 10), "", /*nosubdir=*/true);
  testing::WriteLmdb(dir + "/b.lmdb", records(1, 20));
  testing::WriteLmdb(dir + "/c.mdb", records(2, 40), "", /*nosubdir=*/true);
}

TEST(FileSetTest, EveryLayoutOfAMemberIsListedWithItsLockFilesLeftOut) {
  TempDir dir;
  WriteMixedSet(dir.Sub("set"));
  // The lock files liblmdb writes beside a folder's data.mdb and a single file.
  testing::WriteAll(dir.Sub("set/b.lmdb/lock.mdb"), std::string(8192, '\0'));
  testing::WriteAll(dir.Sub("set/a.lmdb-lock"), std::string(8192, '\0'));
  testing::WriteAll(dir.Sub("set/c.mdb-lock"), std::string(8192, '\0'));
  std::filesystem::create_directories(dir.Sub("set/logs"));  // a folder that does not look like a database
  bool is_set = false;
  std::vector<std::string> files;
  ASSERT_OK(ListFileSet(dir.Sub("set"), &is_set, &files));
  EXPECT_EQ(files, (std::vector<std::string>{dir.Sub("set/a.lmdb"), dir.Sub("set/b.lmdb"), dir.Sub("set/c.mdb")}));
  ReaderOptions options;
  options.index_dir = dir.Sub("idx");
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open(dir.Sub("set"), options, &r));
  EXPECT_EQ(r->size(), 70u);
  EXPECT_EQ(r->stats().files_skipped, 0u);
  const std::vector<FileSetMember> members = r->FileSetMembers();
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[1].path, dir.Sub("set/b.lmdb"));
  EXPECT_EQ(members[1].first, 10u);
  EXPECT_EQ(members[1].records, 20u);
  EXPECT_EQ(members[2].first, 30u);
  EXPECT_EQ(members[2].records, 40u);
}

// What looks like a database of the set and is none: `damage` applied to a
// set of a.lmdb, b.lmdb/ and c.mdb is an error naming `named`, of `code`,
// saying `what`; with skip_bad_files the set reads the others, counting one
// skipped.
void ExpectBadMember(const std::function<void(const std::string&)>& damage, const std::string& named,
                     Status::Code code, const std::string& what, uint64_t records_left) {
  TempDir dir;
  WriteMixedSet(dir.Sub("set"));
  damage(dir.Sub("set"));
  ReaderOptions options;
  options.index_dir = dir.Sub("idx");
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(dir.Sub("set"), options, &r);
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(dir.Sub("set/" + named)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  options.skip_bad_files = true;
  ASSERT_OK(Reader::Open(dir.Sub("set"), options, &r));
  EXPECT_EQ(r->size(), records_left);
  EXPECT_EQ(r->stats().files_skipped, 1u);
  for (const FileSetMember& m : r->FileSetMembers()) EXPECT_EQ(m.path.find(named), std::string::npos) << m.path;
}

TEST(FileSetTest, AFolderNamedLikeADatabaseWithoutDataMdbIsNotPassedOver) {
  ExpectBadMember([](const std::string& set) { std::filesystem::create_directories(set + "/x.lmdb"); }, "x.lmdb",
                  Status::Code::kIOError, "x.lmdb looks like an LMDB folder but holds no data.mdb", 70);
  ExpectBadMember([](const std::string& set) { std::filesystem::create_directories(set + "/y.mdb"); }, "y.mdb",
                  Status::Code::kIOError, "holds no data.mdb", 70);
  // b.lmdb's data file gone, its lock.mdb left.
  ExpectBadMember([](const std::string& set) { std::filesystem::remove(set + "/b.lmdb/data.mdb"); }, "b.lmdb",
                  Status::Code::kIOError, "b.lmdb/data.mdb: No such file or directory", 50);
  // Any folder whose LMDB lost data.mdb still holds lock.mdb.
  ExpectBadMember(
      [](const std::string& set) {
        std::filesystem::create_directories(set + "/chunk");
        testing::WriteAll(set + "/chunk/lock.mdb", std::string(8192, '\0'));
      },
      "chunk", Status::Code::kIOError, "chunk looks like an LMDB folder", 70);
}

TEST(FileSetTest, AFolderOfDatabasesInASetIsNamedNotPassedOver) {
  // training/{MJ/{MJ_train, MJ_valid}, ST}: a set is read one folder deep.
  ExpectBadMember(
      [](const std::string& set) {
        for (const char* name : {"/MJ/MJ_train", "/MJ/MJ_valid"}) {
          std::filesystem::create_directories(set + name);
          testing::WriteNumberedLmdb(set + name, 3, 8);
        }
      },
      "MJ", Status::Code::kIOError, "MJ holds databases of its own, and a set of files is read one folder deep", 70);
  ExpectBadMember(
      [](const std::string& set) {
        std::filesystem::create_directories(set + "/old");
        testing::WriteLmdb(set + "/old/e.lmdb", {{"k", "v"}}, "", /*nosubdir=*/true);
      },
      "old", Status::Code::kIOError, "name them with a glob", 70);
}

TEST(FileSetTest, AFileNamedLikeADatabaseThatIsNoneIsNamed) {
  ExpectBadMember([](const std::string& set) { testing::WriteAll(set + "/d.lmdb", ""); }, "d.lmdb",
                  Status::Code::kCorruption, "d.lmdb", 70);
  ExpectBadMember([](const std::string& set) { testing::WriteAll(set + "/c.mdb", std::string(9000, 'j')); },
                  "c.mdb", Status::Code::kCorruption, "c.mdb", 30);
  ExpectBadMember(
      [](const std::string& set) { std::filesystem::create_symlink(set + "/gone", set + "/link.lmdb"); },
      "link.lmdb", Status::Code::kIOError, "No such file or directory", 70);
  // A shard set's folder is read alone, not as one file of a set.
  ExpectBadMember(
      [](const std::string& set) {
        std::filesystem::create_directories(set + "/shards");
        testing::WriteAll(set + "/shards/shards.json", "{}");
      },
      "shards", Status::Code::kInvalidArgument, "is read alone", 70);
}

TEST(FileSetTest, FindInMemberLooksInThatFileAlone) {
  TempDir dir;
  WriteMixedSet(dir.Sub("set"));
  ReaderOptions options;
  options.index_dir = dir.Sub("idx");
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open(dir.Sub("set"), options, &r));
  uint64_t at = 0;
  ASSERT_OK(r->Find("k105", &at));
  EXPECT_EQ(at, 5u);  // the first file holding it
  ASSERT_OK(r->FindInMember(1, "k105", &at));
  EXPECT_EQ(at, 15u);
  ASSERT_OK(r->FindInMember(2, "k139", &at));
  EXPECT_EQ(at, 69u);
  EXPECT_TRUE(r->FindInMember(1, "k139", &at).IsNotFound());  // b.lmdb holds 20
  EXPECT_EQ(r->FindInMember(3, "k100", &at).code(), Status::Code::kOutOfRange);
  std::unique_ptr<Reader> one;
  ASSERT_OK(Reader::Open(dir.Sub("set/b.lmdb"), options, &one));
  EXPECT_TRUE(one->FileSetMembers().empty());
  EXPECT_EQ(one->FindInMember(0, "k100", &at).code(), Status::Code::kInvalidArgument);
}

TEST(FileSetTest, AListReadsInItsOwnOrderAndRefusesWhatNeedsOneDatabase) {
  TempDir dir;
  WriteFiles(dir.Sub("set"), 2, 2);
  ReaderOptions options;
  options.index_dir = dir.Sub("idx");
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open({dir.Sub("set/chunk-00001.lmdb"), dir.Sub("set/chunk-00000")}, options, &r));
  std::string v;
  ASSERT_OK(r->Read(0, &v));
  EXPECT_EQ(v, ValueOf(1, 0));
  ASSERT_OK(r->Read(3, &v));
  EXPECT_EQ(v, ValueOf(0, 1));
  EXPECT_EQ(r->Read(4, &v).code(), Status::Code::kOutOfRange);
  options.mode = AccessMode::kMmap;
  EXPECT_EQ(Reader::Open(dir.Sub("set"), options, &r).code(), Status::Code::kInvalidArgument);
  options.mode = AccessMode::kAuto;
  options.lock = true;
  EXPECT_EQ(Reader::Open(dir.Sub("set"), options, &r).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Reader::Open(std::vector<std::string>{}, ReaderOptions{}, &r).code(), Status::Code::kInvalidArgument);
}

TEST(FileSetTest, MemberPathsGiveBackEachPathFromTheirSharedFolder) {
  const std::vector<std::string> paths = {"/data/set/chunk-00001.lmdb", "/data/set/chunk-00002.lmdb",
                                          "/data/set/sub/data", "/data/settle.lmdb", "relative.lmdb", ""};
  for (size_t n = 1; n <= paths.size(); ++n) {
    const std::vector<std::string> some(paths.begin(), paths.begin() + n);
    MemberPaths column(some);
    ASSERT_EQ(column.size(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(column[i], some[i]) << n << " paths";
  }
  EXPECT_EQ(MemberPaths(std::vector<std::string>{}).size(), 0u);
  // 10^4 paths of one folder keep their names' bytes and 8 bytes each, not a
  // std::string each.
  std::vector<std::string> many;
  for (int i = 0; i < 10000; ++i) many.push_back("/datasets/a-long-folder-name/shards/f" + std::to_string(100000 + i));
  MemberPaths column(many);
  EXPECT_LT(column.MemoryBytes(), 10000u * (7 + 8) + 4096);
  EXPECT_EQ(column[9999], many[9999]);
}

TEST(FileSetTest, PartsOfFilesLetGoAreDeletedWhileThreadsRead) {
  // A budget whose index share holds some 270 files' Parts: files are
  // indexed, let go and deleted (Forget) all the time under four readers,
  // while another thread asks stats() and keys, which walk the held ones.
  // The files: copies of one with its values' digits changed in place.
  TempDir dir;
  const int kFiles = 600, kPer = 2;
  auto value = [](int f, int r) {
    char text[32];
    std::snprintf(text, sizeof(text), "file %05d rec %d", f, r);
    return std::string(text);
  };
  testing::WriteLmdb(dir.Sub("template"), {{"k100", value(0, 0)}, {"k101", value(0, 1)}}, "", /*nosubdir=*/true);
  std::string bytes = testing::ReadAll(dir.Sub("template"));
  const size_t at[kPer] = {bytes.find(value(0, 0)), bytes.find(value(0, 1))};
  ASSERT_NE(at[0], std::string::npos);
  ASSERT_NE(at[1], std::string::npos);
  std::filesystem::create_directories(dir.Sub("set"));
  for (int f = 0; f < kFiles; ++f) {
    for (int r = 0; r < kPer; ++r) bytes.replace(at[r], value(f, r).size(), value(f, r));
    char name[32];
    std::snprintf(name, sizeof(name), "/f%05d.lmdb", f);
    testing::WriteAll(dir.Sub("set") + name, bytes);
  }
  ReaderOptions options;
  options.rss_budget = 1 << 20;  // the floor: 256 KiB for indexes and their Parts
  options.index_dir = "none";
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open(dir.Sub("set"), options, &r));
  ASSERT_EQ(r->size(), uint64_t{kFiles} * kPer);
  std::atomic<int> bad{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<uint64_t> batch(16);
      std::vector<std::string> values;
      for (int round = 0; round < 100; ++round) {
        for (auto& i : batch) i = rng() % r->size();
        if (!ReadValues(*r, batch, &values).ok()) ++bad;
        for (size_t k = 0; k < batch.size(); ++k)
          if (values[k] != value(static_cast<int>(batch[k] / kPer), static_cast<int>(batch[k] % kPer))) ++bad;
      }
    });
  std::thread watcher([&] {
    std::string key;
    for (uint64_t i = 0; !done.load(); i = (i + 7) % r->size()) {
      if (r->stats().index_bytes > (256u << 10) || !r->Key(i, &key).ok() || key != "k" + std::to_string(100 + i % kPer))
        ++bad;
    }
  });
  for (auto& t : threads) t.join();
  done.store(true);
  watcher.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace lmdbloader
