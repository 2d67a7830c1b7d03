// ReaderOptions: how a Reader opens a database and how much memory it may hold.
//
// A plain struct; copy it freely. Every field documents its default, and the
// default written here is the default in code.
#ifndef LMDBLOADER_OPTIONS_H_
#define LMDBLOADER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

// How record bytes travel from the data file to the caller.
enum class AccessMode {
  // kPread unless the caller asks for views (Reader::View), which need kMmap.
  kAuto,
  // Every read is one pread() of the record's (offset, size) from the record
  // index. Nothing of the data file stays mapped: the process holds only the
  // index (12 bytes a record, plus keys for databases whose keys are not
  // record numbers). The fastest mode for small records, ~0.85-1x of mapped
  // reads for large ones.
  kPread,
  // The data file is mapped; reads return views into the map (zero-copy). A
  // governor reads the kernel's RSS count after each read and releases least
  // recently used windows of the map with MADV_DONTNEED when the process has
  // grown past the budget.
  kMmap,
};

// How a batch of reads (Reader::ReadBatch) reaches the device in pread mode.
enum class IoEngine {
  // io_uring when the kernel allows it (many container runtimes block it with
  // seccomp; probed at open), else kThreads; kThreads too when the data lie
  // on a network or FUSE file system, where io_uring hands buffered reads to
  // its worker pool (256 cold records over FUSE: 89-132 ms, threads 30 ms).
  kAuto,
  // All reads of a batch submitted at once through io_uring (liburing), up to
  // queue_depth in flight, awaited together.
  kIoUring,
  // A small pool of threads issuing pread(), up to queue_depth at once.
  kThreads,
  // One pread() after another in the calling thread (queue depth 1).
  kSync,
};

// Where the record index (each record's place in the data file, and the keys
// of a database whose keys are not record numbers) lives.
enum class IndexResidence {
  // kResident while the resident index fits a quarter of rss_budget (256 MiB
  // without a budget; each part of a shard set its share), else kLeaves
  // while its table of leaves fits that quarter, else kPaged. A py-lmdb
  // database of b"%09d" keys costs 29 bytes a record resident: up to about
  // 2.3 million records under a 256 MiB budget, 9 million unbounded.
  kAuto,
  // In this process's memory: the fastest lookups; 12 bytes a record plus
  // the keys, in every process (DataLoader workers included).
  kResident,
  // Read from the saved index file with pread as reads need it, through a
  // page cache of at most an eighth of the budget (at most 4 MiB; 4 MiB
  // without a budget): the same memory for any record count. Costs one more
  // pread (16 or 24 bytes, from the page cache) per record whose index page
  // a batch does not share with another record; lookups by key read about
  // log2(records) index pages, the upper ones cached. Needs a saved index
  // (index_dir not "none").
  kPaged,
  // kPaged, and beside it a table of the database's LMDB leaf pages (8 bytes
  // a leaf: 1.7 MB for 10^7 records of 64 B; 12 bytes a leaf of values on
  // overflow pages): one read a record instead of two. Records appended in
  // one size (converters, putmulti(append=True)) are read as their node
  // alone (checked: value size, flags, key size, the key where keys are
  // record numbers) or their overflow run with its page header (checked:
  // page number, type, run length); other leaves of inline values are read
  // whole (checked: page number, type, node count, node bounds) and the value
  // copied out. Batches of up to 512 records (4 KiB pages); larger ones,
  // leaves shared with metadata or mixing inline and overflow values read as
  // kPaged does. Where no leaf qualifies it is kPaged. Needs a saved index.
  kLeaves,
};

// What reads leave in the kernel's page cache (pread mode).
enum class CachePolicy {
  // kFill when every data file together fits in half of the memory the kernel
  // reports available at open, the budget leaves room for a chunk, and the
  // data lie on a local file system; else kExact. On network and FUSE file
  // systems (statfs: NFS, SMB, Lustre, GPFS, CephFS, BeeGFS, OrangeFS, 9p,
  // AFS, FUSE) a chunk read around each record moves bytes no read asked for
  // over the link: 672 MB for 220 MB of images read, and nearly the whole
  // file for a rank that reads a part of the records. There, kFill only
  // once told (Reader::ExpectShare; lmdbloader.DataLoader tells it from its
  // sampler) that this machine reads at least half of the records in an
  // epoch, or reads them chunk by chunk (LocalitySampler), and only where
  // the records average 32 KiB or less: the chunk's other records are then
  // read too, and a whole epoch of 2 KiB records over an emulated 1 ms link
  // read 4.6-5.3x faster filled than exact (records of 60-160 KB, already
  // large requests, read faster exact: 1.27x with 8 workers). Told a smaller
  // share, it reads exactly, except that records of 32 KiB or less are read
  // with the 128 KiB around them into the page cache (not this process's
  // memory) where the link, measured then (ReaderStats::link_*), moves the
  // whole file faster than the share's records take a request each: a third
  // of 2 KiB records read 1.8x faster than py-lmdb with readahead over a
  // 1 ms link, and exactly behind a 117 MB/s one (io/link_probe.h).
  kAuto,
  // The first read touching a 2 MiB-aligned chunk of the file reads the whole
  // chunk, which the kernel keeps as one 2 MiB folio. A cold first epoch then
  // reads the file in large sequential requests (2 KiB records: about 3x the
  // device's 4 KiB random-read IOPS) and leaves the cache a sequential read
  // would (large folios; reading exactly the records leaves 4 KiB ones).
  // The chunk passes through a mapping of the file for a moment: up to 2 MiB per
  // reading thread counts against the budget while it is read.
  kFill,
  // Reads only the records' bytes.
  kExact,
  // kExact, then drops the pages read from the page cache (corpora bigger
  // than RAM: an epoch does not evict everything else on the machine).
  kDrop,
};

// Whether reads check the XXH3-64 checksum that corpora written by
// `lmdbloader convert` / CorpusWriter carry per record (plain LMDB files have
// none to check).
enum class ChecksumPolicy {
  // Every read and every view is checked; a mismatch is Corruption naming the
  // record and the file. Costs one hash over the bytes read: about 26 GB/s
  // with AVX2, 9 GB/s without (docs/MEASURED.md).
  kEveryRead,
  // Each record is checked the first time it is read, by this reader or by a
  // process forked from it after the open (DataLoader workers forked from the
  // process that opened it share one record of what was checked), and the
  // page cache is trusted for later reads of it, as a file system with
  // checksums trusts its cache: later epochs skip the hash. What it gives up:
  // a record whose bytes change on the device after they were checked (the
  // file rewritten in place, the medium decaying between two reads) is no
  // longer caught. Costs one bit per record of memory shared across fork.
  kFirstRead,
  // Nothing is checked.
  kOff,
};

// The smallest rss_budget a Reader accepts (0, unbounded, aside): any record
// count opens under it, the record index paged (IndexResidence).
inline constexpr uint64_t kMinRssBudget = uint64_t{1} << 20;

struct ReaderOptions {
  // Cap, in bytes, on the memory this reader makes its process hold because of
  // the data file: mapped file pages, its record index, its buffers. Measured
  // by the kernel (/proc/self/statm), not by counting bytes handed out.
  // 0 means unbounded (mmap mode then behaves like plain LMDB); otherwise at
  // least kMinRssBudget.
  // Default: 0.
  uint64_t rss_budget = 0;

  // Default: kAuto (pread).
  AccessMode mode = AccessMode::kAuto;

  // false: open without LMDB's lock file (MDB_NOLOCK): no reader table, no
  // MDB_READERS_FULL, nothing written next to the data. Only correct when no
  // writer touches the database while it is read.
  // true: use the lock file and hold one read transaction for the reader's
  // life, so a concurrent writer cannot reuse the pages the index points to.
  // Default: false.
  bool lock = false;

  // Name of a named database inside the environment; empty for the main one.
  // Default: "" (main database).
  std::string db_name;

  // Where the record index is loaded from and saved to, so that later opens
  // (other worker processes, later jobs) skip the walk:
  //   ""      load beside the data file (lmdbloader.idx, written by the
  //           converter), else from the cache directory ($LMDBLOADER_INDEX_DIR,
  //           $XDG_CACHE_HOME/lmdbloader or ~/.cache/lmdbloader); save a built
  //           index to the cache directory. Never writes into the data's
  //           directory;
  //   "none"  never saved or loaded;
  //   a path  that directory, for both.
  // A saved index is checked (its checksum, and the data file's device,
  // inode, size, mtime and LMDB's last transaction id) and rebuilt when
  // damaged or stale.
  // Default: "".
  std::string index_dir;

  // A set of files (a folder of LMDB files, a glob, a list): a file that
  // does not open as an LMDB is left out and counted in stats() instead of
  // failing the open. Default: false.
  bool skip_bad_files = false;

  // Where the record index lives (see IndexResidence; the option index_mode).
  // Default: kAuto.
  IndexResidence index_residence = IndexResidence::kAuto;

  // Which reads check the records' checksums (see ChecksumPolicy).
  // Default: kEveryRead.
  ChecksumPolicy verify_checksums = ChecksumPolicy::kEveryRead;

  // pread mode: how batches of reads are issued, and how many may be in
  // flight at once. The reads land directly in the caller's buffers, so no
  // buffer of the library is in flight. stats() reports the engine chosen.
  // Default: kAuto (io_uring, else threads), 64.
  IoEngine io_engine = IoEngine::kAuto;
  uint32_t queue_depth = 64;

  // What reads leave in the page cache. Default: kAuto. In mmap mode the
  // policy applies to batches (ReadBatch, ViewBatch, Prefetch: chunk fill or
  // POSIX_FADV_WILLNEED before the records are touched), and kDrop acts as kExact,
  // since a view may outlive the read. There a touch maps the whole folio
  // around it: after a fill, 2 MiB of RSS per record touched (with one
  // fault), which the governor releases at the next read.
  CachePolicy cache_policy = CachePolicy::kAuto;

  // mmap mode: size of the windows the governor releases, least recently used
  // first. Smaller windows release more precisely, larger ones with fewer
  // madvise calls. Default: 64 MiB.
  uint64_t mmap_window = 64ull << 20;

  // mmap mode: replace the mapping by a fresh one after this many bytes were
  // read (0: never). Live views keep the mapping they point into.
  // Default: 0.
  uint64_t remap_every = 0;
};

// Parses "123", "64KiB", "256MiB", "1GiB", "1.5GB", "10k" into bytes.
// Binary suffixes (KiB, MiB, GiB, TiB; K, M, G, T) mean powers of 1024, decimal
// ones (kB, MB, GB, TB) powers of 1000. Returns InvalidArgument otherwise.
Status ParseByteSize(std::string_view text, uint64_t* bytes);

// Parses "auto", "pread" or "mmap".
Status ParseAccessMode(std::string_view text, AccessMode* mode);
const char* AccessModeName(AccessMode mode);

// Parses "auto", "io_uring", "threads" or "sync".
Status ParseIoEngine(std::string_view text, IoEngine* engine);
const char* IoEngineName(IoEngine engine);
// Parses "auto", "resident" or "paged".
Status ParseIndexResidence(std::string_view text, IndexResidence* residence);
const char* IndexResidenceName(IndexResidence residence);
// Parses "auto", "fill", "exact" or "drop".
Status ParseCachePolicy(std::string_view text, CachePolicy* policy);
const char* CachePolicyName(CachePolicy policy);

// Checks the fields that can be wrong on their own (window size, mode).
Status ValidateOptions(const ReaderOptions& options);

// The options by name: the one list of what the command line
// (`--rss-budget 64MiB`) and Python (`rss_budget="64MiB"`) accept. Each
// option's name, default and check are written once, in options.cc; the
// fronts add none of their own and pass values through as text.
// ConvertOptionList (convert.h) describes the converter's the same way.
struct OptionInfo {
  const char* name;     // Python's keyword; the command's flag is --name, '_' written '-'
  const char* kind;     // how a front passes a value: bytes, bool, int, choice, text or checksums
  std::string values;   // what it accepts, as help and errors say it (choices from their enum's table)
  const char* help;
};
const std::vector<OptionInfo>& ReaderOptionList();

// Sets option `name` from its text form ("64MiB", "true", "mmap", "once").
// InvalidArgument naming the option and what it accepts; for an unknown
// name, naming every known one.
Status SetReaderOption(std::string_view name, std::string_view value, ReaderOptions* options);

// Option `name`'s value as SetReaderOption reads it ("" for an unknown name).
std::string ReaderOptionValue(const ReaderOptions& options, std::string_view name);

// What the environment sets before any option is given: LMDBLOADER_RSS_BUDGET,
// when set and not empty, is the budget. InvalidArgument naming the variable
// when it does not parse or is below the floor (kMinRssBudget).
Status ReaderOptionsFromEnvironment(ReaderOptions* options);

// Parses "true"/"false" (also "1"/"0", "yes"/"no").
Status ParseBool(std::string_view name, std::string_view text, bool* value);
// Parses "true" (kEveryRead), "once" (kFirstRead) or "false" (kOff).
Status ParseChecksumPolicy(std::string_view text, ChecksumPolicy* policy);
const char* ChecksumPolicyName(ChecksumPolicy policy);

}  // namespace lmdbloader

#endif  // LMDBLOADER_OPTIONS_H_
