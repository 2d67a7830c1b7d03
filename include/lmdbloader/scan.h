// Reading many records in a given order at the device's pace, under the
// reader's budget: what `lmdbloader scan` runs, for any program that reads a
// corpus whole (a checksum pass, an export, a cache warm-up).
#ifndef LMDBLOADER_SCAN_H_
#define LMDBLOADER_SCAN_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "lmdbloader/reader.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

// Consecutive records of a scan, read and checked: positions[k]'s bytes are
// records[k], sizes[k] long. Valid only during the call that receives it.
struct ScanSlice {
  const uint64_t* positions = nullptr;
  size_t count = 0;
  const char* const* records = nullptr;
  const uint64_t* sizes = nullptr;
  uint64_t bytes = 0;  // the slice's records together
};

// Reads the records at positions[0, count) in that order, each once, and
// gives them to `on_slice` in order; `after_batch` (may be empty) runs after
// each batch, to sample memory say. A batch holds at most `batch_records`
// records (at least 1) and the budget's ScanBatchBytes (at least one
// record). While a batch is read, the next one is prefetched on a second
// thread (the reader's Prefetch: the chunk fill, or POSIX_FADV_WILLNEED), so
// the device works while the CPU copies and checks. Under the fill policy a
// batch is read in 1 MiB slices into a buffer that stays in the CPU's cache;
// otherwise whole, with as many reads in flight as it holds. The scan's own
// memory is one batch's buffer (a slice's under the fill policy). Stops at
// the first error, a callback's included, and returns it.
Status ScanRecords(Reader& reader, const uint64_t* positions, size_t count, size_t batch_records,
                   const std::function<Status(const ScanSlice&)>& on_slice,
                   const std::function<Status()>& after_batch = {});

}  // namespace lmdbloader

#endif  // LMDBLOADER_SCAN_H_
