// Serves the py-lmdb compatible API: lmdbloader.compat's Environment lists
// these names (nothing else in the library or the command uses them).
//
// The named databases of an LMDB (mdb_dbi_open's names): LMDB keeps each as
// a key of the main database, flagged as such, which only a walk of the main
// tree tells apart from an ordinary key.
#ifndef LMDBLOADER_NAMED_DATABASES_H_
#define LMDBLOADER_NAMED_DATABASES_H_

#include <string>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

// Names of the named databases of `path`, in the main tree's order. Walks the
// whole main tree with the checked page reader: call it when the names are
// needed. Errors as for Reader::Open.
Status ListNamedDatabases(const std::string& path, std::vector<std::string>* names);

}  // namespace lmdbloader

#endif  // LMDBLOADER_NAMED_DATABASES_H_
