// Which kind of file system holds a data file, by statfs(2)'s f_type: on
// network and FUSE file systems every read request is a round trip (about
// 1 ms), and bytes cross a link, so reads there move only what was asked
// for (CachePolicy kAuto) and are issued by threads (IoEngine kAuto: io_uring
// hands buffered reads of such files to its worker pool, which served 256
// cold records in 89-132 ms over FUSE against 30 ms for threads).
#ifndef LMDBLOADER_SRC_IO_FILE_SYSTEM_H_
#define LMDBLOADER_SRC_IO_FILE_SYSTEM_H_

#include <string>

namespace lmdbloader {

struct FileSystemKind {
  bool remote = false;  // a network file system, or FUSE (which may be one: sshfs, s3fs, GlusterFS)
  std::string name;     // "local", or the file system's name: "nfs", "lustre", "fuse", ...
};

// The kind of file system holding `path`; "local" when statfs fails or the
// type is not one of the remote ones known.
FileSystemKind FileSystemOf(const std::string& path);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IO_FILE_SYSTEM_H_
