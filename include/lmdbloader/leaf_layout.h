// Serves the py-lmdb compatible API: lmdbloader.compat's cursor is its only
// user.
//
// Where the leaf pages of one database begin, in LMDB's order: what
// lmdbloader.compat needs to reproduce a quirk of liblmdb's cursor. The cursor
// moves page by page: after a failed exact lookup whose insertion point is the
// first node of a leaf page, it sits past the last node of the page before
// it, and its next move lands on that node rather than the one after it.
// py-lmdb shows that behaviour, so compat does too.
#ifndef LMDBLOADER_LEAF_LAYOUT_H_
#define LMDBLOADER_LEAF_LAYOUT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

struct LeafLayout {
  // Indices of the keys (key nodes; one per key in a MDB_DUPSORT database)
  // that begin a leaf page, the first page's excepted.
  std::vector<uint64_t> key_page_starts;
  // For each key whose duplicates fill a tree of their own: the key's index
  // and the indices of its duplicates that begin a leaf page of that tree,
  // the first excepted.
  std::vector<std::pair<uint64_t, std::vector<uint64_t>>> dup_page_starts;
};

// Walks `db_name` (main database when empty) of the LMDB at `path` with the
// checked page reader. Errors as for Reader::Open; Unsupported for a shard
// set: its parts are separate trees.
Status ReadLeafLayout(const std::string& path, const std::string& db_name, LeafLayout* layout);

}  // namespace lmdbloader

#endif  // LMDBLOADER_LEAF_LAYOUT_H_
