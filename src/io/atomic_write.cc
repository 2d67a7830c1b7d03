#include "lmdbloader/atomic_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace lmdbloader {

namespace {

// Writes all of `bytes` to `fd`; the errno of a failed write (EIO for none written).
int WriteAll(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// A device, FIFO or socket (`-o /dev/null`, `-o /dev/stdout`, a pipe) is
// written as it is: renaming a file over it would put a regular file in
// place of the device, and a stream has no old contents to keep whole.
Status WriteInPlace(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open", path);
  const int write_error = WriteAll(fd, bytes);
  const int close_error = ::close(fd) == 0 ? 0 : errno;
  if (write_error != 0 || close_error != 0)
    return Status::FromErrno(write_error != 0 ? write_error : close_error, write_error != 0 ? "write" : "close", path);
  return Status::OK();
}

}  // namespace

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return WriteInPlace(path, bytes);
  // One name per call: threads of one process may write the same path at
  // once (two Readers of one corpus saving its index), and a shared name
  // would mix their bytes or rename one's file from under the other.
  static std::atomic<uint64_t> calls{0};
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(calls.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "open", tmp);
  if (const int err = WriteAll(fd, bytes); err != 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::FromErrno(err, "write", tmp);
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
