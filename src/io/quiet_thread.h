// Threads lmdbloader starts take no signal meant for the caller.
//
// A signal sent to the process goes to any thread that does not block it. A
// caller that blocks a signal in its threads to take it with sigwait or a
// signalfd would lose it to one of ours, where its default action runs (for
// SIGUSR1, SIGTERM, SIGINT: the end of the process). So our threads start
// with every signal blocked except those a fault raises in the faulting
// thread (SIGBUS, SIGSEGV, SIGFPE, SIGILL, SIGTRAP, SIGSYS): the kernel
// forces those through a block by resetting them to their default action,
// which would bypass the SIGBUS guard of mapped reads.
#ifndef LMDBLOADER_SRC_IO_QUIET_THREAD_H_
#define LMDBLOADER_SRC_IO_QUIET_THREAD_H_

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace lmdbloader {

// std::thread(f), started with the signal mask above (threads inherit the
// mask of the thread that starts them; the caller's own is left as it was).
template <typename F>
std::thread StartQuietThread(F&& f) {
  sigset_t quiet, caller;
  sigfillset(&quiet);
  for (int fault : {SIGBUS, SIGSEGV, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&quiet, fault);
  pthread_sigmask(SIG_SETMASK, &quiet, &caller);
  struct Restore {
    sigset_t* mask;
    ~Restore() { pthread_sigmask(SIG_SETMASK, mask, nullptr); }
  } restore{&caller};
  return std::thread(std::forward<F>(f));
}

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IO_QUIET_THREAD_H_
