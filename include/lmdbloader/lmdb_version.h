// Serves the py-lmdb compatible API: lmdbloader.compat's version() is its
// only user.
//
// The version of the liblmdb this library is linked with, which
// lmdbloader.compat's version() reports as py-lmdb's lmdb.version() does.
#ifndef LMDBLOADER_LMDB_VERSION_H_
#define LMDBLOADER_LMDB_VERSION_H_

namespace lmdbloader {

// liblmdb's version, as mdb_version() reports it. Never fails.
void LmdbVersion(int* major, int* minor, int* patch);

}  // namespace lmdbloader

#endif  // LMDBLOADER_LMDB_VERSION_H_
