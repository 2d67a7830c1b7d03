// What a read costs over the link under a network file system: a round trip
// a request, plus the bytes at the bandwidth the link shares among the reads
// in flight. Measured by timing reads that bypass the page cache (once per
// reader, inherited across fork), and turned into one decision: whether reading a window around each small record (into the
// kernel's page cache, where the window's other records wait for their own
// reads) costs less than reading exactly the records. A part of an epoch of
// 2 KiB records at one request each is capped by the requests in flight (32
// of 1 ms: 32 k records/s, wherever the bytes are), while moving the whole
// file in 128 KiB windows is capped by the bandwidth: over an emulated 1 ms
// link without a bandwidth cap a third of 200,000 such records read at 50 k
// records/s around against 17 k exactly (8 workers); at 117 MB/s, 9 k around
// against 13 k exactly.
#ifndef LMDBLOADER_SRC_IO_LINK_PROBE_H_
#define LMDBLOADER_SRC_IO_LINK_PROBE_H_

#include <cstdint>
#include <string>

#include "io/batch_io.h"

namespace lmdbloader {

struct LinkEstimate {
  bool measured = false;   // false: the probe could not run (file too small, reads refused)
  double requests_s = 0;   // sixteen 4 KiB reads at once: a round trip and the requests' own costs
  double bytes_per_s = 0;  // what the link moves with reads in flight; 0: faster than the probe tells
};

// The window read around a small record: the kernel's default readahead,
// and one request on FUSE (max_read) and on NFS (rsize).
constexpr uint64_t kReadAroundWindow = 128 << 10;

// Times reads of `path` with O_DIRECT (or, where the file system refuses it,
// buffered reads of ranges dropped from the page cache first): sixteen of
// 4 KiB at once through `io`, then sixteen of 128 KiB (the extra time is
// their bytes), twice each: 4.2 MiB moved, a few round trips. Files under
// 16.5 MiB are not measured. (Not kept per st_dev: a device number freed by
// an unmount names the next mount, another link.)
LinkEstimate MeasureLink(const std::string& path, BatchIo* io);

// Whether reading every window of a file of `file_bytes` (an epoch's part
// touches nearly all of them) takes less time at the link's bandwidth than
// reading `records_read` records exactly, a request each, 32 in flight.
bool ReadAroundPays(const LinkEstimate& link, uint64_t file_bytes, double records_read);

// Whether a record of `size` bytes is read with its window: a quarter of the
// window at most (a larger record gains little from it).
inline bool ReadsAround(uint64_t size) { return size <= kReadAroundWindow / 4; }

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IO_LINK_PROBE_H_
