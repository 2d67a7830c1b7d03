#include "io/link_probe.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "io/batch_io.h"

namespace lmdbloader {

namespace {

constexpr uint64_t kSmall = 4096;
constexpr uint64_t kLarge = 128 << 10;  // one request: FUSE's and most NFS mounts' largest read or more
constexpr size_t kTogether = 16;        // large reads in flight at once: the link's share, not one stream's
constexpr double kRequestsInFlight = 32;
constexpr int kRounds = 2;               // the fastest of each: a busy link only slows reads

// Mapped, not malloc'ed: freeing 2 MiB would raise glibc's mmap threshold
// in the caller's process, and its later large allocations would stay in
// the heap.
struct Unmap {
  void operator()(char* p) const { ::munmap(p, kTogether * kLarge); }
};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Seconds the reads took together, or a negative number where one failed.
// Buffered reads drop their ranges from the page cache first.
double TimedReads(BatchIo* io, ReadRequest* requests, size_t count, bool direct) {
  for (size_t k = 0; k < count && !direct; ++k)
    (void)::posix_fadvise(requests[k].fd, static_cast<off_t>(requests[k].offset),
                          static_cast<off_t>(requests[k].size), POSIX_FADV_DONTNEED);
  const auto start = std::chrono::steady_clock::now();
  const bool ok = io->ReadAll(requests, count).ok();
  return ok ? Seconds(start) : -1;
}

LinkEstimate Probe(const std::string& path, uint64_t size, BatchIo* io) {
  LinkEstimate link;
  // Every read at its own place, 256 KiB apart at least: no readahead or cache joins them.
  const uint64_t stride = (size / (kRounds * 2 * kTogether + 1)) & ~(kLarge - 1);
  if (stride < 2 * kLarge) return link;
  bool direct = true;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (fd < 0) {
    direct = false;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) return link;
  void* raw = ::mmap(nullptr, kTogether * kLarge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    ::close(fd);
    return link;
  }
  std::unique_ptr<char, Unmap> buf(static_cast<char*>(raw));
  ReadRequest reads[kTogether];
  double small = 1e9, large = 1e9;
  bool ok = true;
  uint64_t at = 0;
  for (int round = 0; round < kRounds && ok; ++round) {
    for (const uint64_t bytes : {kSmall, kLarge}) {
      for (size_t k = 0; k < kTogether; ++k, at += stride)
        reads[k] = ReadRequest{fd, at, bytes, buf.get() + k * kLarge, &path};
      const double t = TimedReads(io, reads, kTogether, direct);
      ok = ok && t >= 0;
      (bytes == kSmall ? small : large) = std::min(bytes == kSmall ? small : large, t);
    }
  }
  ::close(fd);
  if (!ok) return link;
  link.measured = true;
  link.requests_s = small;
  const double transfer = large - small;
  link.bytes_per_s = transfer > 0 ? static_cast<double>(kTogether * (kLarge - kSmall)) / transfer : 0;
  return link;
}

}  // namespace

LinkEstimate MeasureLink(const std::string& path, BatchIo* io) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {};
  return Probe(path, static_cast<uint64_t>(st.st_size), io);
}

bool ReadAroundPays(const LinkEstimate& link, uint64_t file_bytes, double records_read) {
  if (!link.measured) return false;
  const double exact_s = records_read * link.requests_s / kRequestsInFlight;
  const double around_s = link.bytes_per_s > 0 ? static_cast<double>(file_bytes) / link.bytes_per_s : 0;
  return around_s < exact_s;
}

}  // namespace lmdbloader
