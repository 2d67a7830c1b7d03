// BatchIo: reads a batch of (file, offset, size) ranges into the caller's
// buffers with many reads in flight at once, and waits for all of them.
//
// One synchronous pread() per record leaves a device at queue depth 1: a
// virtio disk that serves ~80k 4 KiB reads/s at queue depth 32 serves ~25k at
// depth 1 (fio, docs/MEASURED.md). Submitting a batch's reads together
// closes that gap. Engines: io_uring (liburing), a pool of pread() threads
// for kernels or sandboxes without io_uring, and plain sequential pread().
//
// Thread-safe: ReadAll may be called from many threads at once. Not fork-safe:
// a child process must create its own BatchIo (rings and threads belong to
// the parent) and abandon the inherited one without destroying it.
#ifndef LMDBLOADER_SRC_BATCH_IO_H_
#define LMDBLOADER_SRC_BATCH_IO_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "lmdbloader/options.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

struct ReadRequest {
  int fd = -1;
  uint64_t offset = 0;
  uint64_t size = 0;
  char* dst = nullptr;
  const std::string* path = nullptr;  // named in errors
};

// pread() until `size` bytes are read: IOError on a failed read, Corruption
// naming the offset when the file ends early (truncated under the reader).
Status PreadFully(const ReadRequest& request);

class BatchIo {
 public:
  // kAuto tries io_uring and falls back to threads, saying why in
  // `*fallback_reason`; an explicit kIoUring that the kernel refuses is an
  // error (IOError naming the reason).
  static Status Create(IoEngine requested, uint32_t queue_depth, std::unique_ptr<BatchIo>* out,
                       std::string* fallback_reason);

  virtual ~BatchIo() = default;
  virtual IoEngine kind() const = 0;

  // Reads every request, at most queue_depth at once, and returns when none
  // is in flight any more. On failure returns the error of the first failing
  // request in batch order (the other buffers hold unspecified bytes).
  virtual Status ReadAll(const ReadRequest* requests, size_t count) = 0;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_BATCH_IO_H_
