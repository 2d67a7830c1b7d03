// The fault guard: a read through a guarded mapping past the end of a file
// that shrank reads zeros and marks that mapping instead of killing the
// process with SIGBUS; every other fault (an address the guard does not own,
// a raised SIGBUS, a SIGSEGV) still reaches the handler the caller installed,
// run as the kernel would run it, or the default action. Cases that install
// handlers run in a forked child: handlers belong to the whole process.
#include "io/fault_guard.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;

const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));

// A read-only shared mapping of `pages` pages of a new file at `path` filled
// with 'f', whose file is then truncated to `keep` pages: a read past those
// raises SIGBUS. nullptr when it cannot be set up.
volatile char* MapThenTruncate(const std::string& path, uint64_t pages, uint64_t keep) {
  std::ofstream(path, std::ios::binary) << std::string(pages * kPage, 'f');
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = ::mmap(nullptr, pages * kPage, PROT_READ, MAP_SHARED, fd, 0);
  const bool cut = ::ftruncate(fd, static_cast<off_t>(keep * kPage)) == 0;
  ::close(fd);
  return p == MAP_FAILED || !cut ? nullptr : static_cast<volatile char*>(p);
}

// Runs `body` in a forked child (SIGALRM ends a hang) and returns its wait
// status.
template <typename Body>
int ChildStatus(Body body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(10);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

std::string Describe(int status) {
  return WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                           : "signal " + std::to_string(WTERMSIG(status));
}

// The caller's handler: records what it was given and what was blocked while
// it ran, and jumps back past the faulting read.
sigjmp_buf g_jump;
volatile sig_atomic_t g_calls = 0;
volatile int g_signal = 0;
volatile int g_code = 0;
volatile uintptr_t g_addr = 0;
volatile bool g_usr1_blocked = false;

void NoteBlocked() {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  g_usr1_blocked = sigismember(&now, SIGUSR1) == 1;
}
void InfoHandler(int sig, siginfo_t* info, void*) {
  g_calls = g_calls + 1;
  g_signal = sig;
  g_code = info->si_code;
  g_addr = reinterpret_cast<uintptr_t>(info->si_addr);
  NoteBlocked();
  siglongjmp(g_jump, 1);
}
void PlainHandler(int sig) {
  g_calls = g_calls + 1;
  g_signal = sig;
  NoteBlocked();
  siglongjmp(g_jump, 1);
}

// Installs the caller's handler for `sig`, blocking SIGUSR1 while it runs.
bool InstallCallers(int sig, bool siginfo) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  if (siginfo) {
    sa.sa_sigaction = InfoHandler;
    sa.sa_flags = SA_SIGINFO;
  } else {
    sa.sa_handler = PlainHandler;
  }
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGUSR1);
  return ::sigaction(sig, &sa, nullptr) == 0;
}

// Reads p[offset]: 'C' when the caller's handler took the fault, 'Z' when
// the read completed with zero (the guard's zero pages), 'F' when it
// completed with another byte (the file's).
char ReadThrough(volatile char* p, uint64_t offset) {
  const int before = g_calls;
  if (sigsetjmp(g_jump, 1) == 0) return p[offset] == 0 ? 'Z' : 'F';
  return g_calls == before + 1 ? 'C' : '?';
}

TEST(FaultGuardTest, NothingToGuardGivesNoHandleAndNoHandleIsHarmless) {
  int x = 0;
  EXPECT_EQ(GuardMapping(nullptr, kPage), -1);
  EXPECT_EQ(GuardMapping(&x, 0), -1);
  EXPECT_FALSE(MappingShrank(-1));
  EXPECT_FALSE(MappingShrank(1 << 30));
  UnguardMapping(-1);
  UnguardMapping(1 << 30);
}

// The file's remaining pages still read the file; every page past the new
// end reads zeros; the mark is set by the first such read, and only then.
TEST(FaultGuardTest, AReadPastTheEndOfAShrunkFileReadsZerosAndMarksTheMapping) {
  TempDir dir;
  volatile char* p = MapThenTruncate(dir.Sub("data"), 16, 4);
  ASSERT_NE(p, nullptr);
  const int handle = GuardMapping(const_cast<char*>(p), 16 * kPage);
  ASSERT_GE(handle, 0);
  EXPECT_EQ(p[3 * kPage + 9], 'f');
  EXPECT_FALSE(MappingShrank(handle));
  EXPECT_EQ(p[9 * kPage], 0);
  EXPECT_TRUE(MappingShrank(handle));
  for (uint64_t page = 4; page < 16; ++page) EXPECT_EQ(p[page * kPage + 5], 0) << "page " << page;
  EXPECT_EQ(p[kPage], 'f');
  UnguardMapping(handle);
  ::munmap(const_cast<char*>(p), 16 * kPage);
}

// A slot given back and taken again for another mapping starts unmarked.
TEST(FaultGuardTest, AHandleReusedForAnotherMappingStartsUnmarked) {
  TempDir dir;
  volatile char* p = MapThenTruncate(dir.Sub("a"), 4, 1);
  ASSERT_NE(p, nullptr);
  const int first = GuardMapping(const_cast<char*>(p), 4 * kPage);
  ASSERT_GE(first, 0);
  EXPECT_EQ(p[2 * kPage], 0);
  ASSERT_TRUE(MappingShrank(first));
  UnguardMapping(first);
  ::munmap(const_cast<char*>(p), 4 * kPage);
  bool reused = false;
  std::vector<std::pair<volatile char*, int>> taken;
  for (int k = 0; k < 64 && !reused; ++k) {
    volatile char* q = MapThenTruncate(dir.Sub("b" + std::to_string(k)), 4, 4);
    ASSERT_NE(q, nullptr);
    const int h = GuardMapping(const_cast<char*>(q), 4 * kPage);
    EXPECT_FALSE(MappingShrank(h)) << "handle " << h;
    reused = h == first;
    taken.emplace_back(q, h);
  }
  EXPECT_TRUE(reused) << "the freed handle was never given out again";
  for (auto& [q, h] : taken) {
    UnguardMapping(h);
    ::munmap(const_cast<char*>(q), 4 * kPage);
  }
}

// Only [begin, begin + size) rounded out to whole pages is the guard's: a
// fault just before or just past it goes to the caller's handler, one at its
// edges is the guard's.
TEST(FaultGuardTest, OnlyTheGuardedRangeIsTheGuards) {
  TempDir dir;
  const std::string path = dir.Sub("data");
  const int status = ChildStatus([&] {
    if (!InstallCallers(SIGBUS, true)) return 20;
    volatile char* p = MapThenTruncate(path, 16, 0);
    if (p == nullptr) return 21;
    // Pages 4 to 12: 8 pages and 1 byte, the last page partly.
    if (GuardMapping(const_cast<char*>(p) + 4 * kPage, 8 * kPage + 1) < 0) return 22;
    if (ReadThrough(p, 3 * kPage + 100) != 'C') return 1;
    if (ReadThrough(p, 13 * kPage) != 'C') return 2;
    if (ReadThrough(p, 12 * kPage + 100) != 'Z') return 3;
    if (ReadThrough(p, 4 * kPage) != 'Z') return 4;
    return 0;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Describe(status);
}

// A caller's SIGBUS handler installed before the guard gets the faults the
// guard does not own (with their address and code, and the mask it asked
// for while it runs) and a SIGBUS raised by the program; the guard's own
// faults never reach it; SIGSEGV is not the guard's business at all.
class CallersHandlerTest : public ::testing::TestWithParam<bool> {};

TEST_P(CallersHandlerTest, GetsEverySigbusThatIsNotTheGuardsAndEverySigsegv) {
  const bool siginfo = GetParam();
  TempDir dir;
  const std::string guarded = dir.Sub("guarded"), foreign = dir.Sub("foreign");
  const int status = ChildStatus([&] {
    if (!InstallCallers(SIGBUS, siginfo) || !InstallCallers(SIGSEGV, siginfo)) return 20;
    volatile char* mine = MapThenTruncate(guarded, 8, 2);
    volatile char* theirs = MapThenTruncate(foreign, 8, 2);
    if (mine == nullptr || theirs == nullptr) return 21;
    const int handle = GuardMapping(const_cast<char*>(mine), 8 * kPage);
    if (handle < 0) return 22;
    struct sigaction segv;
    if (::sigaction(SIGSEGV, nullptr, &segv) != 0) return 23;
    const bool segv_kept = siginfo ? segv.sa_sigaction == InfoHandler : segv.sa_handler == PlainHandler;
    if (!segv_kept) return 1;
    // A fault in a mapping the guard does not own.
    if (ReadThrough(theirs, 5 * kPage) != 'C') return 2;
    if (g_signal != SIGBUS || !g_usr1_blocked) return 3;
    if (siginfo && (g_code != BUS_ADRERR || g_addr != reinterpret_cast<uintptr_t>(theirs + 5 * kPage))) return 4;
    // The guard's own fault: zeros, the caller's handler not called.
    if (ReadThrough(mine, 5 * kPage) != 'Z' || !MappingShrank(handle)) return 5;
    // A SIGBUS the program raises is no fault of a mapping.
    const int before = g_calls;
    if (sigsetjmp(g_jump, 1) == 0) ::raise(SIGBUS);
    if (g_calls != before + 1 || g_signal != SIGBUS) return 6;
    if (siginfo && g_code > 0) return 7;
    // A write to the read-only mapping: SIGSEGV, straight to the caller.
    if (sigsetjmp(g_jump, 1) == 0) mine[0] = 'x';
    if (g_calls != before + 2 || g_signal != SIGSEGV) return 8;
    // The mask the handler ran with is gone once it is left.
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    return sigismember(&now, SIGUSR1) == 1 ? 9 : 0;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Describe(status);
}

INSTANTIATE_TEST_SUITE_P(SiginfoOrPlain, CallersHandlerTest, ::testing::Bool());

// A handler installed after the guard (faulthandler, a DataLoader worker's)
// is in front until the next mapping is guarded, which puts the guard back
// in front of it: the guard's faults are the guard's again, the rest still
// reach that handler.
TEST(FaultGuardTest, GuardingAMappingPutsTheGuardBackInFront) {
  TempDir dir;
  const std::string first = dir.Sub("first"), second = dir.Sub("second"), foreign = dir.Sub("foreign");
  const int status = ChildStatus([&] {
    volatile char* a = MapThenTruncate(first, 8, 2);
    volatile char* b = MapThenTruncate(second, 8, 8);
    volatile char* theirs = MapThenTruncate(foreign, 8, 2);
    if (a == nullptr || b == nullptr || theirs == nullptr) return 20;
    const int ha = GuardMapping(const_cast<char*>(a), 8 * kPage);
    if (ha < 0 || !InstallCallers(SIGBUS, true)) return 21;
    if (GuardMapping(const_cast<char*>(b), 8 * kPage) < 0) return 22;
    struct sigaction now;
    if (::sigaction(SIGBUS, nullptr, &now) != 0) return 23;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == InfoHandler) return 1;
    if (ReadThrough(a, 6 * kPage) != 'Z' || !MappingShrank(ha)) return 2;
    if (ReadThrough(theirs, 6 * kPage) != 'C') return 3;
    return 0;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Describe(status);
}

// SIGBUS ignored before the guard: a fault the guard does not own still
// ends the process by SIGBUS, as it would without the guard, rather than
// returning to the faulting read forever.
TEST(FaultGuardTest, AnIgnoredSigbusStillEndsTheProcessOnAFaultThatIsNotTheGuards) {
  TempDir dir;
  const std::string guarded = dir.Sub("guarded"), foreign = dir.Sub("foreign");
  const int status = ChildStatus([&] {
    if (::signal(SIGBUS, SIG_IGN) == SIG_ERR) return 20;
    volatile char* mine = MapThenTruncate(guarded, 4, 4);
    volatile char* theirs = MapThenTruncate(foreign, 4, 1);
    if (mine == nullptr || theirs == nullptr) return 21;
    if (GuardMapping(const_cast<char*>(mine), 4 * kPage) < 0) return 22;
    const char c = theirs[2 * kPage];
    return c == 0 ? 1 : 2;
  });
  ASSERT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) >= 20) << Describe(status);
  EXPECT_TRUE(WIFSIGNALED(status)) << "the fault was swallowed: " << Describe(status);
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGBUS) << "SIGALRM: the fault bounced forever";
  }
}

}  // namespace
}  // namespace lmdbloader
