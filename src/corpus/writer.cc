#include "lmdbloader/writer.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/checksum.h"
#include "corpus/corpus_format.h"
#include "lmdb/index_builder.h"
#include "lmdb/index_file.h"
#include "lmdb/index_writer.h"
#include "lmdb/lmdb_env.h"

namespace lmdbloader {

namespace fs = std::filesystem;

namespace {

// Tests stop the writer at a named point (LMDBLOADER_TEST_KILL_AT) to check
// what a kill there leaves behind.
void KillPoint(const char* name) {
  const char* at = std::getenv("LMDBLOADER_TEST_KILL_AT");
  if (at && std::strcmp(at, name) == 0) ::raise(SIGKILL);
}

// Removes `<target>.tmp-<pid>` and `<target>.old-<pid>` left by writers that
// were killed: their process no longer exists.
void RemoveLeftovers(const std::string& target) {
  std::error_code ec;
  fs::path t(target);
  fs::path dir = t.parent_path().empty() ? fs::path(".") : t.parent_path();
  const std::string base = t.filename().string();
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    for (const char* tag : {".tmp-", ".old-"}) {
      const std::string prefix = base + tag;
      if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string digits = name.substr(prefix.size());
      if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(digits));
      if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
    }
  }
}

// The LMDB handles of the corpus being written.
struct WriterEnv {
  MDB_env* env = nullptr;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  uint64_t map_size = 1ull << 30;
  ~WriterEnv() {
    if (txn) mdb_txn_abort(txn);
    if (env) mdb_env_close(env);
  }
};

}  // namespace

struct CorpusWriter::Rep {
  // Removes the temporary directory unless Finish() succeeded.
  ~Rep();
  Status Put(std::string_view key, std::string_view value, bool append);
  Status Commit();
  Status Begin();
  Status SwapIntoPlace();

  std::string target_, temp_;
  WriterOptions options_;
  std::unique_ptr<WriterEnv> env_;
  uint64_t count_ = 0, bytes_ = 0, txn_bytes_ = 0;
  std::string names_;
  std::string checksums_;  // XXH3-64 of each record, little-endian
  std::vector<uint64_t> name_ends_;
  std::map<std::string, uint64_t> name_seen_;  // name -> record
  std::map<std::string, std::vector<double>> columns_;
  bool finished_ = false;
};

Status CorpusWriter::Create(const std::string& target, const WriterOptions& options,
                            std::unique_ptr<CorpusWriter>* out) {
  if (target.empty()) return Status::InvalidArgument("empty output path");
  std::error_code ec;
  if (fs::exists(target, ec) && !options.overwrite)
    return Status::InvalidArgument("output " + target + " exists (pass --overwrite to replace it)");
  auto w = std::make_unique<Rep>();
  w->target_ = target;
  while (w->target_.size() > 1 && w->target_.back() == '/') w->target_.pop_back();
  w->temp_ = w->target_ + ".tmp-" + std::to_string(::getpid());
  w->options_ = options;
  RemoveLeftovers(w->target_);
  fs::remove_all(w->temp_, ec);
  fs::path parent = fs::path(w->target_).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    return Status::IOError("output directory " + parent.string() + " does not exist", ENOENT);
  if (::mkdir(w->temp_.c_str(), 0755) != 0) return Status::FromErrno(errno, "mkdir", w->temp_);
  w->env_ = std::make_unique<WriterEnv>();
  int rc = mdb_env_create(&w->env_->env);
  if (rc == MDB_SUCCESS) rc = mdb_env_set_mapsize(w->env_->env, w->env_->map_size);
  // One writer, nothing reads until the rename: no lock file, no sync per
  // commit (Finish syncs once).
  if (rc == MDB_SUCCESS) rc = mdb_env_open(w->env_->env, w->temp_.c_str(), MDB_NOLOCK | MDB_NOSYNC, 0644);
  if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_env_open", w->temp_);
  LMDBLOADER_RETURN_IF_ERROR(w->Begin());
  out->reset(new CorpusWriter(std::move(w)));
  return Status::OK();
}

CorpusWriter::CorpusWriter(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}
CorpusWriter::~CorpusWriter() = default;
uint64_t CorpusWriter::size() const { return rep_->count_; }
uint64_t CorpusWriter::bytes() const { return rep_->bytes_; }

CorpusWriter::Rep::~Rep() {
  env_.reset();
  if (!finished_ && !temp_.empty()) {
    std::error_code ec;
    fs::remove_all(temp_, ec);
  }
}

namespace {

// liblmdb reports a short write as EIO (mdb_page_flush), and a full file
// system makes short writes: when the file system holding `path` has less
// free space than was being written (plus a margin), say ENOSPC.
Status LmdbWriteFailure(int rc, const char* call, const std::string& path, uint64_t writing) {
  if (rc == EIO) {
    struct statvfs fs;
    if (::statvfs(path.c_str(), &fs) == 0) {
      const uint64_t free = static_cast<uint64_t>(::geteuid() == 0 ? fs.f_bfree : fs.f_bavail) * fs.f_frsize;
      if (free < writing + (1u << 20))
        return Status::IOError(std::string(call) + " " + path + ": " + std::strerror(ENOSPC) + " (" +
                                   std::to_string(free) + " bytes left on its file system; LMDB reports the "
                                   "short write as an I/O error)",
                               ENOSPC);
    }
  }
  return Status::FromLmdb(rc, call, path);
}

}  // namespace

Status CorpusWriter::Rep::Begin() {
  int rc = mdb_txn_begin(env_->env, nullptr, 0, &env_->txn);
  if (rc == MDB_SUCCESS) rc = mdb_dbi_open(env_->txn, nullptr, 0, &env_->dbi);
  if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_txn_begin", temp_);
  txn_bytes_ = 0;
  return Status::OK();
}

Status CorpusWriter::Rep::Commit() {
  MDB_txn* txn = env_->txn;
  env_->txn = nullptr;
  int rc = mdb_txn_commit(txn);
  if (rc != MDB_SUCCESS) return LmdbWriteFailure(rc, "mdb_txn_commit", temp_, txn_bytes_);
  return Status::OK();
}

Status CorpusWriter::Rep::Put(std::string_view key, std::string_view value, bool append) {
  // Grow the map before a put could fill it: LMDB answers MDB_MAP_FULL
  // only after the transaction is lost. The estimate is deliberately
  // generous (values, plus page overhead, plus the tree).
  MDB_envinfo info;
  mdb_env_info(env_->env, &info);
  MDB_stat st;
  mdb_env_stat(env_->env, &st);
  uint64_t used = (static_cast<uint64_t>(info.me_last_pgno) + 1) * st.ms_psize;
  uint64_t need = used + (txn_bytes_ + value.size()) * 5 / 4 + (16u << 20);
  if (need > env_->map_size || txn_bytes_ >= options_.txn_bytes) {
    LMDBLOADER_RETURN_IF_ERROR(Commit());
    while (need > env_->map_size) env_->map_size *= 2;
    int rc = mdb_env_set_mapsize(env_->env, env_->map_size);
    if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_env_set_mapsize", temp_);
    LMDBLOADER_RETURN_IF_ERROR(Begin());
  }
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{value.size(), const_cast<char*>(value.data())};
  int rc = mdb_put(env_->txn, env_->dbi, &k, &v, append ? MDB_APPEND : 0);
  if (rc != MDB_SUCCESS) return LmdbWriteFailure(rc, "mdb_put", temp_, txn_bytes_);
  txn_bytes_ += value.size() + key.size() + 16;
  return Status::OK();
}

Status CorpusWriter::Add(std::string_view name, std::string_view record,
                         const std::map<std::string, double>& columns) {
  // Everything is checked before anything changes: a refused record leaves
  // the writer as it was, so a caller may skip it and go on.
  if (record.size() > kMaxRecordBytes)
    return Status::InvalidArgument("record " + PrintableName(name) + " is " + std::to_string(record.size()) +
                                   " bytes; a record holds at most " + std::to_string(kMaxRecordBytes) +
                                   " bytes (LMDB's largest value)");
  // Names of a corpus keyed by record numbers are UTF-8 text (its readers
  // hand them out as str); a corpus keyed by names keeps any bytes.
  if (rep_->options_.keys == CorpusKeys::kRecordNumbers && !IsUtf8(name))
    return Status::InvalidArgument("record " + std::to_string(rep_->count_) + ": its name " + PrintableName(name) +
                                   " is not UTF-8 text (names of a corpus keyed by record numbers are text; "
                                   "one keyed by names keeps bytes)");
  if (auto seen = rep_->name_seen_.find(std::string(name)); seen != rep_->name_seen_.end())
    return Status::InvalidArgument("duplicate name " + PrintableName(name) + " (records " +
                                   std::to_string(seen->second) + " and " + std::to_string(rep_->count_) + ")");
  if (rep_->count_ > 0 && columns.size() != rep_->columns_.size())
    return Status::InvalidArgument("record " + PrintableName(name) + " has " + std::to_string(columns.size()) +
                                   " columns, earlier records " + std::to_string(rep_->columns_.size()));
  if (rep_->count_ > 0) {
    for (const auto& [column, value] : columns)
      if (rep_->columns_.find(column) == rep_->columns_.end())
        return Status::InvalidArgument("record " + PrintableName(name) + " has column '" + column +
                                       "' that earlier records lack");
  }
  LMDBLOADER_RETURN_IF_ERROR(rep_->Put(RecordKey(rep_->count_), record, /*append=*/true));
  rep_->name_seen_.emplace(std::string(name), rep_->count_);
  for (const auto& [column, value] : columns) rep_->columns_[column].push_back(value);
  const uint64_t sum = Checksum(record);
  rep_->checksums_.append(reinterpret_cast<const char*>(&sum), 8);  // little-endian
  rep_->names_.append(name.data(), name.size());
  rep_->name_ends_.push_back(rep_->names_.size());
  ++rep_->count_;
  rep_->bytes_ += record.size();
  return Status::OK();
}

Status CorpusWriter::Finish(const std::string& manifest_json) {
  nlohmann::json manifest = nlohmann::json::parse(manifest_json, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object())
    return Status::InvalidArgument("manifest is not a JSON object");
  manifest["format"] = kCorpusFormatName;
  manifest["version"] = kCorpusFormatVersion;
  manifest["records"] = rep_->count_;
  if (rep_->options_.keys == CorpusKeys::kNames) manifest["keys"] = kCorpusKeysNames;
  // Every metadata value's checksum goes into the manifest, and the
  // manifest's own into kManifestChecksumKey: a reader checks each before use.
  nlohmann::json sums = nlohmann::json::object();
  auto put_meta = [&](std::string_view key, const std::string& bytes) {
    sums[std::string(key.substr(kMetaPrefix.size()))] = ChecksumHex(Checksum(bytes));
    return rep_->Put(key, bytes, false);
  };
  nlohmann::json column_types = nlohmann::json::object();
  for (const auto& [column, values] : rep_->columns_) {
    bool integral = true;
    for (double v : values) integral = integral && std::floor(v) == v && std::fabs(v) < 9.0e15;
    std::string bytes(values.size() * 8, '\0');
    for (size_t i = 0; i < values.size(); ++i) {
      if (integral) {
        int64_t x = static_cast<int64_t>(values[i]);
        std::memcpy(&bytes[i * 8], &x, 8);  // little-endian on the platforms we build for
      } else {
        std::memcpy(&bytes[i * 8], &values[i], 8);
      }
    }
    column_types[column] = {{"dtype", integral ? "<i8" : "<f8"}};
    LMDBLOADER_RETURN_IF_ERROR(put_meta(std::string(kColumnPrefix) + column, bytes));
  }
  manifest["columns"] = column_types;
  LMDBLOADER_RETURN_IF_ERROR(put_meta(kNamesBlobKey, rep_->names_));
  std::string offsets((rep_->count_ + 1) * 8, '\0');
  for (uint64_t i = 0; i < rep_->count_; ++i) std::memcpy(&offsets[(i + 1) * 8], &rep_->name_ends_[i], 8);
  LMDBLOADER_RETURN_IF_ERROR(put_meta(kNamesOffsetsKey, offsets));
  LMDBLOADER_RETURN_IF_ERROR(put_meta(kChecksumsKey, rep_->checksums_));
  manifest["checksums"] = {{"algorithm", kChecksumAlgorithm}, {"records", std::string(kChecksumsKey)},
                           {"meta", sums}};
  // Names that are not UTF-8 (file systems allow them) are replaced by U+FFFD here.
  const std::string manifest_bytes = manifest.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  LMDBLOADER_RETURN_IF_ERROR(rep_->Put(kManifestKey, manifest_bytes, false));
  const uint64_t manifest_sum = Checksum(manifest_bytes);
  const std::string manifest_sum_bytes(reinterpret_cast<const char*>(&manifest_sum), 8);
  LMDBLOADER_RETURN_IF_ERROR(rep_->Put(kManifestChecksumKey, manifest_sum_bytes, false));
  LMDBLOADER_RETURN_IF_ERROR(rep_->Commit());
  // LMDB keeps two meta pages and reads the one with the higher transaction
  // id; nothing checks them. One more commit of the same value makes both
  // point to a whole corpus (the pages it frees are never reused: nothing
  // writes after it), so damage that makes a reader pick the other meta page
  // still finds the corpus, not an older, half-written state.
  LMDBLOADER_RETURN_IF_ERROR(rep_->Begin());
  LMDBLOADER_RETURN_IF_ERROR(rep_->Put(kManifestChecksumKey, manifest_sum_bytes, false));
  LMDBLOADER_RETURN_IF_ERROR(rep_->Commit());
  int rc = mdb_env_sync(rep_->env_->env, 1);
  if (rc != MDB_SUCCESS) return LmdbWriteFailure(rc, "mdb_env_sync", rep_->temp_, 0);
  rep_->env_.reset();

  LMDBLOADER_RETURN_IF_ERROR(rep_->SwapIntoPlace());
  rep_->finished_ = true;
  if (rep_->options_.save_index) {
    // Walk once now and save the index beside the corpus (the one place a
    // Reader looks first), so every reader loads it instead of walking. The
    // writer sits below the reader: it walks with the index builder itself,
    // into the file as it goes, with the table of leaf pages that readers
    // under a budget read small records out of.
    DataLocation location;
    std::unique_ptr<LmdbEnv> env;
    std::unique_ptr<IndexWriter> index;
    LeafTable leaves;
    LMDBLOADER_RETURN_IF_ERROR(ResolveLocation(rep_->target_, &location));
    LMDBLOADER_RETURN_IF_ERROR(LmdbEnv::Open(location, false, "", &env));
    LMDBLOADER_RETURN_IF_ERROR(IndexWriter::Create(IndexFileBeside(location, ""), &index));
    LMDBLOADER_RETURN_IF_ERROR(WalkIndex(*env, location, "", kMetaPrefix, index.get(), &leaves));
    index->SetLeaves(leaves);
    LMDBLOADER_RETURN_IF_ERROR(
        index->Finish(env->identity(), "", static_cast<uint16_t>(env->db_flags()), KeysSorted(*env)));
  }
  return Status::OK();
}

Status CorpusWriter::Rep::SwapIntoPlace() {
  // The target path always holds a whole corpus, old or new: with an old
  // one, the two directories trade names in one step (renameat2's
  // RENAME_EXCHANGE), and the old one is removed from the temporary name.
  std::error_code ec;
  const bool replacing = fs::symlink_status(target_, ec).type() != fs::file_type::not_found;
  if (replacing && !options_.overwrite)
    return Status::InvalidArgument("output " + target_ + " appeared while writing (pass --overwrite to replace it)");
  KillPoint("writer-before-swap");
  if (!replacing) {
    if (::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, target_.c_str(), RENAME_NOREPLACE) == 0) return Status::OK();
    if (errno != EINVAL && errno != ENOSYS) return Status::FromErrno(errno, "rename " + temp_ + " to", target_);
    if (::rename(temp_.c_str(), target_.c_str()) != 0) return Status::FromErrno(errno, "rename " + temp_ + " to", target_);
    return Status::OK();
  }
  if (::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) == 0) {
    KillPoint("writer-after-swap");
    fs::remove_all(temp_, ec);  // the old corpus, now under the temporary name
    return Status::OK();
  }
  if (errno != EINVAL && errno != ENOSYS) return Status::FromErrno(errno, "exchange " + temp_ + " with", target_);
  // A file system without RENAME_EXCHANGE: two renames, with a moment
  // between them where the target is absent (the old corpus stays at
  // `.old-<pid>` until the new one is in place).
  const std::string trash = target_ + ".old-" + std::to_string(::getpid());
  if (::rename(target_.c_str(), trash.c_str()) != 0) return Status::FromErrno(errno, "rename", target_);
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    int err = errno;
    ::rename(trash.c_str(), target_.c_str());
    return Status::FromErrno(err, "rename " + temp_ + " to", target_);
  }
  fs::remove_all(trash, ec);
  return Status::OK();
}

}  // namespace lmdbloader
