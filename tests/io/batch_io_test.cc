// BatchIo: every engine reads what pread reads; a short file is Corruption
// naming the offset; io_uring rings are shared across engines and processes
// set up their own after fork.
#include "io/batch_io.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;

std::string WriteFile(const TempDir& dir, size_t bytes) {
  const std::string path = dir.Sub("data");
  std::ofstream(path, std::ios::binary) << testing::RecordBytes(7, bytes);
  return path;
}

std::vector<IoEngine> Engines() { return {IoEngine::kAuto, IoEngine::kThreads, IoEngine::kSync}; }

Status ReadRanges(IoEngine engine, int fd, const std::string& path, const std::vector<std::pair<uint64_t, uint64_t>>& ranges,
                  std::vector<std::string>* out) {
  std::unique_ptr<BatchIo> io;
  std::string why;
  LMDBLOADER_RETURN_IF_ERROR(BatchIo::Create(engine, 8, &io, &why));
  out->assign(ranges.size(), "");
  std::vector<ReadRequest> requests;
  for (size_t k = 0; k < ranges.size(); ++k) {
    (*out)[k].resize(ranges[k].second);
    requests.push_back({fd, ranges[k].first, ranges[k].second, (*out)[k].data(), &path});
  }
  return io->ReadAll(requests.data(), requests.size());
}

TEST(BatchIoTest, EveryEngineReadsWhatPreadReads) {
  TempDir dir;
  const std::string path = WriteFile(dir, 1 << 20);
  const std::string all = testing::RecordBytes(7, 1 << 20);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (uint64_t k = 0; k < 40; ++k) ranges.push_back({(k * 7919 * 13) % ((1 << 20) - 9000), k % 5 ? 9000 : 0});
  for (IoEngine engine : Engines()) {
    SCOPED_TRACE(IoEngineName(engine));
    std::vector<std::string> got;
    ASSERT_OK(ReadRanges(engine, fd, path, ranges, &got));
    for (size_t k = 0; k < ranges.size(); ++k) EXPECT_EQ(got[k], all.substr(ranges[k].first, ranges[k].second));
  }
  ::close(fd);
}

TEST(BatchIoTest, ReadingPastTheEndIsCorruptionNamingTheOffset) {
  TempDir dir;
  const std::string path = WriteFile(dir, 10000);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  for (IoEngine engine : Engines()) {
    std::vector<std::string> got;
    Status s = ReadRanges(engine, fd, path, {{0, 100}, {9000, 2000}, {200, 10}}, &got);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << IoEngineName(engine) << ": " << s.ToString();
    EXPECT_NE(s.message().find("unexpected end of file at offset 10000"), std::string::npos) << s.message();
  }
  ::close(fd);
}

TEST(BatchIoTest, ManyEnginesOpenedAndDroppedHoldNoMoreDescriptors) {
  // Rings are kept by the process and shared: releasing one would interrupt
  // the caller's next blocking call (batch_io.cc).
  TempDir dir;
  const std::string path = WriteFile(dir, 65536);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  auto descriptors = [] {
    int n = 0;
    for (int f = 0; f < 4096; ++f) n += ::fcntl(f, F_GETFD) != -1;
    return n;
  };
  std::vector<std::string> got;
  ASSERT_OK(ReadRanges(IoEngine::kAuto, fd, path, {{0, 10}, {100, 10}}, &got));
  const int before = descriptors();
  for (int i = 0; i < 50; ++i) ASSERT_OK(ReadRanges(IoEngine::kAuto, fd, path, {{0, 10}, {100, 10}}, &got));
  EXPECT_EQ(descriptors(), before);
  // A forked child reads through rings of its own.
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<std::string> child;
    Status s = ReadRanges(IoEngine::kAuto, fd, path, {{0, 10}, {100, 10}}, &child);
    ::_exit(s.ok() && child[0] == got[0] && child[1] == got[1] ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ::close(fd);
}

}  // namespace
}  // namespace lmdbloader
