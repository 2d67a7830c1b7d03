// WriteFileAtomically: the destination holds the old file or the whole new
// one, never a part; a failure (missing or unwritable folder, a write error, a
// directory in the way) leaves the destination as it was, no temporary file
// beside it, and an IOError naming the file and the system's reason.
#include "lmdbloader/atomic_write.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/open_file.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::ReadAll;

using testing::TempDir;

using NameList = std::vector<std::string>;

// The names in `dir`, sorted.
NameList Names(const std::string& dir) {
  NameList names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(AtomicWriteTest, AFifoIsWrittenInPlaceNotReplacedByAFile) {
  // What `lmdbloader get -o /dev/null` (or -o /dev/stdout, or a pipe) asks
  // for: renaming a file over the destination would put a regular file in
  // place of the device (as root, /dev/null itself). A FIFO stands in here.
  TempDir dir;
  const std::string fifo = dir.Sub("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // so the write's open does not wait
  ASSERT_GE(reader, 0);
  ASSERT_OK(WriteFileAtomically(fifo, "through the pipe"));
  char got[64] = {};
  EXPECT_EQ(::read(reader, got, sizeof(got)), 16);
  EXPECT_STREQ(got, "through the pipe");
  ::close(reader);
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  EXPECT_EQ(Names(dir.path()), (NameList{"fifo"}));  // no temporary file beside it
}

TEST(AtomicWriteTest, WritesExactlyTheBytesAndNothingBeside) {
  TempDir dir;
  // Binary, with NULs, over several write() calls' worth.
  std::string bytes = testing::RecordBytes(3, (3 << 20) + 7);
  bytes[100] = '\0';
  ASSERT_OK(WriteFileAtomically(dir.Sub("out"), bytes));
  EXPECT_EQ(ReadAll(dir.Sub("out")), bytes);
  ASSERT_OK(WriteFileAtomically(dir.Sub("empty"), ""));
  struct stat st;
  ASSERT_EQ(::stat(dir.Sub("empty").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(Names(dir.path()), (NameList{"empty", "out"}));
}

// The new file is put in place by rename: a reader that opened the old one
// reads it whole, not a mix, and the path then gives the whole new file.
TEST(AtomicWriteTest, AReaderOfTheOldFileKeepsItWholeWhileThePathGetsTheNew) {
  TempDir dir;
  const std::string path = dir.Sub("index");
  const std::string old_bytes = testing::RecordBytes(1, 200000), new_bytes = testing::RecordBytes(2, 70000);
  ASSERT_OK(WriteFileAtomically(path, old_bytes));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_OK(WriteFileAtomically(path, new_bytes));
  std::string seen(old_bytes.size() + 10, '\0');
  const ssize_t n = ::pread(fd, seen.data(), seen.size(), 0);
  ::close(fd);
  ASSERT_EQ(n, static_cast<ssize_t>(old_bytes.size()));
  seen.resize(static_cast<size_t>(n));
  EXPECT_TRUE(seen == old_bytes) << "the old file was rewritten in place";
  EXPECT_TRUE(ReadAll(path) == new_bytes);
  EXPECT_EQ(Names(dir.path()), (NameList{"index"}));
}

TEST(AtomicWriteTest, AMissingFolderIsAnIOErrorNamingTheFile) {
  TempDir dir;
  const std::string path = dir.Sub("no/such/folder/out");
  Status s = WriteFileAtomically(path, "bytes");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.sys_errno(), ENOENT);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::strerror(ENOENT)), std::string::npos) << s.message();
  EXPECT_TRUE(Names(dir.path()).empty());
}

// rename() cannot put a file over a directory: the directory and what it
// holds stay, and the written temporary file is removed.
TEST(AtomicWriteTest, ADirectoryInTheWayStaysAndNoTemporaryFileIsLeft) {
  TempDir dir;
  const std::string path = dir.Sub("out");
  ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
  std::ofstream(path + "/keep") << "kept";
  Status s = WriteFileAtomically(path, std::string(100000, 'n'));
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_NE(s.sys_errno(), 0);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_EQ(Names(dir.path()), (NameList{"out"}));
  EXPECT_EQ(ReadAll(path + "/keep"), "kept");
}

// A write that fails part-way (here the file size limit, EFBIG, after a short
// first write of 4 KiB): the destination keeps its old bytes and the partial
// temporary file is removed. In a child: the limit is the process's.
TEST(AtomicWriteTest, AWriteErrorPartWayLeavesTheOldFileAndNoPartialFile) {
  TempDir dir;
  const std::string path = dir.Sub("list.json");
  std::ofstream(path) << "old";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead
    struct rlimit limit;
    if (::getrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(10);
    limit.rlim_cur = 4096;
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(11);
    Status s = WriteFileAtomically(path, std::string(1 << 16, 'n'));
    if (s.ok()) ::_exit(12);
    if (s.code() != Status::Code::kIOError || s.sys_errno() != EFBIG) ::_exit(13);
    if (s.message().find(path) == std::string::npos) ::_exit(14);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ReadAll(path), "old");
  EXPECT_EQ(Names(dir.path()), (NameList{"list.json"}));
}

// A folder this user may not write in (the test runs as root: the write is
// made by an unprivileged child): an error, the old file untouched.
TEST(AtomicWriteTest, AFolderTheUserCannotWriteInIsAnErrorAndTheOldFileStays) {
  TempDir dir;
  const std::string folder = dir.Sub("ro"), path = folder + "/out";
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0);
  std::ofstream(path) << "old";
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);  // the file itself is writable: only the folder is not
  const int code = testing::RunUnprivileged([&] {
    Status s = WriteFileAtomically(path, "new");
    if (s.ok()) return 1;
    if (s.code() != Status::Code::kIOError || s.sys_errno() != EACCES) return 2;
    return s.message().find(path) == std::string::npos ? 3 : 0;
  });
  ASSERT_NE(code, 98) << "could not drop privileges";
  ASSERT_NE(code, 99) << "could not drop privileges";
  EXPECT_EQ(code, 0);
  EXPECT_EQ(ReadAll(path), "old");
  EXPECT_EQ(Names(folder), (NameList{"out"}));
}

// Threads of one process saving the same file at once (two Readers opening
// one corpus each save its index): every call succeeds and the file is one
// writer's bytes, whole, never a mix of both.
TEST(AtomicWriteTest, ThreadsWritingOnePathLeaveOneWritersWholeFile) {
  TempDir dir;
  const std::string path = dir.Sub("index");
  const std::string a = testing::RecordBytes(10, 1 << 20), b = testing::RecordBytes(11, (1 << 20) - 3);
  std::atomic<int> failed{0};
  std::atomic<int> mixed{0};
  auto writer = [&](const std::string& bytes) {
    for (int k = 0; k < 20; ++k) {
      Status s = WriteFileAtomically(path, bytes);
      if (!s.ok()) {
        ++failed;
        ADD_FAILURE() << s.ToString();
        return;
      }
      std::string now;
      if (!ReadWholeFile(path, &now).ok() || (now != a && now != b)) ++mixed;
    }
  };
  std::thread t1(writer, std::cref(a)), t2(writer, std::cref(b));
  t1.join();
  t2.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(mixed.load(), 0);
  const std::string last = ReadAll(path);
  EXPECT_TRUE(last == a || last == b);
  EXPECT_EQ(Names(dir.path()), (NameList{"index"}));
}

}  // namespace
}  // namespace lmdbloader
