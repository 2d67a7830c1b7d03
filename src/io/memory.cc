#include "lmdbloader/memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace lmdbloader {

static std::string ProcPath(pid_t pid, const char* leaf) {
  return pid == 0 ? std::string("/proc/self/") + leaf
                  : "/proc/" + std::to_string(pid) + "/" + leaf;
}

// Parses "Name:   1234 kB" lines; returns bytes for `name`.
static bool KbField(const std::string& line, const char* name, uint64_t* out) {
  size_t n = std::strlen(name);
  if (line.compare(0, n, name) != 0 || line.size() <= n || line[n] != ':') return false;
  *out = std::strtoull(line.c_str() + n + 1, nullptr, 10) * 1024;
  return true;
}

Status ReadProcessMemory(pid_t pid, ProcessMemory* memory) {
  std::string path = ProcPath(pid, "smaps_rollup");
  std::ifstream in(path);
  if (!in) return Status::FromErrno(errno ? errno : ENOENT, "open", path);
  ProcessMemory m;
  std::string line;
  uint64_t v = 0;
  while (std::getline(in, line)) {
    if (KbField(line, "Rss", &v)) m.rss = v;
    else if (KbField(line, "Pss", &v)) m.pss = v;
    else if (KbField(line, "Private_Clean", &v) || KbField(line, "Private_Dirty", &v)) m.uss += v;
    else if (KbField(line, "Shared_Clean", &v) || KbField(line, "Shared_Dirty", &v)) m.shared += v;
  }
  std::ifstream status(ProcPath(pid, "status"));
  while (std::getline(status, line)) {
    if (KbField(line, "RssFile", &v)) m.file_rss = v;
    else if (KbField(line, "RssShmem", &v)) m.shmem_rss = v;
  }
  *memory = m;
  return Status::OK();
}

Status MappedFileRss(pid_t pid, const std::string& file, uint64_t* rss) {
  std::string path = ProcPath(pid, "smaps");
  std::ifstream in(path);
  if (!in) return Status::FromErrno(errno ? errno : ENOENT, "open", path);
  uint64_t total = 0, v = 0;
  bool in_file = false;
  std::string line;
  while (std::getline(in, line)) {
    // Mapping header lines start with a hex range "start-end perms ...".
    size_t dash = line.find('-');
    if (dash != std::string::npos && dash > 0 && line.find(':') > dash &&
        std::isxdigit(static_cast<unsigned char>(line[0]))) {
      size_t slash = line.find('/');
      in_file = slash != std::string::npos && line.compare(slash, std::string::npos, file) == 0;
      continue;
    }
    if (in_file && KbField(line, "Rss", &v)) total += v;
  }
  *rss = total;
  return Status::OK();
}

StatmProbe::~StatmProbe() {
  if (fd_ >= 0) ::close(fd_);
}

Status StatmProbe::Open() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return Status::FromErrno(errno, "open", "/proc/self/statm");
  page_size_ = ::sysconf(_SC_PAGESIZE);
  return Status::OK();
}

Status StatmProbe::Read(uint64_t* rss, uint64_t* file_rss) {
  char buf[128];
  ssize_t n = ::pread(fd_, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return Status::FromErrno(n < 0 ? errno : EIO, "read", "/proc/self/statm");
  buf[n] = '\0';
  // statm: size resident shared text lib data dt (pages)
  char* p = buf;
  std::strtoull(p, &p, 10);
  uint64_t resident = std::strtoull(p, &p, 10);
  uint64_t shared = std::strtoull(p, &p, 10);
  *rss = resident * static_cast<uint64_t>(page_size_);
  if (file_rss) *file_rss = shared * static_cast<uint64_t>(page_size_);
  return Status::OK();
}

uint64_t PageCacheRoom() {
  uint64_t room = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) {
      room = kib * 1024;
      break;
    }
  }
  // The process's memory cgroup: "0::/path" (v2, memory.max) or
  // "N:...memory...:/path" (v1, memory.limit_in_bytes); "max" or v1's
  // near-2^63 value mean no limit.
  auto lower_to = [&room](const std::string& file) {
    std::ifstream limit(file);
    std::string value;
    if (!(limit >> value) || value == "max") return;
    uint64_t bytes = std::strtoull(value.c_str(), nullptr, 10);
    if (bytes > 0 && bytes < (1ull << 62) && (room == 0 || bytes < room)) room = bytes;
  };
  std::ifstream cgroup("/proc/self/cgroup");
  while (std::getline(cgroup, line)) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) {
      lower_to("/sys/fs/cgroup" + path + "/memory.max");
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      lower_to("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes");
    }
  }
  return room;
}

}  // namespace lmdbloader
