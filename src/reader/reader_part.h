// One part of a Reader (a data file of a shard set) and what the Reader's
// three implementation files share: reader.cc (reads, views, keys, stats),
// reader_open.cc (opening, and reopening after fork) and reader_corpus.cc
// (corpus metadata). Internal: not part of the public API.
#ifndef LMDBLOADER_SRC_READER_PART_H_
#define LMDBLOADER_SRC_READER_PART_H_

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/chunk_filler.h"
#include "lmdb/lmdb_env.h"
#include "lmdbloader/reader.h"
#include "io/mapping.h"
#include "reader/name_keys.h"
#include "lmdb/record_index.h"

namespace lmdbloader {

inline std::string OutOfRangeMessage(const std::string& path, uint64_t index, uint64_t size) {
  return "index " + std::to_string(index) + " out of range for " + path + " (" +
         std::to_string(size) + " records)";
}

// Records whose checksum has matched (ChecksumPolicy::kFirstRead):
// one bit each, in anonymous memory shared with processes forked later, so
// workers forked from the reader's process check each record once between
// them. Setting a bit twice is harmless, so relaxed atomics suffice.
class VerifiedRecords {
 public:
  static Status Create(uint64_t count, std::unique_ptr<VerifiedRecords>* out) {
    const size_t bytes = static_cast<size_t>((count + 63) / 64 * 8);
    void* p = bytes == 0 ? nullptr : ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return Status::FromErrno(errno, "mmap", "the record of verified checksums");
    out->reset(new VerifiedRecords(static_cast<uint64_t*>(p), bytes));
    return Status::OK();
  }
  ~VerifiedRecords() {
    if (words_ != nullptr) ::munmap(words_, bytes_);
  }
  bool Has(uint64_t i) const { return (__atomic_load_n(&words_[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1; }
  void Add(uint64_t i) { __atomic_fetch_or(&words_[i / 64], uint64_t{1} << (i % 64), __ATOMIC_RELAXED); }
  size_t bytes() const { return bytes_; }

 private:
  VerifiedRecords(uint64_t* words, size_t bytes) : words_(words), bytes_(bytes) {}
  uint64_t* words_;
  size_t bytes_;
};

struct Reader::Part {
  size_t slot = 0;  // position in parts_, the governor's slot
  DataLocation location;
  RecordIndex index;
  int fd = -1;
  std::shared_ptr<Mapping> map;  // mmap mode; read and swapped with std::atomic_load/store
  std::unique_ptr<LmdbEnv> env;  // lock mode: holds the snapshot the index describes
  std::string index_file;        // "loaded from PATH" when the index came from a saved file
  std::atomic<bool> names_checked{false};  // corpora: names and their offsets matched their checksums
  std::string manifest;          // corpora: the manifest's JSON, checked
  std::map<std::string, std::string> column_dtypes;  // corpora: column name -> "<i8" or "<f8"
  std::vector<uint64_t> checksums;            // corpora: XXH3-64 of each record
  std::unique_ptr<VerifiedRecords> verified;  // ChecksumPolicy::kFirstRead: records already checked
  std::map<std::string, uint64_t> meta_sums;  // corpora: of each metadata value, by key
  std::unique_ptr<ChunkFiller> filler;        // cache policy kFill
  std::unique_ptr<NameKeys> name_keys;        // corpora keyed by names (CorpusKeys::kNames)
  // A plain LMDB opened without the lock file is watched for a writer's
  // commit (CheckSnapshot): its two meta pages, mapped where the file system
  // maps files, else read with pread.
  bool watched = false;
  std::shared_ptr<Mapping> meta_pages;
  ~Part() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_READER_PART_H_
