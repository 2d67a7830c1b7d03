#include "lmdbloader/lmdb_copy.h"

#include <fcntl.h>
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "lmdb/lmdb_env.h"
#include "corpus/shard_list.h"

namespace lmdbloader {

namespace {

Status WriteAll(int fd, const char* data, size_t size, const std::string& dest) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "copy: write", dest);
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::OK();
}

Status CopyPagesInUse(LmdbEnv& env, int fd, const std::string& dest) {
  const LmdbMeta& meta = env.meta();
  const uint64_t in_use = (meta.last_pgno + 1) * meta.page_size;
  const uint64_t bytes = std::min(in_use, env.file().file_size());
  std::vector<char> buf(1 << 20);
  for (uint64_t at = 0; at < bytes;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), bytes - at));
    ssize_t n = ::pread(env.file().fd(), buf.data(), want, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "copy: read", env.file().path());
    if (n == 0) return Status::Corruption("copy " + env.file().path() + ": the file ends at byte " + std::to_string(at) +
                                          ", before its last page in use");
    LMDBLOADER_RETURN_IF_ERROR(WriteAll(fd, buf.data(), static_cast<size_t>(n), dest));
    at += static_cast<uint64_t>(n);
  }
  return Status::OK();
}

// Every page liblmdb's compacting copy follows, through the checked reader.
Status CheckForCompaction(LmdbEnv& env) {
  LmdbFile& file = env.file();
  const LmdbMeta& meta = env.meta();
  auto check_item = [&](const LmdbItem& item) -> Status {
    if (item.on_overflow_pages) return file.CheckOverflow(meta, item.value_offset, item.value_size);
    return Status::OK();
  };
  std::vector<LmdbTree> named;
  LMDBLOADER_RETURN_IF_ERROR(file.Walk(meta, meta.main_tree, [&](const LmdbItem& item) -> Status {
    if (item.named_database) {
      LmdbTree tree;
      if (!LmdbTree::Parse(item.value, &tree))
        return Status::Corruption("copy " + file.path() + ": the header of named database '" + std::string(item.key) +
                                  "' is damaged");
      named.push_back(tree);
    }
    return check_item(item);
  }));
  for (const LmdbTree& tree : named)
    if (tree.root != ~0ull) LMDBLOADER_RETURN_IF_ERROR(file.Walk(meta, tree, check_item));
  // The free list: each value is a page-number list led by its length, which
  // the copy sums to place its root.
  uint64_t free_pages = 0;
  if (meta.free_tree.root != ~0ull) {
    LMDBLOADER_RETURN_IF_ERROR(file.Walk(meta, meta.free_tree, [&](const LmdbItem& item) -> Status {
      LMDBLOADER_RETURN_IF_ERROR(check_item(item));
      uint64_t count = 0;
      if (item.value_size < 8 || item.value_size % 8 != 0 ||
          ::pread(file.fd(), &count, 8, static_cast<off_t>(item.value_offset)) != 8 ||
          count != item.value_size / 8 - 1 || (free_pages += count) > meta.last_pgno)
        return Status::Corruption("copy " + file.path() + ": a free-page list is damaged");
      return Status::OK();
    }));
  }
  return Status::OK();
}

// liblmdb's compacting copy, in a child process: a fault there is reported,
// not suffered.
Status CompactInChild(const DataLocation& location, int fd) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::FromErrno(errno, "copy: pipe", location.data_path);
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return Status::FromErrno(err, "copy: fork", location.data_path);
  }
  if (pid == 0) {
    ::close(pipe_fds[0]);
    MDB_env* env = nullptr;
    int rc = mdb_env_create(&env);
    unsigned flags = MDB_RDONLY | MDB_NOLOCK | MDB_NORDAHEAD;
    if (!location.subdir) flags |= MDB_NOSUBDIR;
    if (rc == MDB_SUCCESS) rc = mdb_env_open(env, location.path.c_str(), flags, 0644);
    if (rc == MDB_SUCCESS) rc = mdb_env_copyfd2(env, fd, MDB_CP_COMPACT);
    ssize_t ignored = ::write(pipe_fds[1], &rc, sizeof rc);
    (void)ignored;
    ::_exit(0);  // no atexit handlers, no destructors of the parent's objects
  }
  ::close(pipe_fds[1]);
  int rc = 0;
  ssize_t got;
  do {
    got = ::read(pipe_fds[0], &rc, sizeof rc);
  } while (got < 0 && errno == EINTR);
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status) || got != static_cast<ssize_t>(sizeof rc))
    return Status::Corruption("copy " + location.data_path + ": liblmdb's compacting copy died" +
                              (WIFSIGNALED(status) ? " of " + std::string(strsignal(WTERMSIG(status))) : std::string()) +
                              " reading the file: it is damaged");
  if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_env_copyfd2", location.data_path);
  return Status::OK();
}

Status OpenForCopy(const std::string& path, DataLocation* location, std::unique_ptr<LmdbEnv>* env) {
  bool shard_set = false;
  std::vector<ShardEntry> parts;
  LMDBLOADER_RETURN_IF_ERROR(ReadShardList(path, &shard_set, &parts));
  if (shard_set) return Status::InvalidArgument("copy " + path + ": a shard set is many environments; copy its folder");
  LMDBLOADER_RETURN_IF_ERROR(ResolveDataLocation(path, location));
  return LmdbEnv::Open(*location, false, "", env);
}

}  // namespace

Status CopyEnvironmentToFd(const std::string& path, int fd, bool compact) {
  DataLocation location;
  std::unique_ptr<LmdbEnv> env;
  LMDBLOADER_RETURN_IF_ERROR(OpenForCopy(path, &location, &env));
  const std::string dest = "descriptor " + std::to_string(fd);
  if (!compact) return CopyPagesInUse(*env, fd, dest);
  LMDBLOADER_RETURN_IF_ERROR(CheckForCompaction(*env));
  return CompactInChild(location, fd);
}

Status CopyEnvironmentToDir(const std::string& path, const std::string& dir, bool compact) {
  const std::string target = dir + "/data.mdb";
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(errno, "copy to", dir);
  if (!S_ISDIR(st.st_mode)) return Status::FromErrno(ENOTDIR, "copy to", dir);
  if (::lstat(target.c_str(), &st) == 0) return Status::FromErrno(EEXIST, "copy to", target);
  std::string temp = dir + "/.data.mdb.copy-XXXXXX";
  int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "copy to", dir);
  Status s = CopyEnvironmentToFd(path, fd, compact);
  if (s.ok() && ::fsync(fd) != 0) s = Status::FromErrno(errno, "copy: fsync", temp);
  if (::close(fd) != 0 && s.ok()) s = Status::FromErrno(errno, "copy: close", temp);
  if (s.ok() && ::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) != 0)
    s = Status::FromErrno(errno, "copy to", target);
  if (!s.ok()) ::unlink(temp.c_str());
  return s;
}

}  // namespace lmdbloader
