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
//    *.lmdb or *.mdb (not lock files) and its subfolders holding data.mdb,
//    named *.lmdb or *.mdb, or holding lock.mdb, a shard list or databases
//    of their own (those that are no database are listed so that opening
//    them says so: a set is one folder deep);
//  - a glob pattern (*, ? or [ in a path that does not exist): what it
//    matches, lock files left out.
// *is_set false (nothing listed) when `path` is one database or a shard set.
// IOError naming `path` when a folder or pattern names no database.
Status ListFileSet(const std::string& path, bool* is_set, std::vector<std::string>* files);

// Why `path`, listed as one database of a set, is none before its data file
// is opened: IOError for a folder without data.mdb (saying so where it holds
// databases of its own), InvalidArgument for a shard set's folder. OK for
// anything else (its open says what is wrong).
Status CheckFileSetMember(const std::string& path);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_READER_FILE_SET_H_
