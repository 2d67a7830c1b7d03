#include "io/fault_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <new>

namespace lmdbloader {

namespace {

// Slots come in blocks, allocated as mappings are guarded (a shard set of
// thousands of parts maps thousands of files) and never freed: the handler
// may be reading any of them at any time.
constexpr int kSlots = 4096;      // slots in a block
constexpr int kMaxBlocks = 256;   // 1,048,576 mappings guarded at once

// Read by the signal handler: plain atomics, no locks, no allocation.
struct Slot {
  std::atomic<uintptr_t> begin{0};  // 0: free
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> shrank{false};
};
Slot g_first_block[kSlots];
std::atomic<Slot*> g_blocks[kMaxBlocks] = {g_first_block};  // published in order, never unpublished

Slot* SlotOf(int handle) {
  if (handle < 0 || handle >= kSlots * kMaxBlocks) return nullptr;
  Slot* block = g_blocks[handle / kSlots].load(std::memory_order_acquire);
  return block == nullptr ? nullptr : &block[handle % kSlots];
}

std::mutex g_mu;                 // guards installation and slot claims
struct sigaction g_previous;     // the SIGBUS disposition the guard replaced

void RestoreDefault() {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGBUS, &dfl, nullptr);
}

// The fault last handed to the handler the guard replaced: its address and
// when (CLOCK_MONOTONIC, ns).
std::atomic<uintptr_t> g_last_handed_on{0};
std::atomic<int64_t> g_last_handed_at{0};

int64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

void CallPrevious(int sig, siginfo_t* info, void* context) {
  const struct sigaction prev = g_previous;
  const bool is_function = (prev.sa_flags & SA_SIGINFO) ? prev.sa_sigaction != nullptr
                                                         : prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN;
  if (!is_function) {
    // The default action: restore it and return; the access faults again and
    // the kernel applies it (a SIGBUS from a fault cannot be ignored).
    RestoreDefault();
    return;
  }
  // A fault (si_code > 0) repeats when the handlers return. If the same
  // address comes back at once (within a second) after the previous handler
  // had it, that handler returned without resolving it, and may have handed
  // it back here: Python's faulthandler, installed after the guard and
  // replaced by it again at a fork, restores the guard as "its previous" and
  // returns, which would bounce the fault between the two forever. The
  // default action ends that. (A handler that resolved a fault may see the
  // same address fault again later: that is handed on again.)
  if (info != nullptr && info->si_code > 0) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
    const int64_t now = MonotonicNs();
    const bool again = g_last_handed_on.exchange(addr) == addr && now - g_last_handed_at.load() < 1000000000;
    g_last_handed_at.store(now);
    if (again) {
      RestoreDefault();
      return;
    }
  }
  // As the kernel would run it: its mask added while it runs.
  sigset_t before;
  pthread_sigmask(SIG_BLOCK, &prev.sa_mask, &before);
  if (prev.sa_flags & SA_SIGINFO) {
    prev.sa_sigaction(sig, info, context);
  } else {
    prev.sa_handler(sig);
  }
  // A handler that raises SIGBUS again (faulthandler after its dump, torch's
  // worker handler) hands it to the handler before it, which may be this
  // one: that SIGBUS is pending now, and gets the default action.
  sigset_t pending;
  if (sigpending(&pending) == 0 && sigismember(&pending, SIGBUS) == 1) RestoreDefault();
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  if (info != nullptr && info->si_code == BUS_ADRERR) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
    for (int h = 0; Slot* found = SlotOf(h); ++h) {
      Slot& slot = *found;
      const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
      if (begin == 0 || addr < begin) continue;
      const uintptr_t end = slot.end.load(std::memory_order_acquire);
      if (addr >= end) continue;
      // The file ends before this page: so do all later pages. Zero pages
      // over the rest of the mapping (MAP_FIXED replaces the file's pages;
      // unmapping the mapping later unmaps these too).
      const uintptr_t page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
      const uintptr_t page = addr & ~(page_size - 1);
      void* p = mmap(reinterpret_cast<void*>(page), end - page, PROT_READ,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (p == MAP_FAILED) break;
      slot.shrank.store(true, std::memory_order_release);
      return;  // the read resumes and finds zeros
    }
  }
  CallPrevious(sig, info, context);
}

bool HandlerIsOurs(const struct sigaction& sa) {
  return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == OnSigbus;
}

void InstallLocked() {
  struct sigaction current;
  if (sigaction(SIGBUS, nullptr, &current) != 0) return;
  if (HandlerIsOurs(current)) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = OnSigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  g_previous = current;
  (void)sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace

int GuardMapping(const void* begin, uint64_t size) {
  if (begin == nullptr || size == 0) return -1;
  std::lock_guard<std::mutex> lock(g_mu);
  InstallLocked();
  for (int h = 0; h < kSlots * kMaxBlocks; ++h) {
    if (SlotOf(h) == nullptr) {
      // Every published slot is taken: publish the next block.
      Slot* block = new (std::nothrow) Slot[kSlots];
      if (block == nullptr) return -1;
      g_blocks[h / kSlots].store(block, std::memory_order_release);
    }
    Slot& slot = *SlotOf(h);
    if (slot.begin.load(std::memory_order_relaxed) != 0) continue;
    const uintptr_t b = reinterpret_cast<uintptr_t>(begin);
    const uintptr_t page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    slot.shrank.store(false, std::memory_order_relaxed);
    slot.end.store((b + size + page_size - 1) & ~(page_size - 1), std::memory_order_relaxed);
    slot.begin.store(b, std::memory_order_release);
    return h;
  }
  return -1;
}

void UnguardMapping(int handle) {
  Slot* slot = SlotOf(handle);
  if (slot == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mu);
  slot->begin.store(0, std::memory_order_release);
  slot->end.store(0, std::memory_order_release);
}

bool MappingShrank(int handle) {
  const Slot* slot = SlotOf(handle);
  return slot != nullptr && slot->shrank.load(std::memory_order_acquire);
}

}  // namespace lmdbloader
