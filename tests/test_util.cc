#include "test_util.h"

#include <fcntl.h>
#include <lmdb.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lmdbloader::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/lmdbloader-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) std::abort();
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void FillRecordBytes(uint64_t i, char* out, size_t size) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + 1;
  size_t pos = 0;
  while (pos < size) {
    // splitmix64
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    size_t n = std::min<size_t>(8, size - pos);
    std::memcpy(out + pos, &z, n);
    pos += n;
  }
}

std::string RecordBytes(uint64_t i, size_t size) {
  std::string s(size, '\0');
  FillRecordBytes(i, s.data(), size);
  return s;
}

static void Check(int rc, const char* what) {
  if (rc != MDB_SUCCESS) {
    std::fprintf(stderr, "%s: %s\n", what, mdb_strerror(rc));
    std::abort();
  }
}

static std::string BigEndian(uint64_t i) {
  std::string k(8, '\0');
  for (int b = 7; b >= 0; --b, i >>= 8) k[b] = static_cast<char>(i & 0xff);
  return k;
}

void WriteNumberedLmdb(const std::string& dir, uint64_t count, size_t value_size) {
  ::mkdir(dir.c_str(), 0755);
  MDB_env* env;
  Check(mdb_env_create(&env), "mdb_env_create");
  Check(mdb_env_set_mapsize(env, (count * (value_size + 4096) * 2) + (64ull << 20)), "set_mapsize");
  Check(mdb_env_open(env, dir.c_str(), MDB_NOSYNC | MDB_NOLOCK, 0644), "mdb_env_open");
  MDB_txn* txn;
  MDB_dbi dbi;
  Check(mdb_txn_begin(env, nullptr, 0, &txn), "txn_begin");
  Check(mdb_dbi_open(txn, nullptr, 0, &dbi), "dbi_open");
  for (uint64_t i = 0; i < count; ++i) {
    std::string k = BigEndian(i);
    MDB_val key{k.size(), k.data()};
    MDB_val val{value_size, nullptr};
    Check(mdb_put(txn, dbi, &key, &val, MDB_APPEND | MDB_RESERVE), "mdb_put");
    FillRecordBytes(i, static_cast<char*>(val.mv_data), value_size);
  }
  Check(mdb_txn_commit(txn), "commit");
  mdb_env_sync(env, 1);
  mdb_env_close(env);
}

void WriteLmdb(const std::string& path, const std::vector<std::pair<std::string, std::string>>& records,
               const std::string& db_name, bool nosubdir, unsigned db_flags) {
  if (!nosubdir) ::mkdir(path.c_str(), 0755);
  MDB_env* env;
  Check(mdb_env_create(&env), "mdb_env_create");
  Check(mdb_env_set_mapsize(env, 1ull << 30), "set_mapsize");
  Check(mdb_env_set_maxdbs(env, 8), "set_maxdbs");
  Check(mdb_env_open(env, path.c_str(), MDB_NOLOCK | (nosubdir ? MDB_NOSUBDIR : 0), 0644), "mdb_env_open");
  MDB_txn* txn;
  MDB_dbi dbi;
  Check(mdb_txn_begin(env, nullptr, 0, &txn), "txn_begin");
  Check(mdb_dbi_open(txn, db_name.empty() ? nullptr : db_name.c_str(), MDB_CREATE | db_flags, &dbi), "dbi_open");
  for (const auto& [k, v] : records) {
    MDB_val key{k.size(), const_cast<char*>(k.data())};
    MDB_val val{v.size(), const_cast<char*>(v.data())};
    Check(mdb_put(txn, dbi, &key, &val, 0), "mdb_put");
  }
  Check(mdb_txn_commit(txn), "commit");
  mdb_env_close(env);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::pair<std::string, std::string>> LiblmdbPairs(const std::string& dir, const std::string& db_name,
                                                              unsigned* flags) {
  std::vector<std::pair<std::string, std::string>> out;
  MDB_env* env;
  Check(mdb_env_create(&env), "mdb_env_create");
  Check(mdb_env_set_maxdbs(env, 8), "set_maxdbs");
  Check(mdb_env_open(env, dir.c_str(), MDB_RDONLY | MDB_NOLOCK, 0644), "mdb_env_open");
  MDB_txn* txn;
  Check(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), "txn_begin");
  MDB_dbi dbi;
  Check(mdb_dbi_open(txn, db_name.empty() ? nullptr : db_name.c_str(), 0, &dbi), "dbi_open");
  if (flags != nullptr) Check(mdb_dbi_flags(txn, dbi, flags), "dbi_flags");
  MDB_cursor* c;
  Check(mdb_cursor_open(txn, dbi, &c), "cursor_open");
  MDB_val k, v;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
    out.emplace_back(std::string(static_cast<char*>(k.mv_data), k.mv_size),
                     std::string(static_cast<char*>(v.mv_data), v.mv_size));
  mdb_cursor_close(c);
  mdb_txn_abort(txn);
  mdb_env_close(env);
  return out;
}

void WarmPageCache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  std::vector<char> buf(4 << 20);
  while (::read(fd, buf.data(), buf.size()) > 0) {
  }
  ::close(fd);
}

namespace {

// statm's first `n` fields (pages): size, resident, shared. A sample that
// cannot be read stops the test: a zero would pass every budget it bounds.
void ReadStatm(int fd, unsigned long long* fields, int n) {
  char text[160];
  ssize_t got = fd < 0 ? -1 : ::pread(fd, text, sizeof(text) - 1, 0);
  text[got > 0 ? got : 0] = '\0';
  const char* at = text;
  for (int i = 0; i < n; ++i) {
    char* end = nullptr;
    fields[i] = std::strtoull(at, &end, 10);
    if (end == at) {
      std::fprintf(stderr, "test_util: /proc/self/statm unreadable (%s): '%s'\n", std::strerror(errno), text);
      std::abort();
    }
    at = end;
  }
}

uint64_t StatmField(int index) {
  int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  unsigned long long fields[3] = {0, 0, 0};
  ReadStatm(fd, fields, 3);
  if (fd >= 0) ::close(fd);
  return fields[index] * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

RssSampler::RssSampler() : fd_(new int(::open("/proc/self/statm", O_RDONLY | O_CLOEXEC))) {}

void RssSampler::Close::operator()(const int* fd) const {
  if (*fd >= 0) ::close(*fd);
  delete fd;
}

uint64_t RssSampler::ResidentBytes() const {
  unsigned long long fields[2] = {0, 0};
  ReadStatm(*fd_, fields, 2);
  return fields[1] * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

uint64_t ProcessRssBytes() { return StatmField(1); }

uint64_t ProcessFileRssBytes() { return StatmField(2); }

int RunUnprivileged(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid < 0) return 97;
  if (pid == 0) {
    if (::geteuid() == 0) {
      constexpr uid_t kNobody = 65534;
      if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0) ::_exit(98);
      if (::setuid(kNobody) != 0) ::_exit(99);
    }
    int code = body();
    std::fflush(stderr);
    ::_exit(code);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return 97;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace lmdbloader::testing
