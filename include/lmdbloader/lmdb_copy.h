// Serves the py-lmdb compatible API: lmdbloader.compat's Environment.copy
// and copyfd are its only users.
//
// Copies of an LMDB environment, as liblmdb's mdb_env_copy2/mdb_env_copyfd2
// make them (py-lmdb's Environment.copy and copyfd, for lmdbloader.compat).
//
// A plain copy is the file's pages in use, meta pages included, up to the
// last page the newer meta page names: read with pread, nothing interpreted
// beyond the checked meta pages (liblmdb copies the same bytes).
//
// A compacting copy (MDB_CP_COMPACT) rewrites the trees without free pages,
// which takes a walk of every tree; liblmdb does it, because its output is
// what py-lmdb users expect, but liblmdb trusts every page it reads. So the
// checked page reader (lmdb_pages.h) reads first every page liblmdb's copy
// follows: the main tree, each named database's tree, the free list (whose
// counts the copy sums) and every overflow page header; and liblmdb then runs
// in a forked child, so that a fault it meets anyway ends the child, reported
// as Corruption, never the caller.
#ifndef LMDBLOADER_LMDB_COPY_H_
#define LMDBLOADER_LMDB_COPY_H_

#include <string>

#include "lmdbloader/status.h"

namespace lmdbloader {

// Writes a copy of the environment at `path` (directory or single file) to
// `fd`, from its current position.
Status CopyEnvironmentToFd(const std::string& path, int fd, bool compact);

// Writes `dir`/data.mdb, which must not exist, in an existing directory. The
// copy is written under a temporary name and renamed into place when whole:
// a failed copy leaves nothing behind.
Status CopyEnvironmentToDir(const std::string& path, const std::string& dir, bool compact);

}  // namespace lmdbloader

#endif  // LMDBLOADER_LMDB_COPY_H_
