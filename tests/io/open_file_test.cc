// OpenReadOnly and ReadWholeFile: a regular file opens read-only,
// close-on-exec and blocking; anything else (directory, FIFO, device, socket)
// and a missing or unreadable file is an error naming the file and why,
// leaving no descriptor open; running out of descriptors raises the soft
// limit, and at the hard limit says which limit to raise.
#include "io/open_file.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;

size_t OpenDescriptors() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) n += !e.path().empty();
  return n;
}

// Runs `body` in a forked child that ends within `seconds` (SIGALRM: a hang
// fails the test) and returns its exit status; -signal when killed.
template <typename Body>
int InChild(Body body, unsigned seconds = 5) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(seconds);
    ::_exit(body());
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1000;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

TEST(OpenFileTest, ARegularFileOpensReadOnlyCloseOnExecAndBlocking) {
  TempDir dir;
  const std::string path = dir.Sub("data.mdb");
  std::ofstream(path) << std::string(12345, 'd');
  int fd = -1;
  struct stat st;
  ASSERT_OK(OpenReadOnly(path, &fd, &st));
  ASSERT_GE(fd, 0);
  const int fd_flags = ::fcntl(fd, F_GETFD);
  EXPECT_TRUE(fd_flags & FD_CLOEXEC) << "a child exec'd by the caller would inherit the descriptor";
  const int fl = ::fcntl(fd, F_GETFL);
  EXPECT_EQ(fl & O_ACCMODE, O_RDONLY);
  EXPECT_FALSE(fl & O_NONBLOCK) << "io_uring would answer EAGAIN where a read waits";
  EXPECT_EQ(::write(fd, "x", 1), -1);
  struct stat want;
  ASSERT_EQ(::stat(path.c_str(), &want), 0);
  EXPECT_EQ(st.st_size, 12345);
  EXPECT_EQ(st.st_ino, want.st_ino);
  ::close(fd);
  // `st` is optional.
  ASSERT_OK(OpenReadOnly(path, &fd));
  ::close(fd);
}

TEST(OpenFileTest, AMissingFileIsAnIOErrorNamingItAndWhy) {
  TempDir dir;
  const std::string path = dir.Sub("missing/data.mdb");
  int fd = -1;
  Status s = OpenReadOnly(path, &fd);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.sys_errno(), ENOENT);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::strerror(ENOENT)), std::string::npos) << s.message();
  std::string out = "stale";
  s = ReadWholeFile(path, &out);
  EXPECT_EQ(s.sys_errno(), ENOENT) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

// Each kind of non-regular file is refused by name and kind, and its
// descriptor closed. A FIFO with no writer is refused at once: opening it
// plainly would wait forever (in a child, which SIGALRM ends if it hangs).
TEST(OpenFileTest, NonRegularFilesAreRefusedByKindWithoutLeakingADescriptor) {
  TempDir dir;
  const std::string fifo = dir.Sub("fifo"), sub = dir.Sub("sub");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {sub, "a directory"}, {fifo, "a FIFO"}, {"/dev/null", "a device"}};
  for (const auto& [path, kind] : cases) {
    SCOPED_TRACE(path);
    const int code = InChild([&, path = path, kind = kind] {
      const size_t before = OpenDescriptors();
      int fd = -1;
      Status s = OpenReadOnly(path, &fd);
      if (s.code() != Status::Code::kInvalidArgument) return 1;
      if (s.message().find(path) == std::string::npos || s.message().find(kind) == std::string::npos) return 2;
      std::string out;
      if (ReadWholeFile(path, &out).code() != Status::Code::kInvalidArgument) return 3;
      return OpenDescriptors() == before ? 0 : 4;
    });
    EXPECT_EQ(code, 0) << (code == -SIGALRM ? "hung opening it" : "");
  }
}

// A socket cannot be opened at all (ENXIO): an IOError naming it.
TEST(OpenFileTest, ASocketIsAnErrorNamingIt) {
  TempDir dir;
  const std::string path = dir.Sub("sock");
  const int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(sock, 0);
  struct sockaddr_un addr;
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  ASSERT_EQ(::bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  int fd = -1;
  Status s = OpenReadOnly(path, &fd);
  ::close(sock);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
}

// Root reads any file: the unreadable file is opened by an unprivileged child.
TEST(OpenFileTest, AFileTheUserMayNotReadIsPermissionDeniedNamingIt) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string path = dir.Sub("secret.mdb");
  std::ofstream(path) << "secret";
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  const int code = testing::RunUnprivileged([&] {
    int fd = -1;
    Status s = OpenReadOnly(path, &fd);
    if (s.code() != Status::Code::kIOError || s.sys_errno() != EACCES) return 1;
    if (s.message().find(path) == std::string::npos) return 2;
    return s.message().find(std::strerror(EACCES)) == std::string::npos ? 3 : 0;
  });
  ASSERT_NE(code, 98) << "could not drop privileges";
  ASSERT_NE(code, 99) << "could not drop privileges";
  EXPECT_EQ(code, 0);
}

// Fills the descriptor table up to the soft limit `soft` (hard limit `hard`)
// with copies of stdin; false when the limit cannot be set.
bool UseUpDescriptors(rlim_t soft, rlim_t hard) {
  struct rlimit limit{soft, hard};
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  while (::dup(0) >= 0) {
  }
  return errno == EMFILE;
}

// At the soft limit, a descriptor is still had: the soft limit is raised to
// the hard one and the open retried.
TEST(OpenFileTest, AtTheSoftDescriptorLimitTheLimitIsRaisedAndTheOpenSucceeds) {
  TempDir dir;
  const std::string path = dir.Sub("part-00001");
  std::ofstream(path) << "part";
  const int code = InChild([&] {
    if (!UseUpDescriptors(64, 256)) return 10;
    int fd = -1;
    if (!OpenReadOnly(path, &fd).ok()) return 1;
    struct rlimit now;
    if (::getrlimit(RLIMIT_NOFILE, &now) != 0) return 11;
    if (now.rlim_cur != 256) return 2;
    std::string bytes;
    if (!ReadWholeFile(path, &bytes).ok() || bytes != "part") return 3;
    return 0;
  });
  EXPECT_EQ(code, 0);
}

// At the hard limit: an IOError naming the file, keeping EMFILE (a Python
// caller sees OSError.errno), and saying which limit to raise.
TEST(OpenFileTest, AtTheHardDescriptorLimitTheErrorSaysWhichLimitToRaise) {
  TempDir dir;
  const std::string path = dir.Sub("part-01500");
  std::ofstream(path) << "part";
  const int code = InChild([&] {
    if (!UseUpDescriptors(64, 64)) return 10;
    int fd = -1;
    Status s = OpenReadOnly(path, &fd);
    if (s.code() != Status::Code::kIOError) return 1;
    if (s.message().find(path) == std::string::npos) return 2;
    if (s.message().find("ulimit -Hn") == std::string::npos) return 3;
    if (s.message().find("hard limit 64") == std::string::npos) return 4;
    return s.sys_errno() == EMFILE ? 0 : 5;
  });
  EXPECT_EQ(code, 0);
}

// Contents of every size around the 64 KiB read unit, empty included; what
// `out` held before is replaced.
TEST(OpenFileTest, ReadWholeFileReadsEveryByteAndReplacesTheOutput) {
  TempDir dir;
  for (size_t size : {size_t{0}, size_t{1}, size_t{65535}, size_t{65536}, size_t{65537}, size_t{(3 << 20) + 11}}) {
    SCOPED_TRACE(size);
    const std::string path = dir.Sub("f" + std::to_string(size));
    const std::string bytes = testing::RecordBytes(size, size);
    std::ofstream(path, std::ios::binary) << bytes;
    std::string out = "left over from before";
    const size_t before = OpenDescriptors();
    ASSERT_OK(ReadWholeFile(path, &out));
    EXPECT_TRUE(out == bytes) << "read " << out.size() << " bytes";
    EXPECT_EQ(OpenDescriptors(), before);
  }
}

}  // namespace
}  // namespace lmdbloader
