#include "io/open_file.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

namespace lmdbloader {

namespace {

// Raises the soft descriptor limit to the hard one; true if it grew. (Linux
// keeps RLIMIT_NOFILE's hard limit finite: at most fs.nr_open.)
bool RaiseDescriptorLimit() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  struct rlimit limit;
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return false;
  limit.rlim_cur = limit.rlim_max;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

}  // namespace

// Refuses anything but a regular file, then drops O_NONBLOCK: io_uring
// honours it on regular files too, answering EAGAIN where a read would wait.
Status KeepRegularFile(const std::string& path, int f, struct stat* out) {
  struct stat st;
  if (::fstat(f, &st) != 0) return Status::FromErrno(errno, "fstat", path);
  if (out) *out = st;
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISSOCK(st.st_mode) ? "a socket"
                     : "of another kind";
    return Status::InvalidArgument(path + ": not a regular file (" + kind + ")");
  }
  // Opened here with no other flag F_SETFL changes: no F_GETFL needed (a
  // set of 10^5 files opens each at once).
  if (::fcntl(f, F_SETFL, 0) != 0) return Status::FromErrno(errno, "fcntl", path);
  return Status::OK();
}

Status OpenReadOnly(const std::string& path, int* fd, struct stat* st) {
  // O_NONBLOCK so that opening a FIFO returns at once (and is then refused).
  const int mode = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
  int f = ::open(path.c_str(), mode);
  int err = f < 0 ? errno : 0;
  if (err == EMFILE && RaiseDescriptorLimit()) {
    f = ::open(path.c_str(), mode);
    err = f < 0 ? errno : 0;
  }
  if (f >= 0) {
    Status regular = KeepRegularFile(path, f, st);
    if (!regular.ok()) {
      ::close(f);
      return regular;
    }
    *fd = f;
    return Status::OK();
  }
  Status s = Status::FromErrno(err, "open", path);
  if (err != EMFILE) return s;
  struct rlimit limit;
  ::getrlimit(RLIMIT_NOFILE, &limit);
  return Status::IOError(s.message() + " (the process may hold " + std::to_string(limit.rlim_cur) +
                         " descriptors, hard limit " + std::to_string(limit.rlim_max) +
                         ", and each part of a shard set holds one: raise `ulimit -Hn`)",
                         err);
}

Status ReadWholeFile(const std::string& path, std::string* out) {
  int fd = -1;
  LMDBLOADER_RETURN_IF_ERROR(OpenReadOnly(path, &fd));
  out->clear();
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Status::FromErrno(err, "read", path);
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return Status::OK();
}

}  // namespace lmdbloader
