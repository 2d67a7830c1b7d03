#include "open_file.h"

#include <fcntl.h>
#include <sys/resource.h>
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

Status OpenReadOnly(const std::string& path, int* fd) {
  int f = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  int err = f < 0 ? errno : 0;
  if (err == EMFILE && RaiseDescriptorLimit()) {
    f = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    err = f < 0 ? errno : 0;
  }
  if (f >= 0) {
    *fd = f;
    return Status::OK();
  }
  Status s = Status::FromErrno(err, "open", path);
  if (err != EMFILE) return s;
  struct rlimit limit;
  ::getrlimit(RLIMIT_NOFILE, &limit);
  return Status::IOError(s.message() + " (the process may hold " + std::to_string(limit.rlim_cur) +
                         " descriptors, hard limit " + std::to_string(limit.rlim_max) +
                         ", and each part of a shard set holds one: raise `ulimit -Hn`)");
}

}  // namespace lmdbloader
