// File sets: many ordinary LMDB databases read as one dataset.
//
// Corpora in the wild are often split into many LMDB files (fairchem's
// folders of *.lmdb, chunk files of a few thousand samples each): a Reader
// opened on a folder of them, a glob, or a list of paths reads them one after
// the other, record positions running on from file to file. Each file is
// opened (descriptors, index) only while it is read, a bounded number at once
// (reader_rep.h says how), so that neither the descriptor limit nor the
// budget grows with the file count.
#ifndef LMDBLOADER_SRC_READER_FILE_SET_H_
#define LMDBLOADER_SRC_READER_FILE_SET_H_

#include <string>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

// The databases `path` names when it is a file set, in sorted order:
//  - a folder that holds neither data.mdb nor a shard list: its files named
//    *.lmdb or *.mdb (not lock files) and its subfolders holding data.mdb;
//  - a glob pattern (*, ? or [ in a path that does not exist): what it matches.
// *is_set false (nothing listed) when `path` is one database or a shard set.
// IOError naming `path` when a folder or pattern names no database.
Status ListFileSet(const std::string& path, bool* is_set, std::vector<std::string>* files);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_READER_FILE_SET_H_
