// Saving and loading a RecordIndex, so that many processes opening the same
// database walk it once. The file (index_format.h) starts with the identity
// of the data file it describes (device, inode, size, mtime, LMDB txn id,
// page size, db name) and is ignored when that identity no longer matches.
// LoadIndex reads it whole into a resident index; PagedIndex
// (paged_index.h) reads it where it lies.
#ifndef LMDBLOADER_SRC_INDEX_FILE_H_
#define LMDBLOADER_SRC_INDEX_FILE_H_

#include <string>
#include <vector>

#include "lmdb/lmdb_env.h"
#include "lmdbloader/options.h"
#include "lmdbloader/status.h"
#include "lmdb/index_format.h"
#include "lmdb/record_index.h"

namespace lmdbloader {

// Where a Reader looks for and saves the index of `location` (the one rule,
// docs/NOTES.md, "Caveats", the record index): `load` is tried in order, `save` receives a
// built index. With options.index_dir
//   ""      load: beside the data (written by `lmdbloader convert`), then the
//           cache directory ($LMDBLOADER_INDEX_DIR, $XDG_CACHE_HOME/lmdbloader,
//           ~/.cache/lmdbloader); save: the cache directory. A Reader never
//           writes into the data's directory.
//   "none"  neither;
//   a path  that directory for both.
struct IndexPaths {
  std::vector<std::string> load;
  std::string save;  // empty: not saved
};
IndexPaths IndexFilePaths(const DataLocation& location, const ReaderOptions& options,
                          const FileIdentity& identity);

// The folder a Reader saves to under options.index_dir (the rule above,
// which file sets' listings follow too): empty for "none" or when neither
// variable nor HOME names one.
std::string IndexCacheDir(const ReaderOptions& options);

// The index file beside the data (what the converter writes).
std::string IndexFileBeside(const DataLocation& location, const std::string& db_name);

// Writes a resident index through IndexWriter: to a temporary name in the
// same directory, renamed into place, so readers never see half a file.
// Creates the cache directory when needed.
Status SaveIndex(const std::string& path, const RecordIndex& index);

// NotFound when the file is absent or describes another state of the data
// file (stale); Corruption when it is damaged.
Status LoadIndex(const std::string& path, const FileIdentity& expected,
                 const std::string& db_name, RecordIndex* index);

class IndexFileCodec {
 public:
  // A whole index file's bytes into a resident index; Corruption naming
  // `path` when damaged. `check_sums` false skips the header's, entries' and
  // pages' sums (the fuzz harness, to reach the parser behind them).
  static Status Decode(const std::string& bytes, const std::string& path, RecordIndex* index,
                       bool check_sums = true);
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_INDEX_FILE_H_
