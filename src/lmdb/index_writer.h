// IndexWriter: writes a saved record index (index_format.h) as the walk
// produces it, so that building the index of 10^8 records holds a few MiB of
// buffers instead of the whole index (3.3 GB were held while a resident index
// of 10^8 py-lmdb records was built).
//
// The entries go to the final file's temporary name as they come, the keys to
// a second temporary file that Finish appends; Finish writes the header, syncs
// and renames into place, so readers see the old file or the whole new one.
// A writer that is destroyed unfinished removes its temporary files.
#ifndef LMDBLOADER_SRC_LMDB_INDEX_WRITER_H_
#define LMDBLOADER_SRC_LMDB_INDEX_WRITER_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "lmdb/index_format.h"
#include "lmdb/leaf_table.h"
#include "lmdb/record_index.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

class IndexWriter : public IndexSink {
 public:
  // A writer of the index file `path` (its directory is created when needed).
  static Status Create(const std::string& path, std::unique_ptr<IndexWriter>* out);
  ~IndexWriter() override;
  IndexWriter(const IndexWriter&) = delete;
  IndexWriter& operator=(const IndexWriter&) = delete;

  // The next record in key order.
  Status Add(std::string_view key, uint64_t offset, uint32_t size) override;
  Status AddMeta(std::string_view key, uint64_t offset, uint32_t size) override;
  uint64_t records() const { return records_; }
  // The walk's table of leaf pages (leaf_table.h), written after the
  // metadata; none when not given.
  void SetLeaves(const LeafTable& leaves) { leaves_ = leaves.Encode(); }

  // Writes the header for the data file `identity` and renames the file into
  // place. IOError naming the file otherwise (ENOSPC, EIO).
  Status Finish(const FileIdentity& identity, const std::string& db_name, uint16_t db_flags, bool keys_sorted);

 private:
  IndexWriter() = default;
  Status AddEntry(const IndexEntry& entry);
  Status Flush();                // pending_ to the file
  Status FlushKeys(bool last);   // whole key pages (the last one padded) to the keys file
  // The first key that is not the record number: the entries written so far
  // (narrow) are rewritten wide, with their computed keys stored.
  Status WidenEntries();

  std::string path_, tmp_, keys_tmp_;
  int fd_ = -1, keys_fd_ = -1;
  bool wide_ = false, finished_ = false;
  uint64_t records_ = 0;
  uint64_t entries_written_ = 0;  // bytes of entry pages written to fd_ after the header
  std::string page_;               // the entry page being filled
  std::string pending_;            // whole entry pages not yet written
  std::string keys_;               // key bytes not yet written
  uint64_t key_bytes_ = 0;         // key bytes so far
  uint64_t key_pages_written_ = 0;
  std::map<std::string, ValueLocation> meta_;
  std::string leaves_;  // encoded
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_LMDB_INDEX_WRITER_H_
