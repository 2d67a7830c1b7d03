#include "reader/file_set.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "corpus/corpus_format.h"

namespace lmdbloader {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// LMDB's lock files: lock.mdb beside data.mdb, NAME-lock beside a file
// opened without a folder.
bool IsLockFile(const std::string& name) { return name == "lock.mdb" || EndsWith(name, "-lock"); }

// A database file by its name: *.lmdb or *.mdb, not a lock file.
bool NamesDatabaseFile(const std::string& name) {
  return !IsLockFile(name) && (EndsWith(name, ".lmdb") || EndsWith(name, ".mdb"));
}

// Whether `dir/name` can be stat()ed: an error other than "not there"
// (a folder that cannot be searched) counts as there, so that the open
// reports it instead of the listing passing over the folder.
bool MayExist(const std::string& dir, const char* name) {
  struct stat st;
  return ::stat((dir + "/" + name).c_str(), &st) == 0 || (errno != ENOENT && errno != ENOTDIR);
}

// Whether `folder` holds databases itself: a *.lmdb or *.mdb file, or a
// subfolder holding data.mdb (a set of sets, as training/MJ/MJ_train).
bool HoldsDatabases(const std::string& folder) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    if (NamesDatabaseFile(entry.path().filename().string())) return true;
    std::error_code type_ec;
    if (entry.is_directory(type_ec) && MayExist(entry.path().string(), "data.mdb")) return true;
  }
  return false;
}

// A subfolder of a set is one of its databases when it holds data.mdb, or
// when it looks like one (named *.lmdb or *.mdb, holding LMDB's lock.mdb or
// a shard list, or holding databases of its own) without being one:
// CheckFileSetMember then says what is wrong, so that it is an error or a
// file skipped, never a set silently short of it. Other folders (notes,
// logs) are not the set's.
bool IsMemberFolder(const std::string& folder, const std::string& name) {
  return MayExist(folder, "data.mdb") || NamesDatabaseFile(name) || MayExist(folder, "lock.mdb") ||
         MayExist(folder, kShardListFile) || HoldsDatabases(folder);
}

}  // namespace

Status CheckFileSetMember(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return Status::OK();  // the open says what it is
  if (MayExist(path, "data.mdb")) return Status::OK();
  if (MayExist(path, kShardListFile))
    return Status::InvalidArgument("open " + path + ": a shard set (it holds " + std::string(kShardListFile) +
                                   ") is read alone, not as one database of a set of files");
  // A set is read one folder deep: sets of sets are named by a glob or a list.
  if (!MayExist(path, "lock.mdb") && HoldsDatabases(path))
    return Status::IOError("open " + path + "/data.mdb: No such file or directory (" + path +
                               " holds databases of its own, and a set of files is read one folder deep: "
                               "name them with a glob, " + path + "/*, or a list)",
                           ENOENT);
  return Status::IOError("open " + path + "/data.mdb: No such file or directory (" + path +
                             " looks like an LMDB folder but holds no data.mdb)",
                         ENOENT);
}

MemberPaths::MemberPaths(const std::vector<std::string>& paths) {
  if (paths.empty()) return;
  // The shared prefix, cut after its last '/': "a/b/c1" and "a/b/c2" share
  // "a/b/", so that a path is whole once prefix_ is put back.
  size_t shared = paths.front().size();
  for (const std::string& p : paths) {
    size_t n = 0;
    while (n < shared && n < p.size() && p[n] == paths.front()[n]) ++n;
    shared = n;
  }
  const size_t slash = paths.front().rfind('/', shared == 0 ? 0 : shared - 1);
  prefix_ = slash == std::string::npos || shared == 0 ? "" : paths.front().substr(0, slash + 1);
  size_t bytes = 0;
  for (const std::string& p : paths) bytes += p.size() - prefix_.size();
  rests_.reserve(bytes);
  ends_.reserve(paths.size());
  for (const std::string& p : paths) {
    rests_.append(p, prefix_.size(), std::string::npos);
    ends_.push_back(rests_.size());
  }
}

std::string MemberPaths::operator[](size_t i) const {
  const uint64_t begin = i == 0 ? 0 : ends_[i - 1];
  std::string path;
  path.reserve(prefix_.size() + (ends_[i] - begin));
  path.append(prefix_).append(rests_, begin, ends_[i] - begin);
  return path;
}

uint64_t MemberPaths::MemoryBytes() const {
  return prefix_.capacity() + rests_.capacity() + ends_.capacity() * sizeof(uint64_t);
}

Status ListFileSet(const std::string& path, bool* is_set, std::vector<std::string>* files) {
  files->clear();
  *is_set = false;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (path.find_first_of("*?[") == std::string::npos) return Status::OK();  // missing: the open says so
    glob_t matches{};
    const int rc = ::glob(path.c_str(), GLOB_ERR, nullptr, &matches);
    // LMDB's lock files are never databases: `chunk-*` matches chunk-7.lmdb-lock too.
    if (rc == 0)
      for (size_t i = 0; i < matches.gl_pathc; ++i)
        if (!IsLockFile(std::filesystem::path(matches.gl_pathv[i]).filename().string()))
          files->push_back(matches.gl_pathv[i]);
    ::globfree(&matches);
    if (files->empty()) return Status::IOError("no file matches " + path, ENOENT);
    std::sort(files->begin(), files->end());  // glob sorts by the locale; the set is in byte order
    *is_set = true;
    return Status::OK();
  }
  if (!S_ISDIR(st.st_mode)) return Status::OK();
  const std::string dir = path;
  if (::stat((dir + "/data.mdb").c_str(), &st) == 0 || ::stat((dir + "/" + kShardListFile).c_str(), &st) == 0)
    return Status::OK();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    // The converter's shard parts (part-00003-of-00016) without their list:
    // opening it as one database says which command writes the list.
    if (name.rfind("part-", 0) == 0 && name.find("-of-") != std::string::npos) {
      files->clear();
      return Status::OK();
    }
    std::error_code type_ec;
    if (entry.is_directory(type_ec)) {
      if (IsMemberFolder(entry.path().string(), name)) files->push_back(entry.path().string());
    } else if (NamesDatabaseFile(name)) {
      files->push_back(entry.path().string());  // a file, a dangling link: the open says which
    }
  }
  if (ec) return Status::FromErrno(ec.value(), "list", dir);
  if (files->empty()) {
    return Status::IOError(dir + "/data.mdb: No such file or directory; nor is " + dir +
                               " a set of databases: it holds no " + std::string(kShardListFile) +
                               ", no *.lmdb or *.mdb file and no folder holding data.mdb",
                           ENOENT);
  }
  std::sort(files->begin(), files->end());
  *is_set = true;
  return Status::OK();
}

}  // namespace lmdbloader
