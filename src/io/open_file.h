// Opening data files read-only when a process holds many of them.
//
// A shard set holds one descriptor per part, for as long as it is open, and
// the usual soft limit on descriptors is 1,024 (its hard limit is often far
// higher): a set of 1,500 parts failed to open with EMFILE. On EMFILE the soft
// limit is raised to the hard limit, once per process, and the open retried,
// as the Go runtime and other servers of many files do. A limit already at
// its hard maximum gives an error that says which limit to raise.
#ifndef LMDBLOADER_SRC_OPEN_FILE_H_
#define LMDBLOADER_SRC_OPEN_FILE_H_

#include <sys/stat.h>

#include <string>

#include "lmdbloader/status.h"

namespace lmdbloader {

// open(path, O_RDONLY | O_CLOEXEC) into *fd; IOError naming the file.
// Only a regular file opens: a FIFO, device or socket under a data or index
// file's name is InvalidArgument naming it (opening a FIFO would wait for a
// writer forever; a device is no database). `st` (when given) gets the
// open file's fstat, which the check took anyway.
Status OpenReadOnly(const std::string& path, int* fd, struct stat* st = nullptr);

// The whole of the regular file at `path` (opened as OpenReadOnly does).
Status ReadWholeFile(const std::string& path, std::string* out);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_OPEN_FILE_H_
