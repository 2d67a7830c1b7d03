// Reader: opening a database, corpus or shard set (the index loaded, built
// or rebuilt; the budget checked; engines and mappings set up), and reopening
// a process's own handles after fork.
#include "lmdbloader/reader.h"

#include <fcntl.h>
#include <pthread.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <atomic>

#include "io/batch_io.h"
#include "io/file_system.h"
#include "io/open_file.h"
#include "io/residency.h"
#include "lmdb/index_builder.h"
#include "lmdb/index_file.h"
#include "lmdb/index_writer.h"
#include "lmdb/paged_index.h"
#include "corpus/corpus_format.h"
#include "corpus/shard_list.h"
#include "reader/file_set.h"
#include "reader/reader_rep.h"

namespace lmdbloader {

namespace {

// Incremented in every child process by a pthread_atfork handler. A Reader
// whose handles belong to an older generation reopens them before use, which
// costs one relaxed atomic load per read instead of a getpid() system call.
std::atomic<uint64_t> g_fork_generation{0};

void RegisterForkHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork(nullptr, nullptr, [] { g_fork_generation.fetch_add(1); });
  });
}


// The engine `requested` resolves to for data on `fs`: threads where io_uring
// would hand every buffered read to its worker pool (network and FUSE file
// systems; over FUSE 256 cold 110 KB records took 89-132 ms with io_uring,
// 30 ms with threads), saying so in `*why`.
IoEngine EngineFor(IoEngine requested, const FileSystemKind& fs, std::string* why) {
  if (requested != IoEngine::kAuto || !fs.remote) return requested;
  if (why) *why = "the data lies on " + fs.name + ", whose buffered reads io_uring hands to its worker pool";
  return IoEngine::kThreads;
}

}  // namespace

uint64_t Reader::Rep::ForkGeneration() { return g_fork_generation.load(); }

Reader::Reader() : rep_(new Rep) {}

Reader::~Reader() = default;

Status Reader::Rep::IndexPart(LmdbEnv& env, Part* part, const IndexPaths& paths, std::string_view meta_prefix,
                              std::string* index_source) {
  part->index = RecordIndex();
  part->index_file.clear();
  const std::string& where = part->location.data_path;
  // The walk reads a branch page's children together (LmdbFile::ReadWith)
  // through the engine the data is read with: the reader's own once it has
  // one (a file of a set opened later), else one for the walk.
  std::unique_ptr<BatchIo> walk_io;
  // (Not the parent's engine in a child that has not replaced it yet:
  // ReopenIndex walks before ReopenHandles makes this process's own.)
  BatchIo* reads = generation_ == g_fork_generation.load() ? io_.get() : nullptr;
  const IoEngine engine = EngineFor(options_.io_engine, FileSystemOf(where), nullptr);
  std::string unused;
  if (!reads && engine != IoEngine::kSync && BatchIo::Create(engine, options_.queue_depth, &walk_io, &unused).ok())
    reads = walk_io.get();
  struct ReadsUntilReturn {
    LmdbFile& file;
    ~ReadsUntilReturn() { file.ReadWith(nullptr); }
  } until_return{env.file()};
  env.file().ReadWith(reads);
  if (paths.save.empty()) {
    // index_dir="none": nowhere to keep a file, so the index is held.
    LMDBLOADER_RETURN_IF_ERROR(BuildIndex(env, part->location, options_.db_name, meta_prefix, &part->index));
    *index_source = "built";
    return Status::OK();
  }
  // Walked into the saved file as it goes, never held whole (a resident
  // build of 10^8 records held 3.3 GB), then opened as a saved one is.
  std::unique_ptr<IndexWriter> writer;
  Status saved = IndexWriter::Create(paths.save, &writer);
  if (saved.ok()) {
    LeafTable leaves;  // saved with the index, for reads under a paged one (kLeaves)
    LMDBLOADER_RETURN_IF_ERROR(WalkIndex(env, part->location, options_.db_name, meta_prefix, writer.get(), &leaves));
    writer->SetLeaves(leaves);
    saved = writer->Finish(env.identity(), options_.db_name, static_cast<uint16_t>(env.db_flags()), KeysSorted(env));
  }
  // The walk's buffers are freed, but glibc keeps such blocks in the heap
  // (6.7 MiB of RSS after a 5M-record walk): give them back.
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
  if (saved.ok()) {
    Status opened = UseSavedIndex(paths.save, env.identity(), part);
    if (opened.ok()) {
      *index_source = "built (saved to " + paths.save + ")";
      part->index_file.clear();  // walked from the data now, not taken on trust
      return Status::OK();
    }
    saved = opened;
  }
  // The cache directory is read-only, full, or on a file system that lost
  // the file: hold the index, unless the caller asked for it paged.
  if (options_.index_residence == IndexResidence::kPaged)
    return Status::IOError("open " + where + ": index_mode='paged' reads the saved index, which could not be saved: " +
                           saved.message());
  part->index = RecordIndex();
  LMDBLOADER_RETURN_IF_ERROR(BuildIndex(env, part->location, options_.db_name, meta_prefix, &part->index));
  *index_source = "built (not saved: " + saved.message() + ")";
  return Status::OK();
}

Status Reader::Rep::UseSavedIndex(const std::string& path, const FileIdentity& identity, Part* part) {
  std::unique_ptr<PagedIndex> paged;
  LMDBLOADER_RETURN_IF_ERROR(PagedIndex::Open(path, identity, options_.db_name, index_cache_bytes_, &paged));
  const IndexHeader& h = paged->header();
  // What the resident form would hold: 12 bytes a record, and the keys with
  // their ends when stored.
  // A corpus's record checksums go with it (8 bytes a record).
  const uint64_t resident = h.records * 12 + (h.sequential_keys() ? 0 : h.records * 8 + h.blob_bytes) +
                            (paged->meta().count(std::string(kChecksumsKey)) ? h.records * 8 : 0);
  const bool hold = options_.index_residence == IndexResidence::kResident ||
                    (options_.index_residence == IndexResidence::kAuto && resident <= resident_index_cap_);
  if (hold) {
    LMDBLOADER_RETURN_IF_ERROR(paged->LoadResident(&part->index));
  } else {
    part->index = RecordIndex();
    part->index.UsePaged(std::shared_ptr<PagedIndex>(std::move(paged)));
    LMDBLOADER_RETURN_IF_ERROR(HoldLeaves(part));
  }
  part->index_file = "loaded from " + path;
  return Status::OK();
}

Status Reader::Rep::OpenPart(const std::string& path, Part* part, std::string* index_source) {
  LMDBLOADER_RETURN_IF_ERROR(ResolveDataLocation(path, &part->location));
  std::unique_ptr<LmdbEnv> env;
  LMDBLOADER_RETURN_IF_ERROR(LmdbEnv::Open(part->location, options_.lock, options_.db_name, &env));
  IndexPaths paths = IndexFilePaths(part->location, options_, env->identity());
  // A small file of a set is walked each time it is opened: its walk reads
  // a few pages, as loading a saved index would, where saving one costs a
  // file and its fsync (4.3 ms a file: an epoch over 10^6 one-record files
  // would write 10^6 index files, 16 GB, into the cache directory). Unless
  // asked for a paged index, which lives in such a file.
  if (file_set_ && options_.index_residence != IndexResidence::kPaged && env->identity().size <= kWalkedFileBytes)
    paths = IndexPaths();
  Status loaded = Status::NotFound("");
  for (const std::string& candidate : paths.load) {
    loaded = UseSavedIndex(candidate, env->identity(), part);
    if (loaded.ok()) {
      *index_source = part->index_file;
      break;
    }
  }
  // A damaged, stale or older saved index is rebuilt, never trusted.
  if (!loaded.ok()) LMDBLOADER_RETURN_IF_ERROR(IndexPart(*env, part, paths, kMetaPrefix, index_source));
  LMDBLOADER_RETURN_IF_ERROR(OpenDataFile(part->location.data_path, part->index.identity, !options_.lock, &part->fd));
  bool corpus = false;
  Status meta = LoadCorpusMeta(*part, &corpus);
  if (!meta.ok() && !part->index_file.empty()) {
    // A saved index that passes its own checks (checksum, identity, bounds)
    // can still point at the wrong bytes (forged, or written by a buggy
    // tool): the data decides. Walk the data file; if its own metadata then
    // reads, the index was wrong, and is not used.
    const std::string wrong = "the saved index " + part->index_file.substr(std::string("loaded from ").size()) +
                              " disagrees with the data (" + meta.message() + "), not used";
    std::string rebuilt;
    LMDBLOADER_RETURN_IF_ERROR(IndexPart(*env, part, paths, kMetaPrefix, &rebuilt));
    *index_source = "built: " + wrong;
    meta = LoadCorpusMeta(*part, &corpus);
  }
  LMDBLOADER_RETURN_IF_ERROR(meta);
  if (!corpus && !part->index.meta().empty()) {
    // Keys that merely start with the metadata prefix in a plain LMDB are
    // records like any other: walk again, keeping them.
    LMDBLOADER_RETURN_IF_ERROR(IndexPart(*env, part, paths, "", index_source));
  }
  if (options_.lock) {
    part->env = std::move(env);
  } else if (!corpus && !file_set_) {
    // Corpora are written whole and renamed into place, never changed: only
    // a plain LMDB can have a writer. 2 pages, read by two loads a check.
    // (A file set's files are opened and closed as they are read: each is
    // the state found when it was opened.)
    part->watched = true;
    if (!Mapping::Map(part->fd, 2ull * part->index.identity.page_size, part->location.data_path, &part->meta_pages)
             .ok())
      part->meta_pages.reset();
  }
  return Status::OK();
}

Status Reader::Open(const std::string& path, const ReaderOptions& options,
                    std::unique_ptr<Reader>* out) {
  LMDBLOADER_RETURN_IF_ERROR(ValidateOptions(options));
  RegisterForkHandler();
  std::unique_ptr<Reader> r(new Reader());
  // A folder (or glob over one) whose saved listing (set_listing.h) still
  // describes it opens without listing the folder or reading any member.
  SetSource source;
  bool candidate = false, listed = false, is_set = false;
  DescribeSetSource(path, &source, &candidate);
  if (candidate && !source.folder.empty())
    LMDBLOADER_RETURN_IF_ERROR(r->rep_->OpenSameListed(path, {}, source, options, &listed));
  std::vector<std::string> files;
  if (!listed) LMDBLOADER_RETURN_IF_ERROR(ListFileSet(path, &is_set, &files));
  if (is_set) {
    if (candidate && source.folder.empty())  // a glob over folders: its matches, listed now
      LMDBLOADER_RETURN_IF_ERROR(r->rep_->OpenSameListed(path, files, source, options, &listed));
    if (!listed) LMDBLOADER_RETURN_IF_ERROR(r->rep_->OpenFileSet(path, files, options, source));
    // glibc keeps the freed listing's blocks (10^5 paths: 5 MiB of RSS): give them back.
    std::vector<std::string>().swap(files);
#ifdef __GLIBC__
    ::malloc_trim(0);
#endif
  } else if (!listed) {
    LMDBLOADER_RETURN_IF_ERROR(r->rep_->Open(path, options));
  }
  *out = std::move(r);
  return Status::OK();
}

Status Reader::Open(const std::vector<std::string>& paths, const ReaderOptions& options,
                    std::unique_ptr<Reader>* out) {
  LMDBLOADER_RETURN_IF_ERROR(ValidateOptions(options));
  if (paths.empty()) return Status::InvalidArgument("a list of databases to read needs at least one path");
  RegisterForkHandler();
  std::unique_ptr<Reader> r(new Reader());
  std::string name = paths.front() + (paths.size() > 1 ? " and " + std::to_string(paths.size() - 1) + " more" : "");
  SetSource source;  // a list: its paths are its identity
  bool listed = false;
  LMDBLOADER_RETURN_IF_ERROR(r->rep_->OpenSameListed(name, paths, source, options, &listed));
  if (!listed) LMDBLOADER_RETURN_IF_ERROR(r->rep_->OpenFileSet(name, paths, options, source));
  *out = std::move(r);
  return Status::OK();
}

Status Reader::Rep::Open(const std::string& path, const ReaderOptions& options) {
  path_ = path;
  options_ = options;
  mode_ = options.mode == AccessMode::kMmap ? AccessMode::kMmap : AccessMode::kPread;
  generation_ = g_fork_generation.load();

  // A shard set is a directory with a shard list; anything else is one LMDB.
  bool shard_set = false;
  std::vector<ShardEntry> part_paths;
  int64_t listed_total = -1;
  LMDBLOADER_RETURN_IF_ERROR(ReadShardList(path, &shard_set, &part_paths, &listed_total));
  const std::string shard_list = path + "/" + kShardListFile;
  if (!shard_set) part_paths.push_back({path, -1});

  // The record index's share of the budget (IndexResidence): held while it
  // fits a quarter, else read from its file through a cache of an eighth
  // (at most 4 MiB); each part of a shard set its share of both.
  const uint64_t parts = part_paths.size();
  const uint64_t budget = options.rss_budget;
  resident_index_cap_ = (budget ? budget / 4 : uint64_t{256} << 20) / parts;
  index_cache_bytes_ = std::max<uint64_t>(std::min<uint64_t>(budget ? budget / 8 : 4u << 20, 4u << 20) / parts, 4096);
  uint64_t total = 0, index_bytes = 0;
  for (const auto& [part_path, expected] : part_paths) {
    auto part = std::make_unique<Part>();
    part->slot = parts_.size();
    std::string source;
    LMDBLOADER_RETURN_IF_ERROR(OpenPart(part_path, part.get(), &source));
    if (expected >= 0 && part->index.size() != static_cast<uint64_t>(expected))
      return Status::Corruption("open " + part_path + ": shard list says " + std::to_string(expected) +
                                " records, the shard holds " + std::to_string(part->index.size()));
    if (shard_set) {
      if (part->manifest.empty())
        return Status::Corruption("open " + part_path + ": a part listed in " + shard_list +
                                  " is not an lmdbloader corpus");
    }
    if (!parts_.empty() && (part->name_keys == nullptr) != (parts_.front()->name_keys == nullptr))
      return Status::Corruption("open " + part_path + ": the parts listed in " + shard_list +
                                " are not keyed alike (some by names, some by record numbers)");
    if (index_source_.empty()) index_source_ = source;
    any_paged_ = any_paged_ || part->index.paged();
    total += part->index.size();
    index_bytes += part->index.MemoryBytes() + (part->name_keys ? part->name_keys->MemoryBytes() : 0) +
                   part->checksums.size() * 8 +
                   (part->verified ? part->verified->bytes() : 0);
    part_ends_.push_back(total);
    parts_.push_back(std::move(part));
  }
  // The list's total, against what its parts hold (each part's own count,
  // where the list gives one, was checked above).
  if (listed_total >= 0 && static_cast<uint64_t>(listed_total) != total)
    return Status::Corruption("read " + shard_list + ": it says " + std::to_string(listed_total) +
                              " records in all, its parts hold " + std::to_string(total));
  size_ = total;
  budget_ = MemoryBudget(options.rss_budget, index_bytes);
  LMDBLOADER_RETURN_IF_ERROR(budget_.CheckIndexFits(path, total));

  manifest_ = parts_.front()->manifest;

  uint64_t data_bytes = 0;
  for (const auto& p : parts_) data_bytes += p->index.identity.size;
  LMDBLOADER_RETURN_IF_ERROR(ChooseReadPath(parts_.front()->location.data_path, data_bytes));
  if (cache_policy_ == CachePolicy::kFill)
    for (auto& p : parts_)
      LMDBLOADER_RETURN_IF_ERROR(ChunkFiller::Create(p->fd, p->index.identity.size, p->location.data_path, &p->filler));

  if (mode_ == AccessMode::kMmap) {
    governor_ = std::make_unique<ResidencyGovernor>(budget_.MappedAllowance(), options.mmap_window);
    LMDBLOADER_RETURN_IF_ERROR(governor_->Start());
    for (size_t i = 0; i < parts_.size(); ++i) {
      Part& p = *parts_[i];
      LMDBLOADER_RETURN_IF_ERROR(Mapping::Map(p.fd, p.index.identity.size, p.location.data_path, &p.map));
      governor_->Attach(i, p.map->data(), p.map->size());
    }
  }
  return Status::OK();
}

Status Reader::Rep::ChooseReadPath(const std::string& data_path, uint64_t data_bytes) {
  // What lies under the data decides (io/file_system.h): on network and FUSE
  // file systems a read request is a round trip and bytes cross a link.
  const FileSystemKind fs = FileSystemOf(data_path);
  file_system_ = fs.name;
  std::string why_threads;
  io_engine_ = EngineFor(options_.io_engine, fs, &why_threads);
  if (mode_ == AccessMode::kPread) {
    LMDBLOADER_RETURN_IF_ERROR(BatchIo::Create(io_engine_, options_.queue_depth, &io_, &io_fallback_));
    if (!why_threads.empty()) io_fallback_ = why_threads;
  }
  remote_ = fs.remote;
  data_bytes_ = data_bytes;
  cache_room_ = data_bytes <= PageCacheRoom() / 2;
  fill_room_ = budget_.RoomForChunkFills() && cache_room_;
  cache_policy_ = options_.cache_policy;
  if (cache_policy_ == CachePolicy::kAuto) {
    // Fill only what the page cache can keep (a corpus bigger than RAM would
    // evict each chunk before its other records are read), and never where
    // bytes cross a link: a rank that reads a part of the records would move
    // nearly the whole file.
    cache_policy_ = !fs.remote && fill_room_ ? CachePolicy::kFill : CachePolicy::kExact;
  }
  // Exact reads over a link: no readahead around them either (the kernel
  // read 1.20x the bytes of 200 random 60-160 KB records over FUSE, 0.875x
  // with POSIX_FADV_RANDOM on the descriptor).
  read_random_ = fs.remote && cache_policy_ == CachePolicy::kExact;
  for (auto& p : parts_)
    if (p) AdviseReads(p->fd);  // a file set has none open yet
  return Status::OK();
}

void Reader::Rep::AdviseReads(int fd) const {
  if (read_random_ && fd >= 0) (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
}

Status Reader::ExpectShare(double share, bool in_chunks) {
  if (!(share >= 0.0 && share <= 1.0))
    return Status::InvalidArgument("the expected share of the records must lie in [0, 1]; got " + std::to_string(share));
  if (rep_->options_.cache_policy != CachePolicy::kAuto || !rep_->remote_ || rep_->mode_ != AccessMode::kPread)
    return Status::OK();
  // Where the chunk's other records will be read too, reading them with it
  // moves no byte that nobody asked for, and saves a round trip each: worth
  // it for small records only. Records of 60-160 KB are requests that large
  // already, and their whole epoch over an emulated 1 ms link read slower
  // filled than exact with 8 workers (4,845 against 6,163 records/s).
  const bool small_records = rep_->size_ > 0 && rep_->data_bytes_ / rep_->size_ <= kReadAroundWindow / 4;
  const bool fill = rep_->fill_room_ && small_records && (in_chunks || share >= 0.5);
  const CachePolicy want = fill ? CachePolicy::kFill : CachePolicy::kExact;
  if (want != rep_->cache_policy_) {
    // A file set's parts come and go as other threads read (Forget).
    std::unique_lock<std::mutex> parts_lock(rep_->parts_mu_, std::defer_lock);
    if (rep_->file_set_) parts_lock.lock();
    for (auto& p : rep_->parts_) {
      if (!p || p->fd < 0) continue;  // a file of a set not open yet: its open follows the policy
      if (fill) {
        LMDBLOADER_RETURN_IF_ERROR(
            ChunkFiller::Create(p->fd, p->index.identity.size, p->location.data_path, &p->filler));
        (void)::posix_fadvise(p->fd, 0, 0, POSIX_FADV_NORMAL);
      } else {
        p->filler.reset();
      }
    }
    rep_->cache_policy_ = want;
    rep_->read_random_ = !fill;
    for (auto& p : rep_->parts_)
      if (p) rep_->AdviseReads(p->fd);
  }
  // A part of the records, read exactly, is capped by the requests in
  // flight; where the link moves the whole file faster than that (measured:
  // io/link_probe.h), each small record's read brings its window into the
  // page cache (not this process's memory), where the part's other records
  // in it wait. Bytes nobody asks for cross the link only where they cost
  // less than the round trips they save.
  rep_->read_around_ = false;
  if (!fill && small_records && rep_->cache_room_ && share > 0 && !rep_->parts_.empty()) {
    if (!rep_->link_.measured) rep_->link_ = MeasureLink(rep_->FirstDataPath(), rep_->io_.get());
    rep_->read_around_ = ReadAroundPays(rep_->link_, rep_->data_bytes_, share * static_cast<double>(rep_->size_));
  }
  return Status::OK();
}

Status Reader::Rep::EnsureProcess() {
  if (generation_ == g_fork_generation.load(std::memory_order_relaxed)) return Status::OK();
  std::lock_guard<std::mutex> lock(reopen_mu_);
  if (generation_ == g_fork_generation.load()) return Status::OK();
  LMDBLOADER_RETURN_IF_ERROR(ReopenHandles());
  generation_ = g_fork_generation.load();
  return Status::OK();
}

Status Reader::Rep::ReopenHandles() {
  // What a thread remembers of this reader's lookups belongs to the handles
  // before (LocateAll); an index rebuilt below may differ.
  index_epoch_.fetch_add(1);
  if (file_set_) return ReopenFileSet();
  for (size_t i = 0; i < parts_.size(); ++i) {
    Part& p = *parts_[i];
    if (p.env) {
      // The parent's environment must not be touched here, not even closed
      // (mdb_env_close would act on the parent's lock-file state): LmdbEnv
      // lets go of it in a child without calling liblmdb. Open this
      // process's own snapshot.
      p.env.reset();
      LMDBLOADER_RETURN_IF_ERROR(LmdbEnv::Open(p.location, true, options_.db_name, &p.env));
      if (!(p.env->identity() == p.index.identity)) {
        RecordIndex fresh;
        LMDBLOADER_RETURN_IF_ERROR(BuildIndex(*p.env, p.location, options_.db_name, kMetaPrefix, &fresh));
        if (fresh.size() != p.index.size())
          return Status::Corruption("reopen " + p.location.data_path +
                                    " after fork: the database changed its record count");
        p.index = std::move(fresh);
        // A writer changed the database: what was checked before may not
        // be what this process reads. Start a record of its own (unmapping
        // the shared one here leaves the parent's as it is).
        if (p.verified) LMDBLOADER_RETURN_IF_ERROR(VerifiedRecords::Create(p.index.size(), &p.verified));
      }
    }
    LMDBLOADER_RETURN_IF_ERROR(ReopenIndex(&p));
    // The filler's mapping stays valid in the child; it needs no handle.
    int fd = -1;
    LMDBLOADER_RETURN_IF_ERROR(OpenDataFile(p.location.data_path, p.index.identity, !options_.lock, &fd));
    AdviseReads(fd);
    // The inherited copy is closed only while it is still the data file: a
    // caller that closed descriptors it does not own may have reused the number.
    struct stat st;
    if (::fstat(p.fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == p.index.identity.device &&
        static_cast<uint64_t>(st.st_ino) == p.index.identity.inode)
      ::close(p.fd);
    p.fd = fd;
    if (mode_ == AccessMode::kMmap) {
      std::shared_ptr<Mapping> map;
      LMDBLOADER_RETURN_IF_ERROR(Mapping::Map(p.fd, p.index.identity.size, p.location.data_path, &map));
      std::atomic_store(&p.map, map);
      governor_->Attach(i, map->data(), map->size());
    }
  }
  if (governor_) LMDBLOADER_RETURN_IF_ERROR(governor_->Start());
  if (io_) {
    // The parent's rings and threads are not this process's: abandon them
    // (destroying would join threads that do not exist here).
    (void)io_.release();
    LMDBLOADER_RETURN_IF_ERROR(BatchIo::Create(io_engine_, options_.queue_depth, &io_, &io_fallback_));
  }
  return Status::OK();
}

Status Reader::Rep::ReopenIndex(Part* part) {
  Status reopened = part->index.ReopenFile();
  if (!reopened.IsNotFound()) return reopened;
  if (file_set_) {
    ClosePart(part);
    return Status::OK();
  }
  // The data are intact: walk them again, into a saved index of this
  // process's own (or held), as opening does when no saved one is found.
  const uint64_t records = part->index.size();
  std::unique_ptr<LmdbEnv> env;
  LMDBLOADER_RETURN_IF_ERROR(LmdbEnv::Open(part->location, false, options_.db_name, &env));
  std::string source;
  LMDBLOADER_RETURN_IF_ERROR(IndexPart(*env, part, IndexFilePaths(part->location, options_, env->identity()),
                                       kMetaPrefix, &source));
  if (part->index.size() != records)
    return Status::Corruption("reopen " + part->location.data_path + " after fork: " + reopened.message() +
                              ", and the database now holds " +
                              std::to_string(part->index.size()) + " records, not " + std::to_string(records));
  return Status::OK();
}

}  // namespace lmdbloader
