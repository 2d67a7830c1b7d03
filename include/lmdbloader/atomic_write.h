// Files written whole or not at all (the shard list, saved record indexes,
// `lmdbloader get -o`): one routine, so that each gets the same care.
// Safe to call from several threads at once (each call writes a temporary
// file of its own).
#ifndef LMDBLOADER_ATOMIC_WRITE_H_
#define LMDBLOADER_ATOMIC_WRITE_H_

#include <string>
#include <string_view>

#include "lmdbloader/status.h"

namespace lmdbloader {

// Writes `bytes` to a temporary file beside `path` (`<path>.tmp-<pid>-<n>`,
// a name of its own for each call), syncs and closes it, checking both (some
// file systems claim space or report a failed write-back only there), and
// renames it over `path`: readers see the old file or the whole new one.
// IOError naming the file and the system's reason (ENOSPC, EIO, ...)
// otherwise, with the temporary file removed. A `path` that is a device,
// FIFO or socket (/dev/null, /dev/stdout, a pipe) is written in place, never
// replaced.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace lmdbloader

#endif  // LMDBLOADER_ATOMIC_WRITE_H_
