#include "lmdbloader/memory_budget.h"

#include <algorithm>

namespace lmdbloader {

Status MemoryBudget::CheckIndexFits(const std::string& path, uint64_t records) const {
  if (unbounded() || index_bytes_ < total_) return Status::OK();
  return Status::InvalidArgument("rss_budget of " + std::to_string(total_) +
                                 " bytes is smaller than the record index of " + path + " (" +
                                 std::to_string(index_bytes_) + " bytes for " + std::to_string(records) +
                                 " records): index_mode='paged' (or 'auto') reads it from its saved file instead");
}

uint64_t MemoryBudget::MappedAllowance() const { return unbounded() ? 0 : total_ - index_bytes_; }

bool MemoryBudget::RoomForChunkFills() const { return unbounded() || total_ - index_bytes_ >= (16ull << 20); }

unsigned MemoryBudget::ChunkFillsInFlight(uint64_t chunk_bytes, unsigned most) const {
  const uint64_t n = unbounded() ? most : total_ / (8 * chunk_bytes);
  return static_cast<unsigned>(std::clamp<uint64_t>(n, 1, most));
}

uint64_t MemoryBudget::ScanBatchBytes() const {
  const uint64_t cap = 32ull << 20;
  return unbounded() ? cap : std::min(cap, total_ / 4);
}

}  // namespace lmdbloader
