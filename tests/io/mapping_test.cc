// Mapping: a read-only shared view of the file's bytes that lives as long as
// its last owner; a read past the end of a file that shrank under it reads
// zeros and marks that mapping (not others), and once it is gone its
// addresses are no longer guarded.
#include "io/mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;

const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));

// A file of `size` checkable bytes, open read-only; closes on destruction.
struct File {
  File(const TempDir& dir, const std::string& name, uint64_t size)
      : path(dir.Sub(name)), bytes(testing::RecordBytes(5, size)) {
    std::ofstream(path, std::ios::binary) << bytes;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  ~File() {
    if (fd >= 0) ::close(fd);
  }
  std::string path, bytes;
  int fd = -1;
};

// Whether the page at `p` is mapped in this process (mincore fails with
// ENOMEM on an unmapped address).
bool IsMapped(const void* p) {
  unsigned char v;
  void* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) & ~(kPage - 1));
  return ::mincore(page, 1, &v) == 0 || errno != ENOMEM;
}

// Runs `body` in a forked child and returns its wait status. The child's
// stderr is dropped: under a sanitizer, the fault it is there to take
// prints a report.
template <typename Body>
int ChildStatus(Body body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(10);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, 2);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(MappingTest, MapsTheFilesBytes) {
  TempDir dir;
  File f(dir, "data.mdb", 3 * kPage + 100);
  std::shared_ptr<Mapping> m;
  ASSERT_OK(Mapping::Map(f.fd, f.bytes.size(), f.path, &m));
  ASSERT_NE(m->data(), nullptr);
  EXPECT_EQ(m->size(), f.bytes.size());
  EXPECT_TRUE(std::string(m->data(), m->size()) == f.bytes);
  EXPECT_FALSE(m->shrank());
}

// MAP_SHARED: bytes written to the file after mapping (LMDB's writer
// committing in place) are seen through the mapping.
TEST(MappingTest, SeesWritesMadeToTheFileAfterMapping) {
  TempDir dir;
  File f(dir, "data.mdb", 4 * kPage);
  std::shared_ptr<Mapping> m;
  ASSERT_OK(Mapping::Map(f.fd, f.bytes.size(), f.path, &m));
  const int w = ::open(f.path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(w, 0);
  ASSERT_EQ(::pwrite(w, "new bytes", 9, 2 * kPage + 5), 9);
  ::close(w);
  EXPECT_EQ(std::string(m->data() + 2 * kPage + 5, 9), "new bytes");
}

// The mapping is read-only: a write through it faults (SIGSEGV, or a
// sanitizer's report and exit), never lands in the file.
TEST(MappingTest, AWriteThroughTheMappingFaults) {
  TempDir dir;
  File f(dir, "data.mdb", 2 * kPage);
  std::shared_ptr<Mapping> m;
  ASSERT_OK(Mapping::Map(f.fd, f.bytes.size(), f.path, &m));
  const int status = ChildStatus([&] {
    const_cast<volatile char*>(m->data())[kPage] = 'X';
    return 0;
  });
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the write went through";
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGSEGV);
  }
  std::ifstream in(f.path, std::ios::binary);
  std::string now((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(now == f.bytes);
}

TEST(MappingTest, AnEmptyFileMapsToNothing) {
  TempDir dir;
  File f(dir, "empty", 0);
  std::shared_ptr<Mapping> m;
  ASSERT_OK(Mapping::Map(f.fd, 0, f.path, &m));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->data(), nullptr);
  EXPECT_EQ(m->size(), 0u);
  EXPECT_FALSE(m->shrank());
}

TEST(MappingTest, AFailedMapIsAnIOErrorNamingTheFile) {
  TempDir dir;
  File f(dir, "data.mdb", kPage);
  std::shared_ptr<Mapping> m;
  Status s = Mapping::Map(-1, kPage, f.path, &m);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.sys_errno(), EBADF);
  EXPECT_NE(s.message().find(f.path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("mmap"), std::string::npos) << s.message();
  // A descriptor open for writing only cannot back a read mapping.
  const int w = ::open(f.path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(w, 0);
  s = Mapping::Map(w, kPage, f.path, &m);
  ::close(w);
  EXPECT_EQ(s.sys_errno(), EACCES) << s.ToString();
  EXPECT_EQ(m, nullptr);
}

// Unmapped when the last owner lets go, not the first.
TEST(MappingTest, UnmappedWhenTheLastOwnerLetsGo) {
  TempDir dir;
  File f(dir, "data.mdb", 8 * kPage);
  std::shared_ptr<Mapping> m;
  ASSERT_OK(Mapping::Map(f.fd, f.bytes.size(), f.path, &m));
  const char* p = m->data();
  std::shared_ptr<Mapping> view = m;
  m.reset();
  ASSERT_TRUE(IsMapped(p + 7 * kPage));
  EXPECT_EQ(p[7 * kPage + 3], f.bytes[7 * kPage + 3]);
  view.reset();
  EXPECT_FALSE(IsMapped(p));
  EXPECT_FALSE(IsMapped(p + 7 * kPage));
}

// A file cut to 4 pages under a 16-page mapping: the pages still in the file
// read as before, a read past the new end reads zeros instead of raising
// SIGBUS, and only the mapping that read past the end is marked.
TEST(MappingTest, AReadPastAShrunkFilesEndReadsZerosAndMarksThatMappingOnly) {
  TempDir dir;
  File f(dir, "data.mdb", 16 * kPage);
  std::shared_ptr<Mapping> a, b;
  ASSERT_OK(Mapping::Map(f.fd, f.bytes.size(), f.path, &a));
  ASSERT_OK(Mapping::Map(f.fd, f.bytes.size(), f.path, &b));
  ASSERT_EQ(::truncate(f.path.c_str(), 4 * kPage), 0);
  const volatile char* p = a->data();
  EXPECT_EQ(p[3 * kPage + 1], f.bytes[3 * kPage + 1]);
  EXPECT_FALSE(a->shrank()) << "nothing was read past the end yet";
  EXPECT_EQ(p[10 * kPage], 0);
  EXPECT_TRUE(a->shrank());
  EXPECT_EQ(p[5 * kPage], 0);
  EXPECT_EQ(p[16 * kPage - 1], 0);
  EXPECT_EQ(p[kPage + 7], f.bytes[kPage + 7]);  // the file's own pages still read the file
  EXPECT_FALSE(b->shrank());
  EXPECT_EQ(b->data()[2 * kPage], f.bytes[2 * kPage]);
}

// Once a mapping is gone its addresses are no longer the guard's: another
// mapping placed there later (by code that knows nothing of the guard) whose
// file shrank gets its SIGBUS (or a sanitizer's report), not silent zeros.
TEST(MappingTest, AddressesOfAMappingThatIsGoneAreNoLongerGuarded) {
  TempDir dir;
  File f(dir, "data.mdb", 16 * kPage);
  const std::string other = dir.Sub("other");
  const int status = ChildStatus([&] {
    // The other file is made first: nothing allocates between the unmap and
    // the map at the freed address.
    std::ofstream(other, std::ios::binary) << std::string(16 * kPage, 'o');
    const int fd = ::open(other.c_str(), O_RDWR);
    std::shared_ptr<Mapping> m;
    if (!Mapping::Map(f.fd, f.bytes.size(), f.path, &m).ok()) return 10;
    void* where = const_cast<char*>(m->data());
    m.reset();
    void* p = ::mmap(where, 16 * kPage, PROT_READ, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    if (p != where) return 11;  // the address was taken meanwhile: nothing shown
    if (::ftruncate(fd, 0) != 0) return 12;
    const char c = static_cast<volatile char*>(p)[8 * kPage];
    return c == 0 ? 0 : 13;  // 0: the fault was swallowed
  });
  if (WIFEXITED(status) && WEXITSTATUS(status) == 11) GTEST_SKIP() << "the freed address was taken meanwhile";
  ASSERT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) >= 10) << "setup failed: " << WEXITSTATUS(status);
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the guard still owned a freed mapping's addresses";
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGBUS);
  }
}

}  // namespace
}  // namespace lmdbloader
