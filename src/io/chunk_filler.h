// ChunkFiller: reads whole 2 MiB-aligned chunks of a data file into the page
// cache so that the kernel keeps each as one 2 MiB folio.
//
// Why: a cold epoch over small records makes one small read per record, at
// the device's IOPS; reading the 2 MiB around the first record touched turns
// it into large sequential requests that bring hundreds of records each. And
// a read() that misses the cache at a random offset makes the kernel read
// just the pages asked for, as 4 KiB folios (only a sequential stream ramps
// readahead up to large folios); a filled chunk leaves the cache a
// sequential read leaves (docs/NOTES.md, "Cold reads and the page cache": folio
// sizes from /proc/kpageflags). A fault in a mapping marked MADV_HUGEPAGE reads the
// whole aligned 2 MiB as one folio, whatever the access pattern:
// MADV_POPULATE_READ takes that fault for a chunk, MADV_DONTNEED unmaps it at
// once, and the folio stays in the page cache, outside the process's RSS.
#ifndef LMDBLOADER_SRC_CHUNK_FILLER_H_
#define LMDBLOADER_SRC_CHUNK_FILLER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

class ChunkFiller {
 public:
  static constexpr uint64_t kChunk = 2ull << 20;

  // Maps `size` bytes of `fd` (nothing is read yet). IOError when the
  // mapping fails.
  static Status Create(int fd, uint64_t size, const std::string& path, std::unique_ptr<ChunkFiller>* out);
  ~ChunkFiller();
  ChunkFiller(const ChunkFiller&) = delete;
  ChunkFiller& operator=(const ChunkFiller&) = delete;

  // Fills the chunks [offset, offset + size) touches that this process has
  // not filled yet. Best effort: a kernel without MADV_POPULATE_READ (before
  // Linux 5.14) turns filling off, and a chunk that cannot be read (a file
  // truncated since the open) is left to the exact read, which reports it.
  void Fill(uint64_t offset, uint64_t size);

  // A range of a batch to fill: what Fill(offset, size) of `filler` fills.
  struct Range {
    ChunkFiller* filler;
    uint64_t offset;
    uint64_t size;
  };
  // Whether Fill(offset, size) has anything left to do.
  bool NeedsFill(uint64_t offset, uint64_t size) const;

  // Fills every range of a batch, up to `parallel` chunks at a time: the
  // caller fills chunks until one waits on the device (a major fault), then
  // it and up to parallel - 1 threads started for the call fill the rest. Why:
  // MADV_POPULATE_READ waits for its chunk's read, so filling one chunk
  // after another keeps one 2 MiB request in flight (cold scans on a virtio
  // disk: 1.00-1.10x on average, single runs up to 1.4x; docs/MEASURED.md). A batch
  // whose chunks this process filled
  // starts no thread, nor does one whose chunks were cached by someone else.
  // Returns the number of threads it started.
  static size_t FillTogether(const std::vector<Range>& ranges, unsigned parallel);

  uint64_t chunks_filled() const { return filled_count_.load(std::memory_order_relaxed); }

 private:
  ChunkFiller(char* base, uint64_t size);
  bool Filled(uint64_t chunk) const;
  void FillChunk(uint64_t chunk);
  char* base_;
  uint64_t size_;
  std::unique_ptr<std::atomic<uint64_t>[]> filled_;  // one bit per chunk
  std::atomic<uint64_t> filled_count_{0};
  std::atomic<bool> disabled_{false};
};

// Drops the pages holding [offset, offset + size) from the page cache
// (posix_fadvise DONTNEED, widened to whole pages: LMDB pages are never
// partly in use by a reader). Best effort.
void DropFromPageCache(int fd, uint64_t offset, uint64_t size);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_CHUNK_FILLER_H_
