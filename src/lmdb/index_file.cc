#include "lmdb/index_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/checksum.h"
#include "lmdbloader/atomic_write.h"
#include "io/open_file.h"

namespace lmdbloader {

namespace {

constexpr char kMagic[8] = {'L', 'M', 'D', 'B', 'L', 'I', 'D', 'X'};
// Version 3 holds the meta page's checksum in the identity and ends with the
// XXH3-64 of every byte before it: a flipped bit in a saved index makes it
// rebuilt, never trusted.
constexpr uint32_t kVersion = 3;

std::string HexOf(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status MakeDirs(const std::string& dir) {
  if (dir.empty()) return Status::OK();
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) return Status::OK();
  LMDBLOADER_RETURN_IF_ERROR(MakeDirs(DirName(dir)));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Status::FromErrno(errno, "mkdir", dir);
  return Status::OK();
}

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void PutBytes(std::string* out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out->append(s);
}

// Bounds-checked reader over the file bytes.
class Cursor {
 public:
  explicit Cursor(const std::string& b) : b_(b) {}
  template <typename T>
  bool Get(T* v) {
    if (b_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetBytes(std::string* s, uint64_t n) {
    if (b_.size() - pos_ < n) return false;
    s->assign(b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool GetString(std::string* s) {
    uint64_t n = 0;
    return Get(&n) && GetBytes(s, n);
  }
  template <typename T>
  bool GetArray(std::vector<T>* v, uint64_t n) {
    if ((b_.size() - pos_) / sizeof(T) < n) return false;
    v->resize(n);
    if (n) std::memcpy(v->data(), b_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return true;
  }
  bool done() const { return pos_ == b_.size(); }

 private:
  const std::string& b_;
  size_t pos_ = 0;
};

}  // namespace

std::string IndexFileBeside(const DataLocation& location, const std::string& db_name) {
  const std::string suffix = db_name.empty() ? "" : "." + HexOf(db_name);
  return location.subdir ? location.path + "/lmdbloader" + suffix + ".idx"
                         : location.data_path + ".lmdbloader" + suffix + ".idx";
}

IndexPaths IndexFilePaths(const DataLocation& location, const ReaderOptions& options,
                          const FileIdentity& identity) {
  IndexPaths paths;
  if (options.index_dir == "none") return paths;
  std::string dir = options.index_dir;
  if (dir.empty()) {
    paths.load.push_back(IndexFileBeside(location, options.db_name));
    if (const char* env = std::getenv("LMDBLOADER_INDEX_DIR"); env && *env) dir = env;
    else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) dir = std::string(xdg) + "/lmdbloader";
    else if (const char* home = std::getenv("HOME"); home && *home) dir = std::string(home) + "/.cache/lmdbloader";
    else return paths;
  }
  const std::string suffix = options.db_name.empty() ? "" : "." + HexOf(options.db_name);
  paths.save = dir + "/" + std::to_string(identity.device) + "-" + std::to_string(identity.inode) + suffix + ".idx";
  paths.load.push_back(paths.save);
  return paths;
}

std::string IndexFileCodec::Encode(const RecordIndex& index) {
  std::string out;
  uint64_t n = index.size();
  out.reserve(128 + n * 12 + index.key_blob_.size() + index.key_ends_.size() * 8);
  out.append(kMagic, sizeof(kMagic));
  Put<uint32_t>(&out, kVersion);
  Put<uint32_t>(&out, (index.sequential_keys_ ? 1u : 0u) | (index.keys_sorted_ ? 2u : 0u) |
                          (uint32_t{index.db_flags_} << 16));
  const FileIdentity& id = index.identity;
  Put(&out, id.device);
  Put(&out, id.inode);
  Put(&out, id.size);
  Put(&out, id.mtime_ns);
  Put(&out, id.txnid);
  Put(&out, id.page_size);
  Put(&out, id.meta_sum);
  PutBytes(&out, index.db_name);
  Put<uint64_t>(&out, n);
  out.append(reinterpret_cast<const char*>(index.offsets_.data()), n * sizeof(uint64_t));
  out.append(reinterpret_cast<const char*>(index.sizes_.data()), n * sizeof(uint32_t));
  if (!index.sequential_keys_) {
    PutBytes(&out, index.key_blob_);
    out.append(reinterpret_cast<const char*>(index.key_ends_.data()), n * sizeof(uint64_t));
  }
  Put<uint64_t>(&out, index.meta_.size());
  for (const auto& [key, loc] : index.meta_) {
    PutBytes(&out, key);
    Put(&out, loc.offset);
    Put(&out, loc.size);
  }
  Put<uint64_t>(&out, Checksum(out));
  return out;
}

Status IndexFileCodec::Decode(const std::string& bytes, const std::string& path, RecordIndex* index) {
  auto damaged = [&](const char* what) {
    return Status::Corruption("index file " + path + ": " + what);
  };
  if (bytes.size() < sizeof(kMagic) + 8) return damaged("truncated");
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  const std::string body = bytes.substr(0, bytes.size() - 8);
  Cursor c(body);
  std::string magic;
  uint32_t version = 0, flags = 0;
  if (!c.GetBytes(&magic, sizeof(kMagic)) || std::memcmp(magic.data(), kMagic, sizeof(kMagic)) != 0)
    return damaged("bad magic");
  if (!c.Get(&version) || version != kVersion) return damaged("unknown version");
  if (Checksum(body) != stored) return damaged("checksum mismatch");
  FileIdentity& id = index->identity;
  uint64_t n = 0;
  if (!c.Get(&flags) || !c.Get(&id.device) || !c.Get(&id.inode) || !c.Get(&id.size) ||
      !c.Get(&id.mtime_ns) || !c.Get(&id.txnid) || !c.Get(&id.page_size) || !c.Get(&id.meta_sum) ||
      !c.GetString(&index->db_name) || !c.Get(&n) || !c.GetArray(&index->offsets_, n) ||
      !c.GetArray(&index->sizes_, n))
    return damaged("truncated");
  index->sequential_keys_ = flags & 1;
  index->keys_sorted_ = flags & 2;
  index->db_flags_ = static_cast<uint16_t>(flags >> 16);
  if (!index->sequential_keys_) {
    if (!c.GetString(&index->key_blob_) || !c.GetArray(&index->key_ends_, n))
      return damaged("truncated keys");
    for (uint64_t i = 0; i < n; ++i)
      if (index->key_ends_[i] > index->key_blob_.size() || (i && index->key_ends_[i] < index->key_ends_[i - 1]))
        return damaged("bad key offsets");
  }
  uint64_t meta = 0;
  if (!c.Get(&meta)) return damaged("truncated metadata");
  for (uint64_t i = 0; i < meta; ++i) {
    std::string key;
    ValueLocation loc;
    if (!c.GetString(&key) || !c.Get(&loc.offset) || !c.Get(&loc.size)) return damaged("truncated metadata");
    if (loc.offset > id.size || loc.size > id.size - loc.offset) return damaged("metadata past the data file");
    index->meta_[key] = loc;
  }
  if (!c.done()) return damaged("trailing bytes");
  // Written so that no sum can wrap past 2^64.
  for (uint64_t i = 0; i < n; ++i)
    if (index->offsets_[i] > id.size || index->sizes_[i] > id.size - index->offsets_[i])
      return damaged("offset past the data file");
  return Status::OK();
}

Status SaveIndex(const std::string& path, const RecordIndex& index) {
  LMDBLOADER_RETURN_IF_ERROR(MakeDirs(DirName(path)));
  return WriteFileAtomically(path, IndexFileCodec::Encode(index));
}

Status LoadIndex(const std::string& path, const FileIdentity& expected, const std::string& db_name,
                 RecordIndex* index) {
  std::string bytes;
  if (!ReadWholeFile(path, &bytes).ok()) return Status::NotFound("no saved index at " + path);
  RecordIndex loaded;
  LMDBLOADER_RETURN_IF_ERROR(IndexFileCodec::Decode(bytes, path, &loaded));
  if (!(loaded.identity == expected) || loaded.db_name != db_name)
    return Status::NotFound("saved index " + path + " is stale");
  *index = std::move(loaded);
  return Status::OK();
}

}  // namespace lmdbloader
