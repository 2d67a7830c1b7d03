// Reader::Rep, the Reader's private state and implementation, kept out of
// the public header so that changing it recompiles only the Reader: its parts
// (a data file of a shard set or a set of files each), and what the Reader's
// implementation files share: reader.cc (reads, views, stats), reader_keys.cc
// (keys and lookups), reader_open.cc (opening, and reopening after fork),
// reader_files.cc (sets of files), reader_checks.cc (what a read checks of
// its file), reader_corpus.cc (corpus metadata) and reader_leaves.cc (where
// the records of several parts lie, and reads out of LMDB leaf pages).
// The Rep holds state and the helpers several of those files share; each
// public Reader method does its own work, through rep_. Internal: not part of
// the public API.
#ifndef LMDBLOADER_SRC_READER_REP_H_
#define LMDBLOADER_SRC_READER_REP_H_

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "io/chunk_filler.h"
#include "io/link_probe.h"
#include "lmdb/index_file.h"
#include "lmdb/lmdb_env.h"
#include "lmdbloader/reader.h"
#include "io/mapping.h"
#include "reader/file_set.h"
#include "reader/name_keys.h"
#include "reader/set_listing.h"
#include "lmdb/record_index.h"

namespace lmdbloader {

class BatchIo;
class ResidencyGovernor;
struct ReadRequest;

// Corruption naming `path` when `st` (its fstat now) is not the file that
// `identity` was taken of: another inode, or the same one written since
// (its size, mtime or ctime moved: `cp` or `rsync --inplace` onto it, even
// with the old mtime put back), so that offsets in its index may point at
// other bytes.
Status SameFile(const std::string& path, const struct stat& st, const FileIdentity& identity);

// Opens a part's data file, checking it is the file `identity` describes
// (Corruption naming it when replaced or truncated since it was indexed;
// with `unchanged`, also when written since, as SameFile says).
Status OpenDataFile(const std::string& path, const FileIdentity& identity, bool unchanged, int* fd);

// A file set's member of at most this many bytes is indexed by a walk each
// time it is opened, never through a saved index file (OpenPart).
constexpr uint64_t kWalkedFileBytes = 1u << 20;

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

// The leaf pages a batch's lookup read (LocateInLeaves), kept with the
// thread's last located batch so that its read copies the values out of
// them instead of reading each value again.
struct LeafBatch {
  static constexpr uint64_t kNone = UINT64_MAX;
  std::vector<uint64_t> value_at;  // per record of the batch: its value in the buffer, or kNone
  bool any = false;                // some record's value is in the buffer
  void Clear() {
    size_ = 0;
    value_at.clear();
    any = false;
  }
  const char* data() const { return buf_.get(); }
  uint64_t size() const { return size_; }
  // `n` more bytes at the end, left as they are (not zeroed: they are read
  // into), kept with those before; earlier pointers into it may move.
  char* Grow(uint64_t n) {
    if (size_ + n > capacity_) {
      const uint64_t capacity = std::max<uint64_t>(size_ + n, 2 * capacity_);
      std::unique_ptr<char[]> bigger(new char[capacity]);
      if (size_) std::memcpy(bigger.get(), buf_.get(), size_);
      buf_ = std::move(bigger);
      capacity_ = capacity;
    }
    size_ += n;
    return buf_.get() + size_ - n;
  }
  // Copies record k's value (`size` bytes) into dst when its leaf holds it.
  bool Copy(size_t k, uint64_t size, char* dst) const {
    if (!any || value_at[k] == kNone) return false;
    std::memcpy(dst, buf_.get() + value_at[k], size);
    return true;
  }

 private:
  // What was read of the leaves (whole pages, or a regular leaf's node),
  // back to back; kept across batches, so a warm thread allocates nothing.
  std::unique_ptr<char[]> buf_;
  uint64_t size_ = 0, capacity_ = 0;
};
// A batch reads its leaves when they take at most this many bytes of pages
// (512 records of 4 KiB pages); larger batches read as a paged index does.
inline constexpr uint64_t kLeafBatchBytes = 2u << 20;

struct Reader::Rep {
  struct Part;
  // The files of a file set that a read holds open; let go when it ends.
  struct PartPins {
    std::vector<Part*> held;
    PartPins() = default;
    PartPins(const PartPins&) = delete;
    PartPins& operator=(const PartPins&) = delete;
    ~PartPins() { Release(); }
    void Release() {
      for (Part* p : held) p->pins.fetch_sub(1);
      held.clear();
    }
  };
  struct Part {
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
    std::vector<uint64_t> checksums;            // corpora: XXH3-64 of each record (index held)
    ValueLocation checksum_column;              // corpora, index paged: where those lie in the file instead
    bool has_checksums() const { return !checksums.empty() || checksum_column.size != 0; }
    std::unique_ptr<VerifiedRecords> verified;  // ChecksumPolicy::kFirstRead: records already checked
    std::map<std::string, uint64_t> meta_sums;  // corpora: of each metadata value, by key
    std::unique_ptr<ChunkFiller> filler;        // cache policy kFill
    std::unique_ptr<NameKeys> name_keys;        // corpora keyed by names (CorpusKeys::kNames)
    // A plain LMDB opened without the lock file is watched for a writer's
    // commit (CheckSnapshot): its two meta pages, mapped where the file system
    // maps files, else read with pread.
    bool watched = false;
    std::shared_ptr<Mapping> meta_pages;
    // A file set's files are opened as they are read (EnsureOpen): their
    // descriptors and their indexes each let go of least recently used first;
    // reads in flight pin the files they use. A file neither open nor
    // indexed has no Part (Forget): the set keeps its path and count in
    // columns (member_paths_, part_ends_).
    bool indexed = true;
    std::atomic<int> pins{0};
    uint64_t last_use = 0;
    uint64_t records = 0;  // file sets: the count its meta page gave at open
    // File sets, while indexed: its place in indexed_parts_, and the bytes
    // it counts against index_share_.
    std::list<Part*>::iterator in_indexed;
    uint64_t held_bytes = 0;
    // A read found the file written since it was indexed (CheckUnchanged):
    // a file set indexes it again at its next read.
    std::atomic<bool> changed{false};
    ~Part() {
      if (fd >= 0) ::close(fd);
    }
  };

  // Reader::Open's work, on a Rep made for it: fills in the state from `path`.
  Status Open(const std::string& path, const ReaderOptions& options);
  // One chunk (FileSetChunk) of Reader::ValueSizes.
  Status ValueSizesOf(const uint64_t* indices, size_t count, uint64_t* sizes) const;
  // How many of `indices` (from the first) a file set reads together: those
  // from at most half of max_open_parts_ files. All of them otherwise.
  size_t FileSetChunk(const uint64_t* indices, size_t count) const;
  // One chunk (FileSetChunk) of Reader::ReadBatch.
  // `sizes`: empty, it gets the records' sizes; else they must be those
  // (Corruption when a file indexed again since holds other sizes).
  Status ReadBatchOf(const uint64_t* indices, size_t count, char* const* dsts, std::vector<uint64_t>* sizes);
  // Reader::Prefetch's and Reader::Remap's work, which the reads do too
  // (ReadBatchOf and Reader::ViewBatch prefetch; NoteMapped remaps).
  void Prefetch(const uint64_t* indices, size_t count);
  Status Remap();

  Status OpenPart(const std::string& path, Part* part, std::string* index_source);
  // A set of ordinary LMDB files as one dataset (file_set.h): their record
  // counts now, their indexes and descriptors as they are read.
  // `source` says how the set was named, for its saved listing (set_listing.h).
  Status OpenFileSet(const std::string& name, const std::vector<std::string>& files, const ReaderOptions& options,
                     const SetSource& source);
  // A file set from its saved listing: no member is read until it is read.
  Status OpenListedSet(const std::string& name, SetListing* listing, const std::string& listing_path,
                       const ReaderOptions& options);
  // OpenListedSet when the saved listing of `source` describes it: its
  // folder's stat unchanged, or (no folder: a list, a glob over several
  // folders, listed now) it holds exactly `files`. *opened false,
  // nothing done, when there is none or it differs.
  Status OpenSameListed(const std::string& name, const std::vector<std::string>& files, const SetSource& source,
                        const ReaderOptions& options, bool* opened);
  // What both set: the options' checks, the descriptors and the budget's shares.
  Status BeginFileSet(const std::string& name, const ReaderOptions& options);
  // A member opened from the listing was not the file it counted, or did not
  // open: the listing is deleted, and this says so, for the error's message.
  std::string DropListing(size_t slot);
  // File sets, parts_mu_ held: opens `part`'s data file (and its index, when
  // not held), first closing the least recently used unpinned files' while
  // max_open_parts_ descriptors are open, and dropping their indexes while
  // the indexes held exceed index_share_.
  Status EnsureOpen(Part* part);
  // Lets go of a file set's part: its descriptor and its index.
  void ClosePart(Part* part);
  // Builds part->index by a walk of `env`, saved to paths.save when it can
  // be (then read back as UseSavedIndex does).
  Status IndexPart(LmdbEnv& env, Part* part, const IndexPaths& paths, std::string_view meta_prefix,
                   std::string* index_source);
  // The saved index at `path` as part->index, held or paged by the rule of
  // IndexResidence. NotFound when absent or stale.
  Status UseSavedIndex(const std::string& path, const FileIdentity& identity, Part* part);
  Status EnsureProcess();  // reopens handles after fork()
  // The I/O engine (io_engine_, io_), cache policy and file_system_ for data
  // at `data_path` of `data_bytes` in all, by the options' kAuto rules.
  Status ChooseReadPath(const std::string& data_path, uint64_t data_bytes);
  // POSIX_FADV_RANDOM on a data descriptor where reads are exact over a link.
  void AdviseReads(int fd) const;
  // After a read through a mapping of `part` found zeros (fault_guard.h): IOError when the
  // file shrank (or fstat fails: a dead FUSE daemon), else OK, or with
  // `lasting` an IOError with EIO: the storage failed the read.
  Status MappedReadFailed(const Part& part, bool lasting = false) const;
  // A fresh mapping for `part` in place of `failed` (unless another thread
  // made one already): the failed one reads as zeros from then on.
  Status RemapAfterFailedRead(Part& part, const std::shared_ptr<Mapping>& failed);
  // mmap mode: copies a record out of its part's mapping, mapping again and
  // reading again (read_retry.h) while the storage fails the read.
  Status CopyMapped(Part& part, uint64_t offset, uint64_t size, char* dst);
  // After reads from parts[0..count): Corruption naming a file that was
  // written since it was indexed (SameFile), which the bytes read may come from.
  Status CheckUnchanged(Part* const* parts, size_t count) const;
  // read(), and once more when it failed on a file of a set written since it
  // was indexed: the second read indexes that file again (EnsureOpen).
  Status RereadChanged(const std::function<Status()>& read);
  // Reader::Read and ReadInto: one record into the buffer `place` gives for
  // its size (or its refusal), through RereadChanged.
  Status ReadOne(uint64_t index, const std::function<Status(uint64_t size, char** dst)>& place);
  // IOError naming the file when a writer committed to a plain LMDB opened
  // without the lock file since it was opened: its pages are the snapshot's
  // only until a later writer reuses them, so what was read may be wrong.
  Status CheckSnapshot() const;
  Status ReopenHandles();
  // ReopenHandles for a file set: its descriptors closed, its indexes
  // reopened or let go, its engine made anew.
  Status ReopenFileSet();
  // After fork(): part's paged index reopened (PagedIndex::Reopen). Where
  // neither its descriptor nor its name is left, the index is made anew
  // from the data (a file set's part drops it, to be indexed again when
  // next read), so a cleaner that deletes a saved index stops no reads.
  Status ReopenIndex(Part* part);
  // Not for file sets, whose parts exist only while held: LocateSlot, then
  // PinSlots.
  Status Locate(uint64_t index, Part** part, uint64_t* local) const;
  // The part (its position in parts_) and the record within it.
  Status LocateSlot(uint64_t index, size_t* slot, uint64_t* local) const;
  // Locate for each of `indices`, and where each record lies (a paged index
  // reads each part's entries together; the last batch a thread located
  // through one is remembered, so that its sizes and then its reads look it
  // up once).
  // In a file set, the files are opened and pinned in `pins`.
  // `leaves` (may be null): set to the batch's leaf pages when some values
  // came from them (LeafBatch), valid until this thread's next LocateAll.
  Status LocateAll(const uint64_t* indices, size_t count, Part** parts, uint64_t* locals,
                   ValueLocation* locations, PartPins* pins, const LeafBatch** leaves = nullptr) const;
  // One record: this process's handles first (EnsureProcess), then LocateAll.
  Status LocateOne(uint64_t index, Part** part, uint64_t* local, ValueLocation* at, PartPins* pins,
                   const LeafBatch** leaves = nullptr);
  // parts[k] = the part of slots[k]. File sets: made (FilePart), opened
  // when not open yet, and pinned in `pins`, so that it lives and stays open
  // until `pins` lets go.
  Status PinSlots(const size_t* slots, size_t count, Part** parts, PartPins* pins) const;
  // File sets, parts_mu_ held: the Part of slot `slot`, made when it has none.
  Part* FilePart(size_t slot);
  // File sets, parts_mu_ held: deletes `part` when it holds nothing (no
  // descriptor, no index, no pin), so that a set's closed files cost their
  // columns' bytes alone.
  void Forget(Part* part);
  // The first part's data file (file sets: the first member's).
  std::string FirstDataPath() const;
  // Where each record lies, a part at a time; with `leaves`, from the leaf
  // pages of parts that hold a table of them (LocateInLeaves).
  Status LocateParts(Part* const* parts, const uint64_t* locals, size_t count, ValueLocation* locations,
                     LeafBatch* leaves = nullptr) const;
  // reader_leaves.cc: where records locals[0..count) of `part` lie, those on
  // usable leaves by reading their leaf pages or nodes (into `leaves`,
  // value_at[k] set; kNone for the others, located by the index). Corruption
  // naming the data file when a leaf page or node is not what the table says.
  Status LocateInLeaves(const Part& part, const uint64_t* locals, size_t count, ValueLocation* locations,
                        LeafBatch* leaves, uint64_t* value_at) const;
  // After a paged index is opened for `part`: its table of leaves held
  // beside it when the options' rule (IndexResidence) and the budget want it.
  Status HoldLeaves(Part* part);
  // `leaves` (may be null): a one-record lookup's leaf, which holds the value.
  Status CopyOut(Part& part, uint64_t local, const ValueLocation& at, char* dst, const LeafBatch* leaves = nullptr);
  // mmap mode: tells the governor, and remaps every remap_every bytes.
  Status NoteMapped(Part& part, uint64_t offset, uint64_t size);
  Status PreadAt(Part& part, uint64_t offset, uint64_t size, char* dst);
  // pread mode: the cache policy around a batch of reads.
  Status ReadRequests(const ReadRequest* requests, const Part* const* parts, size_t count) const;
  unsigned FillParallel() const;  // chunks of a batch filled at once (cache policy fill)
  Status ReadMeta(Part& part, const std::string& key, std::string* bytes);
  // ReadMeta, then the value's checksum from the manifest (when it has one).
  Status ReadCheckedMeta(Part& part, const std::string& key, std::string* bytes);
  // The value's checksum from the manifest (when it has one), read a piece
  // at a time: for values too large to hold.
  Status CheckMeta(Part& part, const std::string& key);
  // Checks and loads a corpus's manifest, columns and record checksums;
  // `corpus` false for a plain LMDB.
  Status LoadCorpusMeta(Part& part, bool* corpus);
  // Corruption naming the record and file when its checksum differs.
  // `expected` (may be null): the record's checksum, read already.
  Status VerifyRecord(const Part& part, uint64_t local, const char* data, uint64_t size,
                      const uint64_t* expected = nullptr) const;
  // The checksums of records locals[k] of parts[k] that a corpus keeps in
  // its file (paged index), into sums[k]; the others are left as they are.
  Status ReadChecksums(const Part* const* parts, const uint64_t* locals, size_t count, uint64_t* sums) const;

  Rep();
  static uint64_t ForkGeneration();  // the process's fork generation (reader_open.cc)

  const uint64_t id_;        // unique in the process, never reused
  // Counts the times a part's index was (re)loaded after open: a thread's
  // remembered lookups (LocateAll) hold only for the epoch they were made in.
  std::atomic<uint64_t> index_epoch_{0};
  std::atomic<bool> any_paged_{false};  // a part's index is paged
  bool file_set_ = false;               // parts are opened as they are read (OpenFileSet)
  mutable std::mutex parts_mu_;         // file sets: opening and closing parts
  size_t max_open_parts_ = 0;
  std::vector<Part*> open_parts_;     // file sets: parts with a data descriptor
  std::list<Part*> indexed_parts_;    // file sets: parts whose index is held, least recently used first
  uint64_t held_index_bytes_ = 0;     // file sets: their held_bytes together
  size_t paged_parts_ = 0;            // file sets: those whose index is paged
  uint64_t index_share_ = 0;          // file sets: what their indexes may hold together
  uint64_t use_clock_ = 0;
  std::vector<std::string> skipped_files_;  // skip_bad_files: why each was left out
  MemberPaths member_paths_;                // file sets: each file's path, by slot
  // File sets opened from a saved listing: its path, and each member's
  // identity as it saved it (MemberIdentity::Sum), checked at first open.
  std::string listing_path_;
  std::vector<uint64_t> listed_sums_;
  std::atomic<bool> listing_dropped_{false};
  std::string first_data_path_;             // file sets: the first member's data file
  unsigned set_format_ = 1;                 // file sets: the first member's LMDB data format
  unsigned set_db_flags_ = 0;               // file sets: the first member's database flags
  std::string path_;
  ReaderOptions options_;
  AccessMode mode_ = AccessMode::kPread;
  uint64_t size_ = 0;
  MemoryBudget budget_{0};
  // One a data file; a file set's are null while the file is closed.
  std::vector<std::unique_ptr<Part>> parts_;
  std::vector<uint64_t> part_ends_;  // global end position of each part
  std::string manifest_;
  std::string index_source_;
  std::unique_ptr<ResidencyGovernor> governor_;
  std::unique_ptr<BatchIo> io_;  // pread mode; recreated in a forked child
  std::string io_fallback_;
  CachePolicy cache_policy_ = CachePolicy::kExact;
  IoEngine io_engine_ = IoEngine::kAuto;  // options_.io_engine, kAuto resolved for the file system
  std::string file_system_;               // "local", "nfs", "fuse", ... (io/file_system.h)
  bool read_random_ = false;              // exact reads on a remote file system: no readahead
  bool remote_ = false;                   // the data lie on a network or FUSE file system
  bool fill_room_ = false;                // the page cache and the budget leave room for chunk fills
  bool cache_room_ = false;               // every data file fits in half of the page cache's room
  uint64_t data_bytes_ = 0;               // the data files' bytes together
  LinkEstimate link_;                     // measured once an epoch's share is known (remote, auto)
  bool read_around_ = false;              // small records' exact reads advise their window first
  uint64_t resident_index_cap_ = 0;  // a part's index is held while it needs at most this
  uint64_t index_cache_bytes_ = 0;   // a paged part's page cache
  uint64_t generation_ = 0;  // fork generation the handles belong to
  std::mutex reopen_mu_;
  std::atomic<uint64_t> records_read_{0};
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> bytes_since_remap_{0};
  std::atomic<uint64_t> remaps_{0};
  mutable std::atomic<uint64_t> changes_seen_{0};  // files found written since indexed (CheckUnchanged)
  mutable std::atomic<uint64_t> leaf_page_reads_{0};  // leaf pages read by LocateInLeaves
  mutable std::atomic<uint64_t> leaf_values_{0};      // values found in them, or in nodes read alone
  mutable std::atomic<uint64_t> leaf_nodes_{0};       // nodes of regular leaves read alone
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_READER_REP_H_
