#include "lmdb/paged_index.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "lmdb/index_file.h"
#include "lmdb/index_writer.h"
#include "lmdb/record_index_util.h"
#include "lmdb/record_key.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

const FileIdentity kIdentity{1, 2, uint64_t{1} << 40, 3, 4, 4096, 5};

// Keys of record i, in byte order: record numbers, or names of varied
// length (some spanning two key pages).
std::string KeyOf(uint64_t i, bool numbered) {
  if (numbered) return RecordKey(i);
  return "key-" + std::to_string(1000000 + i) + std::string(i % 97, 'x');
}

void WriteIndex(const std::string& path, uint64_t records, bool numbered) {
  std::unique_ptr<IndexWriter> w;
  ASSERT_OK(IndexWriter::Create(path, &w));
  for (uint64_t i = 0; i < records; ++i) ASSERT_OK(w->Add(KeyOf(i, numbered), i * 4096 + 7, static_cast<uint32_t>(i % 5000)));
  ASSERT_OK(w->AddMeta("__meta", 12, 34));
  ASSERT_OK(w->Finish(kIdentity, "", 0, true));
}

std::unique_ptr<PagedIndex> OpenPaged(const std::string& path, uint64_t cache_bytes = 64 << 10) {
  std::unique_ptr<PagedIndex> p;
  Status s = PagedIndex::Open(path, kIdentity, "", cache_bytes, &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return p;
}

TEST(PagedIndexTest, LocatesKeysAndSearchesAsTheResidentIndexDoes) {
  testing::TempDir dir;
  for (bool numbered : {true, false}) {
    const std::string path = dir.Sub(numbered ? "n.idx" : "k.idx");
    const uint64_t n = 20000;
    WriteIndex(path, n, numbered);
    RecordIndex resident;
    ASSERT_OK(LoadIndex(path, kIdentity, "", &resident));
    ASSERT_EQ(resident.size(), n);
    EXPECT_EQ(resident.sequential_keys(), numbered);
    RecordIndex paged;
    paged.UsePaged(std::shared_ptr<PagedIndex>(OpenPaged(path, 8 << 10)));  // two pages of cache
    ASSERT_EQ(paged.size(), n);
    EXPECT_EQ(paged.meta().at("__meta").offset, 12u);
    // Random, sorted and repeated batches: each location as written.
    std::mt19937_64 rng(7);
    std::vector<uint64_t> batch;
    for (int b = 0; b < 20; ++b) {
      batch.clear();
      for (int k = 0; k < 256; ++k) batch.push_back(rng() % n);
      if (b % 3 == 1) std::sort(batch.begin(), batch.end());
      if (b % 3 == 2) batch.assign(256, batch.front());
      std::vector<ValueLocation> at(batch.size());
      ASSERT_OK(paged.Locate(batch.data(), batch.size(), at.data()));
      for (size_t k = 0; k < batch.size(); ++k) {
        EXPECT_EQ(at[k].offset, batch[k] * 4096 + 7);
        EXPECT_EQ(at[k].size, batch[k] % 5000);
      }
    }
    for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{169}, uint64_t{170}, n / 2, n - 1}) {
      EXPECT_EQ(testing::KeyAt(paged, i), KeyOf(i, numbered)) << i;
      EXPECT_EQ(testing::KeyAt(resident, i), KeyOf(i, numbered)) << i;
      uint64_t found = 0;
      ASSERT_TRUE(testing::Finds(paged, KeyOf(i, numbered), &found)) << i;
      EXPECT_EQ(found, i);
    }
    uint64_t unused = 0;
    EXPECT_FALSE(testing::Finds(paged, "absent", &unused));
    for (const std::string& probe : {std::string(""), std::string("key-"), std::string("key-x"),
                                    std::string("\xff\xff"), RecordKey(77) + "a"})
      EXPECT_EQ(testing::LowerBoundOf(paged, probe), testing::LowerBoundOf(resident, probe)) << probe;
    // The cache holds at most its capacity, however many pages were read.
    EXPECT_LE(paged.paged_index()->cache_held(), uint64_t{8} << 10);
  }
}

TEST(PagedIndexTest, ThreadsShareOneCache) {
  testing::TempDir dir;
  const std::string path = dir.Sub("t.idx");
  const uint64_t n = 50000;
  WriteIndex(path, n, false);
  auto p = OpenPaged(path, 16 << 10);  // 4 pages: every thread evicts the others' pages
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<uint64_t> batch(64);
      std::vector<ValueLocation> at(64);
      std::string key;
      for (int round = 0; round < 200; ++round) {
        for (auto& i : batch) i = rng() % n;
        if (round % 2) std::sort(batch.begin(), batch.end());
        if (!p->Locate(batch.data(), batch.size(), at.data()).ok()) ++bad;
        for (size_t k = 0; k < batch.size(); ++k)
          if (at[k].offset != batch[k] * 4096 + 7) ++bad;
        uint64_t pos = 0;
        if (!p->Key(batch[0], &key).ok() || key != KeyOf(batch[0], false)) ++bad;
        if (!p->LowerBound(KeyOf(batch[1], false), &pos).ok() || pos != batch[1]) ++bad;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(p->cache_held(), uint64_t{16} << 10);
}

TEST(PagedIndexTest, StaleOrOlderFilesAreNotFound) {
  testing::TempDir dir;
  const std::string path = dir.Sub("s.idx");
  WriteIndex(path, 10, false);
  std::unique_ptr<PagedIndex> p;
  FileIdentity other = kIdentity;
  other.txnid += 1;
  EXPECT_TRUE(PagedIndex::Open(path, other, "", 4096, &p).IsNotFound());
  EXPECT_TRUE(PagedIndex::Open(path, kIdentity, "named", 4096, &p).IsNotFound());
  EXPECT_TRUE(PagedIndex::Open(dir.Sub("absent.idx"), kIdentity, "", 4096, &p).IsNotFound());
}

// Flips one byte of the file at `offset`.
void Flip(const std::string& path, uint64_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(offset)), 1);
  c ^= 0x10;
  ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(offset)), 1);
  ::close(fd);
}

TEST(PagedIndexTest, ADamagedEntryOrKeyPageIsCorruptionNamingTheFile) {
  testing::TempDir dir;
  const std::string path = dir.Sub("d.idx");
  WriteIndex(path, 5000, false);
  auto p = OpenPaged(path);
  const IndexHeader h = p->header();
  Flip(path, h.EntryOffset(1234) + 3);  // the offset of record 1234
  Flip(path, h.blob_offset + 100);      // the first key page
  p = OpenPaged(path);
  uint64_t records[] = {1234};
  ValueLocation at;
  Status s = p->Locate(records, 1, &at);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("record 1234"), std::string::npos) << s.message();
  std::string key;
  s = p->Key(0, &key);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find("key page 0"), std::string::npos) << s.message();
  // Read whole, the file is refused too.
  RecordIndex resident;
  EXPECT_EQ(LoadIndex(path, kIdentity, "", &resident).code(), Status::Code::kCorruption);
  // A damaged header.
  Flip(path, 20);
  std::unique_ptr<PagedIndex> again;
  EXPECT_EQ(PagedIndex::Open(path, kIdentity, "", 4096, &again).code(), Status::Code::kCorruption);
}

// Every entry of an index WriteIndex wrote, as written.
bool LocatesEvery(const PagedIndex& p, uint64_t records) {
  std::vector<uint64_t> all(records);
  for (uint64_t i = 0; i < records; ++i) all[i] = i;
  std::vector<ValueLocation> at(records);
  if (!p.Locate(all.data(), records, at.data()).ok()) return false;
  for (uint64_t i = 0; i < records; ++i)
    if (at[i].offset != i * 4096 + 7 || at[i].size != i % 5000) return false;
  return true;
}

// Closes this process's descriptors of `path` (the caller that closes what
// it does not own), found by what /proc/self/fd links to.
int CloseDescriptorsOf(const std::string& path) {
  int closed = 0;
  for (int fd = 3; fd < 1024; ++fd) {
    char link[4096];
    const std::string at = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(at.c_str(), link, sizeof(link) - 1);
    if (n <= 0) continue;
    const std::string target(link, static_cast<size_t>(n));
    if (target == path || target == path + " (deleted)") closed += ::close(fd) == 0;
  }
  return closed;
}

// A scratch cleaner deletes the saved index, or a newer one takes its name,
// while a job reads it: a forked child reads on through the descriptor it
// inherited, every entry as written.
TEST(PagedIndexTest, ReopenAfterForkReadsThroughTheInheritedDescriptor) {
  testing::TempDir dir;
  const std::string path = dir.Sub("r.idx");
  for (bool replaced : {false, true}) {
    WriteIndex(path, 3000, false);
    auto p = OpenPaged(path, 4096);
    ASSERT_TRUE(LocatesEvery(*p, 3000));
    ASSERT_EQ(::unlink(path.c_str()), 0);
    if (replaced) WriteIndex(path, 3001, false);
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(p->Reopen().ok() && LocatesEvery(*p, 3000) ? 0 : 1);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "replaced=" << replaced;
    ASSERT_OK(p->Reopen());
    EXPECT_TRUE(LocatesEvery(*p, 3000));
    (void)::unlink(path.c_str());
  }
}

// Only where its descriptor was closed does the index open its file by name:
// the same file reads on, another file at the name is refused, no file is
// NotFound (for the reader to index the data again).
TEST(PagedIndexTest, ReopenWithoutItsDescriptorChecksTheFileByName) {
  testing::TempDir dir;
  const std::string path = dir.Sub("r.idx");
  WriteIndex(path, 300, false);
  auto p = OpenPaged(path);
  ASSERT_EQ(CloseDescriptorsOf(path), 1);
  ASSERT_OK(p->Reopen());
  EXPECT_TRUE(LocatesEvery(*p, 300));
  WriteIndex(path, 301, false);
  ASSERT_EQ(CloseDescriptorsOf(path), 1);
  Status s = p->Reopen();
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find("replaced"), std::string::npos) << s.message();
  ASSERT_EQ(::unlink(path.c_str()), 0);
  s = p->Reopen();
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

}  // namespace
}  // namespace lmdbloader
