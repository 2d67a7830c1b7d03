// A check of every page of an LMDB's data files, for damage that liblmdb
// would not survive (it trusts the pages it reads): the first thing
// `lmdbloader verify` does, before anything else reads the file. Internal to
// the library (corpus/ implements it, reader/'s verify calls it).
#ifndef LMDBLOADER_SRC_CORPUS_PAGE_CHECK_H_
#define LMDBLOADER_SRC_CORPUS_PAGE_CHECK_H_

#include <string>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

// Walks every data file of `path` (each part of a shard set) with the
// checked page reader, and also reads the header of every overflow page run
// that holds a value (which opening skips: one random read per record).
// `db_name` is the database walked (main database when empty). Appends one
// line per damaged place to `problems`; a non-OK status when a file cannot
// be read at all.
Status CheckPages(const std::string& path, const std::string& db_name, std::vector<std::string>* problems);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_CORPUS_PAGE_CHECK_H_
