// MemoryBudget: every "how much may this use" answer derived from
// ReaderOptions::rss_budget, in one place.
//
// The budget caps what a reader makes its process hold because of the data
// file, as the kernel counts it: its record index first, then mapped pages
// (mmap mode), chunk fills in flight and batch buffers. A budget of 0 is
// unbounded. A plain value; copy it freely.
#ifndef LMDBLOADER_MEMORY_BUDGET_H_
#define LMDBLOADER_MEMORY_BUDGET_H_

#include <cstdint>
#include <string>

#include "lmdbloader/status.h"

namespace lmdbloader {

class MemoryBudget {
 public:
  // `index_bytes`: what the record index (and its checksums) hold, paid first.
  explicit MemoryBudget(uint64_t rss_budget, uint64_t index_bytes = 0)
      : total_(rss_budget), index_bytes_(index_bytes) {}

  bool unbounded() const { return total_ == 0; }
  uint64_t total() const { return total_; }
  uint64_t index_bytes() const { return index_bytes_; }

  // InvalidArgument naming `path` when the index alone does not fit.
  Status CheckIndexFits(const std::string& path, uint64_t records) const;

  // mmap mode: the mapped file pages the governor lets the process keep
  // beyond where it started (0: unbounded).
  uint64_t MappedAllowance() const;

  // Whether the chunk-fill cache policy fits: each fill maps a 2 MiB chunk
  // while it is read, so it needs 16 MiB beside the index.
  bool RoomForChunkFills() const;

  // Chunk fills in flight at once: at most `most`, their mappings at most an
  // eighth of the budget (at least 1).
  unsigned ChunkFillsInFlight(uint64_t chunk_bytes, unsigned most) const;

  // Bytes a scan's batch buffer may hold: 32 MiB, or a quarter of the budget.
  uint64_t ScanBatchBytes() const;

 private:
  uint64_t total_;
  uint64_t index_bytes_;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_MEMORY_BUDGET_H_
