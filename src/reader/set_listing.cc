#include "reader/set_listing.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/checksum.h"
#include "base/field_reader.h"
#include "corpus/corpus_format.h"
#include "io/open_file.h"
#include "lmdb/index_file.h"
#include "lmdbloader/atomic_write.h"

namespace lmdbloader {
namespace {

constexpr char kMagic[8] = {'L', 'M', 'D', 'B', 'L', 'S', 'E', 'T'};
constexpr uint32_t kVersion = 1;
// A member's fixed fields: its rest's length, records, then the identity's six.
constexpr uint64_t kMemberFixed = 8 * 8;

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}
void PutString(std::string* out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  out->append(s);
}

int64_t Nanos(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

std::string Hex16(uint64_t v) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = kDigits[v & 15];
  return s;
}

}  // namespace

uint64_t MemberIdentity::Sum() const {
  const uint64_t fields[6] = {device, inode, size, static_cast<uint64_t>(mtime_ns), static_cast<uint64_t>(ctime_ns),
                              txnid};
  return Checksum(fields, sizeof(fields));
}

void DescribeSetSource(const std::string& path, SetSource* source, bool* is_candidate) {
  *source = SetSource();
  *is_candidate = false;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    // A folder holding data.mdb or a shard list is one database or a shard set.
    struct stat inner;
    if (!S_ISDIR(st.st_mode) || ::stat((path + "/data.mdb").c_str(), &inner) == 0 ||
        ::stat((path + "/" + kShardListFile).c_str(), &inner) == 0)
      return;
    source->kind = SetKind::kFolder;
    source->folder = path;
  } else {
    if (path.find_first_of("*?[") == std::string::npos) return;
    source->kind = SetKind::kGlob;
    // Wildcards in the last name only: the folder it lists stands for the set.
    const size_t slash = path.rfind('/');
    const std::string folder = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
    if (folder.find_first_of("*?[") == std::string::npos && ::stat(folder.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      source->folder = folder;
  }
  source->name = path;
  *is_candidate = true;
  if (!source->folder.empty()) {
    source->dir_device = static_cast<uint64_t>(st.st_dev);
    source->dir_inode = static_cast<uint64_t>(st.st_ino);
    source->dir_mtime_ns = Nanos(st.st_mtim);
    source->dir_ctime_ns = Nanos(st.st_ctim);
    source->dir_stat_ok = true;
  }
}

std::string SetListingPath(const SetSource& source, const std::vector<std::string>& list_paths,
                           const std::string& db_name, const ReaderOptions& options) {
  const std::string dir = IndexCacheDir(options);
  if (dir.empty()) return "";
  std::string key;
  Put<uint32_t>(&key, static_cast<uint32_t>(source.kind));
  PutString(&key, db_name);
  PutString(&key, source.name);
  bool relative = !source.name.empty() && source.name.front() != '/';
  if (source.kind == SetKind::kList)
    for (const std::string& p : list_paths) {
      PutString(&key, p);
      relative |= p.empty() || p.front() != '/';
    }
  // Relative paths name other files from another working directory: its
  // own listing (a member's identity check would refuse the other's).
  if (relative) {
    char cwd[4096];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) return "";
    PutString(&key, cwd);
  }
  return dir + "/set-" + Hex16(Checksum(key)) + ".lst";
}

std::string EncodeSetListing(const SetListing& l) {
  std::string out(kMagic, sizeof(kMagic));
  Put<uint32_t>(&out, kVersion);
  Put<uint32_t>(&out, static_cast<uint32_t>(l.source.kind));
  PutString(&out, l.source.name);
  PutString(&out, l.source.folder);
  Put<uint64_t>(&out, l.source.dir_device);
  Put<uint64_t>(&out, l.source.dir_inode);
  Put<int64_t>(&out, l.source.dir_mtime_ns);
  Put<int64_t>(&out, l.source.dir_ctime_ns);
  PutString(&out, l.db_name);
  Put<uint32_t>(&out, l.format);
  Put<uint32_t>(&out, l.db_flags);
  Put<uint64_t>(&out, l.data_bytes);
  PutString(&out, l.paths.prefix());
  Put<uint64_t>(&out, l.paths.size());
  for (size_t i = 0; i < l.paths.size(); ++i) {
    const MemberIdentity& id = l.identities[i];
    Put<uint64_t>(&out, l.paths.rest(i).size());
    Put<uint64_t>(&out, l.records[i]);
    Put<uint64_t>(&out, id.device);
    Put<uint64_t>(&out, id.inode);
    Put<uint64_t>(&out, id.size);
    Put<int64_t>(&out, id.mtime_ns);
    Put<int64_t>(&out, id.ctime_ns);
    Put<uint64_t>(&out, id.txnid);
    out.append(l.paths.rest(i));
  }
  Put<uint64_t>(&out, Checksum(out));
  return out;
}

Status DecodeSetListing(std::string_view bytes, const std::string& path, SetListing* l, bool check_sum) {
  auto damaged = [&](const std::string& what) {
    return Status::Corruption("saved file set listing " + path + ": " + what + " (it is written again at the next open)");
  };
  if (bytes.size() < sizeof(kMagic) + 4 + 8 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return damaged("not a listing, or truncated");
  uint64_t sum = 0;
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  if (check_sum && sum != Checksum(bytes.data(), bytes.size() - 8)) return damaged("its checksum differs");
  FieldReader f(bytes.substr(0, bytes.size() - 8), sizeof(kMagic));
  uint32_t version = 0, kind = 0;
  f.Get(&version);
  if (version != kVersion) return Status::NotFound(path + ": listing version " + std::to_string(version));
  std::string_view name, folder, db_name, prefix;
  uint64_t count = 0;
  if (!f.Get(&kind) || !f.GetString(&name) || !f.GetString(&folder) || !f.Get(&l->source.dir_device) ||
      !f.Get(&l->source.dir_inode) || !f.Get(&l->source.dir_mtime_ns) || !f.Get(&l->source.dir_ctime_ns) ||
      !f.GetString(&db_name) || !f.Get(&l->format) || !f.Get(&l->db_flags) || !f.Get(&l->data_bytes) ||
      !f.GetString(&prefix) || !f.Get(&count))
    return damaged("truncated");
  if (kind < 1 || kind > 3) return damaged("unknown kind of set " + std::to_string(kind));
  if (count == 0 || count > f.left() / kMemberFixed) return damaged("member count past its bytes");
  l->source.kind = static_cast<SetKind>(kind);
  l->source.name = std::string(name);
  l->source.folder = std::string(folder);
  l->source.dir_stat_ok = !folder.empty();
  l->db_name = std::string(db_name);
  std::string rests;
  std::vector<uint64_t> ends;
  ends.reserve(count);
  l->records.resize(count);
  l->identities.resize(count);
  uint64_t total = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t length = 0;
    std::string_view rest;
    MemberIdentity& id = l->identities[i];
    if (!f.Get(&length) || !f.Get(&l->records[i]) || !f.Get(&id.device) || !f.Get(&id.inode) || !f.Get(&id.size) ||
        !f.Get(&id.mtime_ns) || !f.Get(&id.ctime_ns) || !f.Get(&id.txnid) || !f.GetView(&rest, length))
      return damaged("truncated in member " + std::to_string(i));
    if (prefix.size() + rest.size() == 0 || rest.find('\0') != std::string_view::npos)
      return damaged("member " + std::to_string(i) + "'s path is empty or holds NUL");
    if (l->records[i] > UINT64_MAX - total) return damaged("record counts overflow");
    total += l->records[i];
    rests.append(rest);
    ends.push_back(rests.size());
  }
  if (!f.done()) return damaged("bytes after its last member");
  if (prefix.find('\0') != std::string_view::npos) return damaged("its paths' folder holds NUL");
  l->paths = MemberPaths(std::string(prefix), std::move(rests), std::move(ends));
  return Status::OK();
}

Status LoadSetListing(const std::string& path, SetListing* listing) {
  // Read, not mapped: a listing cut short in place by another process must
  // read as damaged, never as SIGBUS on a page past its new end.
  std::string bytes;
  Status read = ReadWholeFile(path, &bytes);
  if (!read.ok()) {
    if (read.sys_errno() == ENOENT) return Status::NotFound(path);
    if (read.sys_errno() != 0) return read;
  }
  if (!read.ok() || bytes.empty())
    return Status::Corruption("saved file set listing " + path + ": not a listing, or empty");
  return DecodeSetListing(bytes, path, listing);
}

Status SaveSetListing(const std::string& path, const SetListing& listing) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  return WriteFileAtomically(path, EncodeSetListing(listing));
}

bool SameSetSource(const SetSource& saved, const SetSource& now) {
  if (saved.kind != now.kind || saved.name != now.name || saved.folder != now.folder) return false;
  if (now.folder.empty()) return true;
  return now.dir_stat_ok && saved.dir_device == now.dir_device && saved.dir_inode == now.dir_inode &&
         saved.dir_mtime_ns == now.dir_mtime_ns && saved.dir_ctime_ns == now.dir_ctime_ns;
}

}  // namespace lmdbloader
