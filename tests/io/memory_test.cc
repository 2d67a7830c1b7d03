#include "lmdbloader/memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "test_util.h"

namespace lmdbloader {
namespace {

TEST(StatmProbeTest, SeesAnonymousMemoryGrow) {
  StatmProbe probe;
  ASSERT_OK(probe.Open());
  uint64_t before = 0, after = 0, file = 0;
  ASSERT_OK(probe.Read(&before, &file));
  const size_t n = 64 << 20;
  char* p = static_cast<char*>(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 1, n);
  ASSERT_OK(probe.Read(&after, &file));
  EXPECT_GE(after, before + n - (4 << 20));
  ::munmap(p, n);
}

TEST(MemoryTest, MappedFileRssCountsOnlyThatFile) {
  testing::TempDir dir;
  std::string path = dir.Sub("blob");
  {
    std::string data(8 << 20, 'x');
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ::close(fd);
  }
  int fd = ::open(path.c_str(), O_RDONLY);
  const char* p = static_cast<const char*>(::mmap(nullptr, 8 << 20, PROT_READ, MAP_SHARED, fd, 0));
  volatile char sink = 0;
  for (size_t i = 0; i < (8u << 20); i += 4096) sink = sink + p[i];
  uint64_t rss = 0;
  ASSERT_OK(MappedFileRss(0, path, &rss));
  EXPECT_GE(rss, 7u << 20);
  ASSERT_OK(MappedFileRss(0, path + "-other", &rss));
  EXPECT_EQ(rss, 0u);
  ProcessMemory m;
  ASSERT_OK(ReadProcessMemory(0, &m));
  EXPECT_GT(m.rss, 7u << 20);
  EXPECT_GT(m.pss, 0u);
  EXPECT_GE(m.rss, m.uss);
  ::munmap(const_cast<char*>(p), 8 << 20);
  ::close(fd);
}

TEST(MemoryTest, MissingProcessIsAnIOError) {
  ProcessMemory m;
  Status s = ReadProcessMemory(999999999, &m);
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_NE(s.message().find("/proc/999999999/smaps_rollup"), std::string::npos);
}

}  // namespace
}  // namespace lmdbloader
