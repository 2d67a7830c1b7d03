// Read retries: failures that storage gives once and then not again.
//
// A network file system answers a read with EIO when a server is slow to
// answer a soft mount, ESTALE while a handle is revalidated, ETIMEDOUT, or a
// short read; a FUSE daemon under load does the same. py-lmdb meets such an
// error in one transaction and reads correctly in the next; a Reader must too:
// a read that fails this way is made again a bounded number of times, with a
// growing wait, and when the failure lasts it is reported as what it is (the
// errno and the file), leaving nothing broken for the next read.
#ifndef LMDBLOADER_SRC_IO_READ_RETRY_H_
#define LMDBLOADER_SRC_IO_READ_RETRY_H_

#include <cerrno>
#include <chrono>
#include <thread>

#include "lmdbloader/status.h"

namespace lmdbloader {

// Retries after a first failure: waits of 10, 40, 160 and 640 ms, 0.85 s in all.
inline constexpr int kReadRetries = 4;

// Whether a read that failed with `s` may succeed when made again.
inline bool MayPassOnRetry(const Status& s) {
  if (s.code() == Status::Code::kIOError) {
    const int e = s.sys_errno();
    return e == EIO || e == ESTALE || e == ETIMEDOUT || e == EAGAIN || e == EINTR;
  }
  // A file that really is shorter stays so: after the retries it is reported.
  return s.code() == Status::Code::kCorruption && s.reason() == Status::Reason::kShortRead;
}

inline void WaitBeforeRetry(int attempt) {
  std::this_thread::sleep_for(std::chrono::milliseconds(10 << (2 * attempt)));
}

// read() (returning Status), made again while it fails in a way that may pass.
template <class Read>
Status WithReadRetries(Read&& read) {
  Status s = read();
  for (int attempt = 0; !s.ok() && attempt < kReadRetries && MayPassOnRetry(s); ++attempt) {
    WaitBeforeRetry(attempt);
    s = read();
  }
  return s;
}

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IO_READ_RETRY_H_
