// Residency control: keeps the pages a process has mapped from the data file
// under a budget by acting on the kernel's own count (/proc/self/statm).
//
// Why the kernel's count and not bytes read: the page cache holds large
// folios, and touching one byte of a mapped page maps the whole folio (up to
// 2 MiB of RSS for one read). Counting bytes read therefore does not bound
// RSS; reading statm (half a microsecond) does.
//
// Releasing uses MADV_DONTNEED on the read-only shared file mapping: the data
// stays in the page cache, the next touch refaults it, and views into the
// released range stay valid.
#ifndef LMDBLOADER_SRC_RESIDENCY_H_
#define LMDBLOADER_SRC_RESIDENCY_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "lmdbloader/memory.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

// Releases least recently used windows of one mapping when the process's
// file-backed RSS has grown past `allowance` since Start(). Thread-safe.
class ResidencyGovernor {
 public:
  // budget 0: never releases (unbounded).
  ResidencyGovernor(uint64_t allowance, uint64_t window_bytes);

  // Reads the baseline in the calling process; call again after fork().
  Status Start();
  // Points slot `slot` (one per data file) at a (new) mapping and forgets the
  // recency of its windows.
  void Attach(size_t slot, const char* base, uint64_t length);
  // Records that [offset, offset + length) of slot's mapping was touched, then
  // reads statm and releases windows of any slot if over the allowance.
  Status Touched(size_t slot, uint64_t offset, uint64_t length);
  // Releases every attached mapping now.
  void ReleaseAll();

  uint64_t drops() const;
  uint64_t allowance() const { return allowance_; }

 private:
  Status ReleaseLocked(uint64_t grown);

  static constexpr uint64_t kMaxFolio = 2u << 20;  // PMD size on x86-64 and arm64 (4 KiB pages)

  const uint64_t allowance_;
  const uint64_t window_;
  mutable std::mutex mu_;
  StatmProbe statm_;
  uint64_t baseline_file_rss_ = 0;
  struct Slot {
    const char* base = nullptr;
    uint64_t length = 0;
    std::vector<uint64_t> last_touch;  // per window; 0 = not touched since release
  };
  std::vector<Slot> slots_;
  uint64_t tick_ = 0;
  uint64_t drops_ = 0;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_RESIDENCY_H_
