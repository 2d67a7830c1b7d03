// libFuzzer harness: a whole LMDB data file through the checked page reader
// (meta pages, the main tree, a named database, overflow headers). The file
// lives in a memfd, so the reader's pread() sees exactly the input.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "lmdb/lmdb_pages.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = ::memfd_create("lmdb", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (::write(fd, data, size) != static_cast<ssize_t>(size)) {
    ::close(fd);
    return 0;
  }
  lmdbloader::LmdbFile file;
  if (file.Open("/proc/self/fd/" + std::to_string(fd)).ok()) {
    lmdbloader::LmdbMeta meta;
    if (file.ReadMeta(0, &meta).ok()) {
      uint64_t bytes = 0;
      file.Walk(meta, meta.main_tree, [&](const lmdbloader::LmdbItem& item) {
            bytes += item.value_size;
            if (item.on_overflow_pages) file.CheckOverflow(meta, item.value_offset, item.value_size).IgnoreError();
            return lmdbloader::Status::OK();
          })
          .IgnoreError();
      lmdbloader::LmdbTree named;
      if (file.FindNamedTree(meta, "named", &named).ok())
        file.Walk(meta, named, [](const lmdbloader::LmdbItem&) { return lmdbloader::Status::OK(); }).IgnoreError();
    }
  }
  ::close(fd);
  return 0;
}
