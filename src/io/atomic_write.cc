#include "io/atomic_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace lmdbloader {

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  // One name per call: threads of one process may write the same path at
  // once (two Readers of one corpus saving its index), and a shared name
  // would mix their bytes or rename one's file from under the other.
  static std::atomic<uint64_t> calls{0};
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(calls.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "open", tmp);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::FromErrno(err, "write", tmp);
    }
    done += static_cast<size_t>(n);
  }
  // Space is really claimed, and a failed write-back reported, by fsync or
  // close on some file systems: fail here, not at a later read. The
  // descriptor is closed whatever fsync said.
  const int sync_error = ::fsync(fd) == 0 ? 0 : errno;
  const int close_error = ::close(fd) == 0 ? 0 : errno;
  if (sync_error != 0 || close_error != 0) {
    ::unlink(tmp.c_str());
    return Status::FromErrno(sync_error != 0 ? sync_error : close_error, sync_error != 0 ? "fsync" : "close", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status::FromErrno(err, "rename " + tmp + " to", path);
  }
  return Status::OK();
}

}  // namespace lmdbloader
