// ChunkFiller: filling a range brings the whole 2 MiB chunks it touches into
// the page cache (checked with mincore on a cold file), each chunk once,
// without growing the process's RSS; the short last chunk and ranges past
// the end are handled, and a file truncated under it is left to the exact
// read. FillTogether fills each chunk of a batch once and starts threads
// only when a chunk waits on the device. DropFromPageCache drops every page
// a range touches.
#include "io/chunk_filler.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;

constexpr uint64_t kChunk = ChunkFiller::kChunk;
const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));

// A file of `size` bytes on disk (synced, so that its pages can be dropped),
// open read-only, and out of the page cache.
struct ColdFile {
  ColdFile(const TempDir& dir, const std::string& name, uint64_t size) : path(dir.Sub(name)), size(size) {
    const std::string bytes = testing::RecordBytes(9, size);
    std::ofstream(path, std::ios::binary) << bytes;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    Evict();
  }
  ~ColdFile() {
    if (fd >= 0) ::close(fd);
  }
  void Evict() const {
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  }
  // Pages of [offset, offset + length) in the page cache (mincore).
  uint64_t CachedPages(uint64_t offset, uint64_t length) const {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return ~uint64_t{0};
    std::vector<unsigned char> vec((size + kPage - 1) / kPage);
    ::mincore(p, size, vec.data());
    ::munmap(p, size);
    uint64_t n = 0;
    for (uint64_t page = offset / kPage; page < (offset + length + kPage - 1) / kPage && page < vec.size(); ++page)
      n += vec[page] & 1;
    return n;
  }
  uint64_t Pages(uint64_t offset, uint64_t length) const {
    const uint64_t end = std::min(offset + length, size);
    return (end + kPage - 1) / kPage - offset / kPage;
  }
  bool Cached(uint64_t offset, uint64_t length) const { return CachedPages(offset, length) == Pages(offset, length); }
  std::string path;
  uint64_t size;
  int fd = -1;
};

std::unique_ptr<ChunkFiller> FillerOf(const ColdFile& f) {
  std::unique_ptr<ChunkFiller> filler;
  Status s = ChunkFiller::Create(f.fd, f.size, f.path, &filler);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return filler;
}

// Whether the kernel has MADV_POPULATE_READ (Linux 5.14): without it the
// filler turns itself off, by design.
bool KernelPopulates() {
  void* p = ::mmap(nullptr, kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  const bool ok = p != MAP_FAILED && ::madvise(p, kPage, 22 /* MADV_POPULATE_READ */) == 0;
  if (p != MAP_FAILED) ::munmap(p, kPage);
  return ok;
}

// The cases need a kernel that populates and a file system whose cache a
// file can be evicted from (checked on `f`).
#define SKIP_UNLESS_COLD(f)                                                            \
  do {                                                                                 \
    if (!KernelPopulates()) GTEST_SKIP() << "no MADV_POPULATE_READ (Linux < 5.14)";    \
    if ((f).CachedPages(0, (f).size) != 0) GTEST_SKIP() << "cannot evict " << (f).path; \
  } while (0)

TEST(ChunkFillerTest, FillingARangeCachesTheWholeChunksItTouchesOnce) {
  TempDir dir;
  ColdFile f(dir, "data.mdb", 10 * kChunk + 12345);
  SKIP_UNLESS_COLD(f);
  auto filler = FillerOf(f);
  ASSERT_TRUE(filler->NeedsFill(kChunk - 1, 2));
  filler->Fill(kChunk - 1, 2);  // two bytes, one each side of a boundary
  EXPECT_EQ(filler->chunks_filled(), 2u);
  EXPECT_TRUE(f.Cached(0, 2 * kChunk)) << f.CachedPages(0, 2 * kChunk) << " of " << f.Pages(0, 2 * kChunk);
  // The kernel's readahead may go on a chunk or two past those: not as far
  // as the end.
  EXPECT_EQ(f.CachedPages(8 * kChunk, 2 * kChunk + 12345), 0u) << "chunks far from the range were read";
  EXPECT_FALSE(filler->NeedsFill(0, 2 * kChunk));
  EXPECT_TRUE(filler->NeedsFill(kChunk, kChunk + 1));
  // Filled chunks are not filled again, even once dropped from the cache:
  // the process's own record of them is what counts.
  f.Evict();
  filler->Fill(0, 2 * kChunk);
  EXPECT_EQ(filler->chunks_filled(), 2u);
  EXPECT_EQ(f.CachedPages(0, 2 * kChunk), 0u);
}

TEST(ChunkFillerTest, TheShortLastChunkFillsAndRangesPastTheEndAreClipped) {
  TempDir dir;
  ColdFile f(dir, "data.mdb", 2 * kChunk + 12345);
  SKIP_UNLESS_COLD(f);
  auto filler = FillerOf(f);
  filler->Fill(f.size, 10);  // nothing there
  filler->Fill(0, 0);
  EXPECT_EQ(filler->chunks_filled(), 0u);
  EXPECT_FALSE(filler->NeedsFill(f.size, 1));
  EXPECT_FALSE(filler->NeedsFill(0, 0));
  filler->Fill(f.size - 1, 100 * kChunk);
  EXPECT_EQ(filler->chunks_filled(), 1u);
  EXPECT_TRUE(f.Cached(2 * kChunk, 12345));
  EXPECT_FALSE(filler->NeedsFill(2 * kChunk, ~uint64_t{0} - 2 * kChunk));
  EXPECT_TRUE(filler->NeedsFill(0, 1));
}

// The folios stay in the page cache, out of the process's RSS: filling
// 10 MiB adds (almost) nothing to the file pages the process holds.
TEST(ChunkFillerTest, FilledChunksStayOutOfTheProcesssRss) {
  TempDir dir;
  ColdFile f(dir, "data.mdb", 5 * kChunk);
  SKIP_UNLESS_COLD(f);
  auto filler = FillerOf(f);
  const uint64_t before = testing::ProcessFileRssBytes();
  filler->Fill(0, f.size);
  const uint64_t after = testing::ProcessFileRssBytes();
  EXPECT_EQ(filler->chunks_filled(), 5u);
  EXPECT_TRUE(f.Cached(0, f.size));
  EXPECT_LT(after, before + (1 << 20)) << "filled chunks stayed mapped";
}

// Chunks past the end of a file truncated since Create are not read (no
// SIGBUS: MADV_POPULATE_READ answers EFAULT) and stay unfilled, for the
// exact read to report; the chunk still in the file fills.
TEST(ChunkFillerTest, ChunksPastTheEndOfATruncatedFileAreLeftUnfilled) {
  TempDir dir;
  ColdFile f(dir, "data.mdb", 3 * kChunk);
  SKIP_UNLESS_COLD(f);
  auto filler = FillerOf(f);
  ASSERT_EQ(::truncate(f.path.c_str(), static_cast<off_t>(kChunk)), 0);
  filler->Fill(0, 3 * kChunk);
  EXPECT_EQ(filler->chunks_filled(), 1u);
  EXPECT_FALSE(filler->NeedsFill(0, kChunk));
  EXPECT_TRUE(filler->NeedsFill(kChunk, 1));
  EXPECT_TRUE(filler->NeedsFill(2 * kChunk, kChunk));
}

TEST(ChunkFillerTest, CreateMapsNothingForAnEmptyFileAndNamesTheFileOnError) {
  TempDir dir;
  ColdFile f(dir, "empty", 0);
  std::unique_ptr<ChunkFiller> filler;
  ASSERT_OK(ChunkFiller::Create(f.fd, 0, f.path, &filler));
  filler->Fill(0, 100);
  EXPECT_FALSE(filler->NeedsFill(0, 100));
  EXPECT_EQ(filler->chunks_filled(), 0u);
  std::unique_ptr<ChunkFiller> none;
  Status s = ChunkFiller::Create(-1, kChunk, dir.Sub("data.mdb"), &none);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.sys_errno(), EBADF);
  EXPECT_NE(s.message().find(dir.Sub("data.mdb")), std::string::npos) << s.message();
  EXPECT_EQ(none, nullptr);
}

// A batch's ranges overlap, repeat, span fillers and include a null filler
// and an empty range: every chunk they touch is filled once, and none other.
// Cold, the first chunk waits on the device and helper threads (at most
// parallel - 1) fill the rest; filled, nothing is left and no thread starts;
// cached by someone else (a fresh filler), the caller fills alone.
TEST(ChunkFillerTest, FillTogetherFillsEachChunkOnceAndStartsThreadsOnlyForColdChunks) {
  TempDir dir;
  ColdFile x(dir, "x", 4 * kChunk), y(dir, "y", 3 * kChunk + 100);
  SKIP_UNLESS_COLD(x);
  SKIP_UNLESS_COLD(y);
  auto fx = FillerOf(x), fy = FillerOf(y);
  std::vector<ChunkFiller::Range> batch = {
      {fx.get(), 0, 1},          {fx.get(), 100, kChunk},     {nullptr, 0, 100},
      {fy.get(), 2 * kChunk + 5, 10 * kChunk}, {fy.get(), 0, 0}, {fx.get(), 3 * kChunk, 1},
      {fx.get(), 3 * kChunk + 7, 1}};
  const size_t threads = ChunkFiller::FillTogether(batch, 4);
  EXPECT_EQ(fx->chunks_filled(), 3u);  // 0, 1, 3
  EXPECT_EQ(fy->chunks_filled(), 2u);  // 2, 3 (its last, 100 bytes)
  EXPECT_TRUE(x.Cached(0, 2 * kChunk));
  EXPECT_TRUE(x.Cached(3 * kChunk, kChunk));
  EXPECT_TRUE(y.Cached(2 * kChunk, kChunk + 100));
  EXPECT_EQ(y.CachedPages(0, kChunk), 0u);
  for (const auto& r : batch) {
    if (r.filler) {
      EXPECT_FALSE(r.filler->NeedsFill(r.offset, r.size)) << r.offset;
    }
  }
  EXPECT_GE(threads, 1u) << "the cold chunks were filled one after another";
  EXPECT_LE(threads, 3u);
  EXPECT_EQ(ChunkFiller::FillTogether(batch, 4), 0u);
  EXPECT_EQ(fx->chunks_filled(), 3u);
  EXPECT_EQ(fy->chunks_filled(), 2u);
  // Cached already, by another filler: filled by the caller alone.
  auto gx = FillerOf(x), gy = FillerOf(y);
  for (auto& r : batch) r.filler = r.filler == fx.get() ? gx.get() : r.filler == fy.get() ? gy.get() : nullptr;
  EXPECT_EQ(ChunkFiller::FillTogether(batch, 4), 0u);
  EXPECT_EQ(gx->chunks_filled(), 3u);
  EXPECT_EQ(gy->chunks_filled(), 2u);
}

// parallel = 1: no thread, however cold, and every chunk still fills.
TEST(ChunkFillerTest, FillTogetherWithParallelOneStartsNoThread) {
  TempDir dir;
  ColdFile x(dir, "x", 4 * kChunk);
  SKIP_UNLESS_COLD(x);
  auto fx = FillerOf(x);
  EXPECT_EQ(ChunkFiller::FillTogether({{fx.get(), 0, x.size}}, 1), 0u);
  EXPECT_EQ(fx->chunks_filled(), 4u);
  EXPECT_TRUE(x.Cached(0, x.size));
}

// posix_fadvise drops only whole pages inside its range; DropFromPageCache
// widens the range, so every page it touches goes, and no other. The pages
// are read one by one without readahead first, so that each is a folio of
// its own (a larger folio is dropped only whole).
TEST(ChunkFillerTest, DropFromPageCacheDropsEveryPageTheRangeTouches) {
  TempDir dir;
  ColdFile f(dir, "data.mdb", 16 * kPage);
  if (f.CachedPages(0, f.size) != 0) GTEST_SKIP() << "cannot evict " << f.path;
  ASSERT_EQ(::posix_fadvise(f.fd, 0, 0, POSIX_FADV_RANDOM), 0);
  char c;
  for (uint64_t page = 16; page-- > 0;) ASSERT_EQ(::pread(f.fd, &c, 1, static_cast<off_t>(page * kPage)), 1);
  ASSERT_EQ(f.CachedPages(0, f.size), 16u);
  DropFromPageCache(f.fd, 3 * kPage + 10, kPage);  // bytes of pages 3 and 4
  DropFromPageCache(f.fd, 9 * kPage - 1, 2);       // the last byte of page 8, the first of 9
  DropFromPageCache(f.fd, 12 * kPage + 1, 1);      // one byte inside page 12
  std::vector<uint64_t> gone;
  for (uint64_t page = 0; page < 16; ++page)
    if (f.CachedPages(page * kPage, 1) == 0) gone.push_back(page);
  EXPECT_EQ(gone, (std::vector<uint64_t>{3, 4, 8, 9, 12}));
}

}  // namespace
}  // namespace lmdbloader
