// CorpusWriter: writes an lmdbloader corpus (see docs/NOTES.md, "Corpus format").
//
// The corpus is written under a temporary name beside the target
// (`<target>.tmp-<pid>`) and put in place by Finish(): an interrupted writer
// leaves nothing at the target path, and with overwrite the old and the new
// corpus trade places in one step (renameat2 RENAME_EXCHANGE), so the target
// always holds a whole corpus, old or new. Create() removes what killed
// writers left beside the target. The LMDB map grows as needed. Not thread-safe: one writer, one
// thread.
#ifndef LMDBLOADER_WRITER_H_
#define LMDBLOADER_WRITER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "lmdbloader/corpus_keys.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

struct WriterOptions {
  // Replace an existing target. Default: false (InvalidArgument if it exists).
  bool overwrite = false;
  // Commit a write transaction after this many bytes. Default: 256 MiB.
  uint64_t txn_bytes = 256ull << 20;
  // Save the record index beside the data, so readers skip the walk.
  // Default: true.
  bool save_index = true;
  // What readers look records up by (corpus_keys.h). kRecordNumbers: names
  // are UTF-8 text (InvalidArgument otherwise). kNames: names are any bytes
  // (an LMDB's keys), and Get(name) finds the record. Default: kRecordNumbers.
  CorpusKeys keys = CorpusKeys::kRecordNumbers;
};

class CorpusWriter {
 public:
  // Prepares `<target>.tmp-<pid>`; InvalidArgument when `target` exists
  // and !overwrite.
  static Status Create(const std::string& target, const WriterOptions& options,
                       std::unique_ptr<CorpusWriter>* writer);
  // Removes the temporary directory unless Finish() succeeded.
  ~CorpusWriter();
  CorpusWriter(const CorpusWriter&) = delete;
  CorpusWriter& operator=(const CorpusWriter&) = delete;

  // Appends record number size(): `record` is stored as given. `name` must be
  // unique, and UTF-8 text unless options.keys is kNames (InvalidArgument
  // otherwise). `columns` holds this record's numeric
  // column values; every record must give the same column names.
  Status Add(std::string_view name, std::string_view record,
             const std::map<std::string, double>& columns = {});
  // Records added, and their bytes.
  uint64_t size() const;
  uint64_t bytes() const;

  // Writes the manifest (`manifest_json`, a JSON object, gains "format",
  // "version", "records", "columns"), names and columns, syncs, and renames
  // the corpus into place. Columns whose values are all integers are stored
  // as little-endian int64, others as float64.
  Status Finish(const std::string& manifest_json);

 private:
  // The open environment, the names, checksums and columns gathered so far
  // (src/corpus/writer.cc).
  struct Rep;
  explicit CorpusWriter(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_WRITER_H_
