// Reader: random access to the records of an LMDB database, or of an
// lmdbloader corpus or shard set, under a per-process memory budget.
//
// CAVEATS (read these first)
// - Fork: a Reader may be used in a child process after fork(). On its first
//   use there it reopens its own file descriptors and mapping and never uses
//   the parent's LMDB environment (lmdb.h forbids that). It then governs the
//   child's memory, measured from the child's start.
// - Threads: all const and non-const read methods may be called from many
//   threads at once without external synchronization. Open and destruction
//   must not race with reads.
// - Writers: with ReaderOptions::lock false (the default) the database is
//   opened without LMDB's lock file, which is only correct while no writer
//   changes it. With lock true the Reader holds one read transaction, so a
//   writer's later commits are invisible to it and cannot reuse the pages it
//   reads (and the file grows meanwhile, as with any long-lived LMDB reader).
// - mmap mode maps the data file. If another process truncates the file, a
//   read of a missing page would raise SIGBUS and kill the process, as with
//   any mapped reader; the Reader guards its mappings instead (a SIGBUS
//   handler that chains to the one it replaced): the read finds zeros, and
//   the call reports IOError ("shrank under its mapping"), as do all later
//   reads of that mapping. A view already handed out reads zeros where its
//   pages are gone; CheckMappings() says whether that happened. The handler
//   is put back in front each time a file is mapped (open, Remap, the first
//   use after fork(), where a DataLoader worker has installed its own); a
//   SIGBUS handler installed later in the same process displaces it until
//   then. pread mode reports an error
//   without any of this.
// - Remote file systems: as for LMDB itself, do not read a database on NFS
//   while a writer changes it.
//
// Positions are in key order: position i is the i-th key of the database, and
// for an lmdbloader corpus record number i. Indexes past the end give
// OutOfRange; a missing key gives NotFound.
#ifndef LMDBLOADER_READER_H_
#define LMDBLOADER_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/corpus_keys.h"
#include "lmdbloader/memory_budget.h"
#include "lmdbloader/options.h"
#include "lmdbloader/record_view.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

// What a Reader reports about itself and about what the kernel counts.
struct ReaderStats {
  uint64_t rss_budget = 0;        // bytes; 0 = unbounded
  std::string mode;               // "pread" or "mmap"
  uint32_t lmdb_format = 1;       // LMDB's data format of its (first) file: 1 (LMDB 0.9) or 3 (LMDB 1.0)
  uint64_t records = 0;           // records in the database
  uint64_t process_rss = 0;       // this process's RSS (/proc/self/statm)
  uint64_t process_file_rss = 0;  // its resident file-backed + shmem pages
  uint64_t mapped_rss = 0;        // RSS of this process's mappings of the data file(s) (smaps)
  uint64_t drops = 0;             // releases of mapped windows (walk and governor)
  uint64_t remaps = 0;            // mappings replaced
  uint64_t records_read = 0;
  uint64_t bytes_read = 0;
  // What the budget pays for the records' places: a resident index's arrays
  // and keys, or a paged index's page cache at its most (IndexResidence).
  uint64_t index_bytes = 0;
  std::string index_source;       // "built", "loaded", "built (saved to ...)"
  std::string index_residence;    // "resident", "paged", "leaves" (paged with a table of leaf pages), or
                                  // two of them joined by "+" across parts
  uint64_t index_cache_held = 0;  // paged: bytes of index pages cached now (<= index_bytes)
  uint64_t index_page_reads = 0;  // paged: index pages read into the cache
  uint64_t index_entry_reads = 0; // paged: entries read alone (one small pread each)
  uint64_t index_cache_hits = 0;  // paged: lookups the cache answered
  uint64_t leaf_page_reads = 0;   // leaves: LMDB leaf pages read (one for the records of a batch it holds)
  uint64_t leaf_values_read = 0;  // leaves: records located in them (and then copied out of them)
  uint64_t leaf_node_reads = 0;   // leaves: of those, records of regular leaves whose node was read alone
  uint64_t checksum_bytes = 0;    // corpora: the records' checksums held, and the record of verified ones
  uint64_t files = 0;             // data files: 1, a shard set's parts, or a set of files' files
  uint64_t files_open = 0;        // of those, open now (a set of files opens them as they are read)
  uint64_t files_skipped = 0;     // a set of files with skip_bad_files: files left out
  std::string io_engine;          // pread mode: "io_uring", "threads" or "sync"; mmap mode: "mmap"
  std::string io_fallback;        // why io_uring was not used (empty when it is, or was not asked for)
  uint32_t queue_depth = 0;       // reads in flight at most per batch
  std::string cache_policy;       // "fill", "exact" or "drop" (ReaderOptions::cache_policy resolved)
  std::string file_system;        // what holds the data: "local", or "nfs", "lustre", "fuse", ...
  // cache="auto" reading exactly over a link: bytes read around each small
  // record (0: exactly the record), from the link measured at open: its
  // round trip and bandwidth (0: not measured, or faster than the probe tells).
  uint64_t read_around = 0;
  uint64_t link_requests_us = 0;
  uint64_t link_bytes_per_s = 0;
  uint64_t chunks_filled = 0;     // 2 MiB chunks this process read whole into the page cache
};

// One contiguous piece of a column in one data file (one per shard).
struct ColumnChunk {
  std::string data_path;
  uint64_t offset = 0;  // byte offset of the column's values in data_path
  uint64_t size = 0;    // bytes
  std::string dtype;    // numpy's name of the values: "<i8" or "<f8", from the manifest
};

// One database of a set of files (Reader::FileSetMembers): positions
// first .. first + records - 1 of the set are its records, in its key order.
struct FileSetMember {
  std::string path;  // as listed (a folder's entry, a glob's match) or given in the list
  uint64_t first = 0;
  uint64_t records = 0;
};

class Reader {
 public:
  // Opens `path`: a directory holding data.mdb, an LMDB data file, or a
  // directory holding a shard list (shards.json) written by `lmdbloader
  // convert`. Builds the record index by a cursor walk (under the budget) or
  // loads a saved one. Errors name the path: IOError (missing, permission
  // denied), Corruption (not an LMDB file, truncated, damaged), NotFound (no
  // such named database), InvalidArgument (bad options, or a budget smaller
  // than the record index).
  static Status Open(const std::string& path, const ReaderOptions& options,
                     std::unique_ptr<Reader>* reader);
  // Opens the LMDB databases at `paths` (each a folder holding data.mdb or a
  // data file, any writer) as one dataset, in the order given: positions run
  // on from one database to the next. `path` above may name such a set too:
  // a folder of *.lmdb / *.mdb files or of folders holding data.mdb, or a
  // glob, read in sorted order. Each file is opened (descriptors, record
  // index) while it is read, a bounded number at once, least recently used
  // closed first: the descriptors and the budget do not grow with the file
  // count; a closed file costs its path and count (about 45 bytes). Record
  // counts come from each file's meta page, all read at open (positions and
  // size() need them: about 10 us a file, on several threads); a file
  // whose tree disagrees is Corruption naming it when it is read. mmap mode
  // and lock=true are for one database (InvalidArgument); LowerBound is
  // Unsupported (no key order runs across files).
  static Status Open(const std::vector<std::string>& paths, const ReaderOptions& options,
                     std::unique_ptr<Reader>* reader);

  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  uint64_t size() const;
  const std::string& path() const;
  const ReaderOptions& options() const;
  // What the budget lets each part of this reader hold (its index paid first).
  const MemoryBudget& budget() const;
  AccessMode mode() const;  // kPread or kMmap, never kAuto
  // The cache policy in effect (kAuto resolved at open, and again by
  // ExpectShare).
  CachePolicy cache_policy() const;

  // What this machine will read of the records in an epoch: `share` of them
  // (0 to 1, this process and those that share its page cache: the workers
  // of one loader, the ranks on one node), or, with `in_chunks`, the records
  // of whole 2 MiB chunks (LocalitySampler's blocks). With cache="auto" on a
  // network file system, a share of at least 1/2 or reads in chunks choose
  // kFill, else kExact (options.h, CachePolicy::kAuto); elsewhere, and with
  // any other cache option, nothing changes. Call it between batches, before
  // forking workers. InvalidArgument for a share outside [0, 1].
  Status ExpectShare(double share, bool in_chunks);

  // LMDB's flags of the database read (lmdb.h's MDB_DUPSORT, MDB_INTEGERKEY,
  // MDB_REVERSEKEY, MDB_DUPFIXED, MDB_INTEGERDUP, MDB_REVERSEDUP). With
  // MDB_DUPSORT, positions run over (key, duplicate) pairs in LMDB's order: a
  // key with three duplicates holds three positions, Find gives the first.
  unsigned db_flags() const;

  // Size in bytes of record `index`. OutOfRange past the end.
  Status ValueSize(uint64_t index, uint64_t* size) const;
  // Sizes of the records at `indices`, looked up together (a paged index
  // reads the entries of a batch at once, and a ReadBatch of the same
  // indices that follows in the same thread looks them up no more).
  Status ValueSizes(const uint64_t* indices, size_t count, uint64_t* sizes) const;

  // Copies record `index` into `dst`, which holds at least `capacity` bytes;
  // InvalidArgument when capacity < ValueSize. The copy is exact.
  Status ReadInto(uint64_t index, char* dst, uint64_t capacity);
  // Copies record `index` into `*value`.
  Status Read(uint64_t index, std::string* value);
  // Reads `count` records: record indices[k] into dsts[k], each sized by
  // ValueSize. All indices are checked before anything is read. In pread
  // mode the reads are issued together (ReaderOptions::io_engine), up to
  // queue_depth in flight; in mmap mode they are prefetched (Prefetch)
  // before the first is copied. The call returns when all are done. On failure
  // the error is that of the first failing record in batch order.
  Status ReadBatch(const uint64_t* indices, size_t count, char* const* dsts);

  // A zero-copy view of record `index` (see record_view.h). Needs mmap mode:
  // InvalidArgument in pread mode.
  Status View(uint64_t index, RecordView* view);
  // Asks for the pages of these records: the cache policy's chunk fill
  // (which waits for its reads), else POSIX_FADV_WILLNEED (which does not).
  // mmap mode: the mapping is MADV_RANDOM, so touching a cold record faults
  // 4 KiB at a time with one read in flight; prefetched, a batch's reads
  // overlap. pread mode: a caller that knows its next batch prefetches it
  // on another thread while this batch is copied and checked (lmdbloader
  // scan), so the device never waits for the CPU. Nothing with cache policy
  // drop. Thread-safe; out-of-range indices are skipped.
  void Prefetch(const uint64_t* indices, size_t count);
  // Views of `count` records (mmap mode), the batch form of View: Prefetch,
  // then View each. All indices are checked first; on failure the error is
  // that of the first failing record in batch order.
  Status ViewBatch(const uint64_t* indices, size_t count, RecordView* views);
  // IOError naming the file when one of the Reader's files shrank under its
  // mapping (see CAVEATS): views read since may hold zeros; or when a writer
  // committed to a plain LMDB opened without the lock file (see
  // CheckSnapshot).
  Status CheckMappings() const;

  // Keys: a plain LMDB's keys; a corpus's record numbers (8 bytes big-endian)
  // or, in a corpus keyed by names (corpus_keys() == kNames, what `convert
  // --from lmdb` writes), its names: the keys of the LMDB it came from.
  CorpusKeys corpus_keys() const;
  // Key of record `index`.
  Status Key(uint64_t index, std::string* key) const;
  // Position of `key`: NotFound when absent (an expected outcome).
  Status Find(std::string_view key, uint64_t* index) const;
  // A set of files (opened on a folder, a glob or a list): its databases in
  // the order read, files left out by skip_bad_files not among them. Empty
  // for one database or a shard set.
  std::vector<FileSetMember> FileSetMembers() const;
  // Find within one database of a set of files, for keys that several of
  // them hold (each of a folder of OCR sets has num-samples, image-000000001,
  // ...): the set's position of `key` in member `member` (FileSetMembers()
  // order). NotFound when that file lacks it; OutOfRange past the last
  // member; InvalidArgument when this Reader reads no set of files.
  Status FindInMember(size_t member, std::string_view key, uint64_t* index) const;
  // First position whose key is >= `key`; size() when none. A corpus keyed
  // by names that are not in byte order (converted with --order shuffle):
  // the position of the smallest name >= `key`. Corruption when a paged
  // index (IndexResidence) meets damage in its file.
  Status LowerBound(std::string_view key, uint64_t* position) const;
  // Find, then Read. NotFound when absent.
  Status Get(std::string_view key, std::string* value);

  // Corpus metadata. manifest() is the JSON manifest, empty for a plain LMDB.
  bool is_corpus() const;
  const std::string& manifest() const;
  // Name of record `index` (corpora keep names; OutOfRange past the end,
  // NotFound for a database without names).
  Status Name(uint64_t index, std::string* name);
  // Where the column's little-endian values lie, one chunk per shard.
  // NotFound when the corpus has no such column.
  Status Column(const std::string& name, std::vector<ColumnChunk>* chunks) const;
  // Concatenated bytes of a column.
  Status ReadColumn(const std::string& name, std::string* bytes);

  // Where each record lies, for samplers that read neighbours together: a
  // byte position per record in one space across the parts of a shard set
  // (part k's offsets follow part k-1's file size). Records at nearby
  // positions share pages and 2 MiB chunks of the same file. Holds 8 bytes
  // a record while the caller keeps the result.
  Status RecordPositions(std::vector<uint64_t>* positions) const;

  // Reads every metadata value of a corpus (names, name offsets, columns,
  // record checksums) and checks each against the manifest's checksums.
  // Corruption naming the file and the value; OK for a plain LMDB.
  Status CheckMetadata();

  // Saves the record index of each part beside its data file (as
  // `lmdbloader convert` does for the corpora it writes), where every later
  // open looks first. Readers never do this on their own.
  Status SaveIndexBeside();

  // mmap mode: replaces the mapping by a fresh one (live views keep theirs).
  Status Remap();

  ReaderStats stats();

 private:
  // Everything else, private (src/reader/reader_rep.h): the state and the
  // helpers the implementation files share, which each public method reaches
  // through rep_, so the header stays the same when the state changes.
  struct Rep;
  Reader();
  std::unique_ptr<Rep> rep_;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_READER_H_
