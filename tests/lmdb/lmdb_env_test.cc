// LmdbEnv and ResolveLocation: where a database's data file is, what its meta
// pages say compared with what liblmdb itself reports, damage refused before
// liblmdb sees the file, and lock mode's snapshot holding its pages while a
// writer in another process commits.
#include "lmdb/lmdb_env.h"

#include <fcntl.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;
using Pairs = std::vector<std::pair<std::string, std::string>>;

bool Names(const Status& s, const std::string& what) { return s.message().find(what) != std::string::npos; }

Pairs Numbered(int count, int seed, size_t size) {
  Pairs records;
  for (int i = 0; i < count; ++i) records.emplace_back("key" + std::to_string(1000 + i), testing::RecordBytes(seed + i, size));
  return records;
}

Status OpenAt(const std::string& path, bool lock, const std::string& db_name, std::unique_ptr<LmdbEnv>* env) {
  DataLocation location;
  LMDBLOADER_RETURN_IF_ERROR(ResolveLocation(path, &location));
  return LmdbEnv::Open(location, lock, db_name, env);
}

TEST(LmdbEnvTest, ResolveLocationFindsTheDataFileOfADirectoryOrAFile) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), {{"a", "1"}});
  testing::WriteLmdb(dir.Sub("single"), {{"a", "1"}}, "", /*nosubdir=*/true);
  DataLocation location;
  ASSERT_OK(ResolveLocation(dir.Sub("db"), &location));
  EXPECT_TRUE(location.subdir);
  EXPECT_EQ(location.data_path, dir.Sub("db") + "/data.mdb");
  ASSERT_OK(ResolveLocation(dir.Sub("db") + "/", &location));
  EXPECT_EQ(location.data_path, dir.Sub("db") + "/data.mdb");
  EXPECT_EQ(location.path, dir.Sub("db") + "/");
  ASSERT_OK(ResolveLocation(dir.Sub("single"), &location));
  EXPECT_FALSE(location.subdir);
  EXPECT_EQ(location.data_path, dir.Sub("single"));
}

TEST(LmdbEnvTest, ResolveLocationNamesWhatIsMissingOrWrong) {
  TempDir dir;
  ::mkdir(dir.Sub("empty").c_str(), 0755);
  DataLocation location;
  Status s = ResolveLocation(dir.Sub("absent"), &location);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_TRUE(Names(s, dir.Sub("absent"))) << s.ToString();
  s = ResolveLocation(dir.Sub("empty"), &location);  // a directory without data.mdb
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_TRUE(Names(s, dir.Sub("empty") + "/data.mdb")) << s.ToString();
  s = ResolveLocation("/dev/null", &location);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(Names(s, "neither a directory nor a regular file")) << s.ToString();
  EXPECT_EQ(ResolveLocation("", &location).code(), Status::Code::kInvalidArgument);
}

// What liblmdb reports for a database: its environment's and its own counts.
struct LiblmdbView {
  MDB_envinfo info{};
  MDB_stat stat{};
  unsigned flags = 0;
};

LiblmdbView ReadWithLiblmdb(const std::string& dir, const std::string& db_name) {
  LiblmdbView view;
  MDB_env* env;
  mdb_env_create(&env);
  mdb_env_set_maxdbs(env, 8);
  EXPECT_EQ(mdb_env_open(env, dir.c_str(), MDB_RDONLY | MDB_NOLOCK, 0644), 0);
  MDB_txn* txn;
  mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
  MDB_dbi dbi;
  EXPECT_EQ(mdb_dbi_open(txn, db_name.empty() ? nullptr : db_name.c_str(), 0, &dbi), 0);
  mdb_env_info(env, &view.info);
  mdb_stat(txn, dbi, &view.stat);
  mdb_dbi_flags(txn, dbi, &view.flags);
  mdb_txn_abort(txn);
  mdb_env_close(env);
  return view;
}

TEST(LmdbEnvTest, MetaPagesAndTreesSayWhatLiblmdbReports) {
  struct Case {
    std::string db_name;
    unsigned flags;
  };
  for (const Case& c : {Case{"", 0}, Case{"", MDB_INTEGERKEY}, Case{"named", MDB_DUPSORT | MDB_REVERSEKEY},
                        Case{"other", MDB_REVERSEKEY}}) {
    for (bool lock : {false, true}) {
      SCOPED_TRACE(c.db_name + " flags " + std::to_string(c.flags) + (lock ? " lock" : ""));
      TempDir dir;
      Pairs records = Numbered(700, 0, 300);
      if (c.flags & MDB_INTEGERKEY)
        for (size_t i = 0; i < records.size(); ++i) records[i].first = std::string(reinterpret_cast<char*>(&i), 8);
      testing::WriteLmdb(dir.Sub("db"), records, c.db_name, false, c.flags);
      const LiblmdbView expected = ReadWithLiblmdb(dir.Sub("db"), c.db_name);
      std::unique_ptr<LmdbEnv> env;
      ASSERT_OK(OpenAt(dir.Sub("db"), lock, c.db_name, &env));
      EXPECT_EQ(env->meta().txnid, expected.info.me_last_txnid);
      EXPECT_EQ(env->meta().last_pgno, expected.info.me_last_pgno);
      EXPECT_EQ(env->meta().page_size, expected.stat.ms_psize);
      EXPECT_EQ(env->tree().entries, expected.stat.ms_entries);
      EXPECT_EQ(env->tree().depth, expected.stat.ms_depth);
      EXPECT_EQ(env->tree().leaf_pages, expected.stat.ms_leaf_pages);
      EXPECT_EQ(env->tree().branch_pages, expected.stat.ms_branch_pages);
      EXPECT_EQ(env->db_flags(), expected.flags);
      struct stat st;
      ASSERT_EQ(::stat((dir.Sub("db") + "/data.mdb").c_str(), &st), 0);
      EXPECT_EQ(env->identity().inode, st.st_ino);
      EXPECT_EQ(env->identity().size, static_cast<uint64_t>(st.st_size));
      EXPECT_EQ(env->identity().txnid, expected.info.me_last_txnid);
    }
  }
}

TEST(LmdbEnvTest, AMissingNamedDatabaseIsNotFound) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), {{"a", "1"}}, "named");
  std::unique_ptr<LmdbEnv> env;
  EXPECT_TRUE(OpenAt(dir.Sub("db"), false, "absent", &env).IsNotFound());
  EXPECT_TRUE(OpenAt(dir.Sub("db"), true, "absent", &env).IsNotFound());
  ASSERT_OK(OpenAt(dir.Sub("db"), true, "named", &env));
}

TEST(LmdbEnvTest, DamagedMetaPagesAreCorruptionNamingTheFileBeforeLiblmdbSeesThem) {
  TempDir dir;
  ::mkdir(dir.Sub("zeros").c_str(), 0755);
  const std::vector<char> zeros(2 * 4096, 0);
  const int fd = ::open((dir.Sub("zeros") + "/data.mdb").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_EQ(::write(fd, zeros.data(), zeros.size()), static_cast<ssize_t>(zeros.size()));
  ::close(fd);
  for (bool lock : {false, true}) {
    std::unique_ptr<LmdbEnv> env;
    Status s = OpenAt(dir.Sub("zeros"), lock, "", &env);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
    EXPECT_TRUE(Names(s, dir.Sub("zeros") + "/data.mdb")) << s.ToString();
    // Refused before liblmdb opened it: no lock file was made.
    EXPECT_NE(::access((dir.Sub("zeros") + "/lock.mdb").c_str(), F_OK), 0);
  }
}

TEST(LmdbEnvTest, AFileCutShortOpensAndItsWalkIsCorruptionNamingTheFile) {
  // The meta pages may name pages past the end of a sound file (pages a
  // transaction allocated and freed unwritten), so a short file is found
  // where its trees reach past the end.
  for (bool lock : {false, true}) {
    SCOPED_TRACE(lock ? "lock" : "no lock");
    TempDir dir;
    testing::WriteLmdb(dir.Sub("db"), Numbered(500, 0, 500));
    const std::string data = dir.Sub("db") + "/data.mdb";
    struct stat st;
    ASSERT_EQ(::stat(data.c_str(), &st), 0);
    ASSERT_EQ(::truncate(data.c_str(), st.st_size / 2), 0);
    std::unique_ptr<LmdbEnv> env;
    ASSERT_OK(OpenAt(dir.Sub("db"), lock, "", &env));
    Status s = env->file().Walk(env->meta(), env->tree(), [](const LmdbItem&) { return Status::OK(); });
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
    EXPECT_TRUE(Names(s, data)) << s.ToString();
  }
}

TEST(LmdbEnvTest, CloseIsIdempotentAndTheDatabaseOpensAgain) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), Numbered(10, 0, 10));
  for (int round = 0; round < 3; ++round) {
    std::unique_ptr<LmdbEnv> env, second;
    ASSERT_OK(OpenAt(dir.Sub("db"), true, "", &env));
    ASSERT_OK(OpenAt(dir.Sub("db"), true, "", &second));  // shares the first's MDB_env
    env->Close();
    env->Close();
    EXPECT_EQ(second->tree().entries, 10u);
  }
}

// (offset, bytes) of every value of the database as the walk finds it.
std::vector<std::pair<uint64_t, std::string>> Values(LmdbEnv& env) {
  std::vector<std::pair<uint64_t, std::string>> out;
  EXPECT_OK(env.file().Walk(env.meta(), env.tree(), [&](const LmdbItem& item) {
    out.emplace_back(item.value_offset, std::string(item.value));
    return Status::OK();
  }));
  return out;
}

// In a child process (a writer must not share this process's environment:
// lmdb.h, Caveats): empties the database, then writes other records, in
// separate commits, with the lock file, as a live writer does.
int RewriteInChild(const std::string& dir) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    MDB_env* env;
    mdb_env_create(&env);
    mdb_env_set_mapsize(env, 1ull << 30);
    int rc = mdb_env_open(env, dir.c_str(), 0, 0644);
    for (int round = 0; rc == 0 && round < 4; ++round) {
      MDB_txn* txn;
      MDB_dbi dbi;
      rc = mdb_txn_begin(env, nullptr, 0, &txn);
      if (rc == 0) rc = mdb_dbi_open(txn, nullptr, 0, &dbi);
      if (rc == 0 && round == 0) rc = mdb_drop(txn, dbi, 0);
      for (const auto& [k, v] : round == 0 ? Pairs{} : Numbered(200, 1000 * round, 1000)) {
        MDB_val key{k.size(), const_cast<char*>(k.data())}, val{v.size(), const_cast<char*>(v.data())};
        if (rc == 0) rc = mdb_put(txn, dbi, &key, &val, 0);
      }
      rc = rc == 0 ? mdb_txn_commit(txn) : rc;
    }
    mdb_env_close(env);
    ::_exit(rc == 0 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(LmdbEnvTest, ALockedSnapshotKeepsItsPagesWhileAWriterCommitsAndAnUnlockedOneDoesNot) {
  for (bool lock : {true, false}) {
    SCOPED_TRACE(lock ? "lock" : "no lock");
    TempDir dir;
    testing::WriteLmdb(dir.Sub("db"), Numbered(200, 0, 1000));
    std::unique_ptr<LmdbEnv> env;
    ASSERT_OK(OpenAt(dir.Sub("db"), lock, "", &env));
    const auto before = Values(*env);
    ASSERT_EQ(before.size(), 200u);
    ASSERT_EQ(RewriteInChild(dir.Sub("db")), 0);
    // The bytes now at each value's offset, read from the file.
    size_t changed = 0;
    for (const auto& [offset, bytes] : before) {
      std::string now(bytes.size(), '\0');
      ASSERT_EQ(::pread(env->file().fd(), now.data(), now.size(), static_cast<off_t>(offset)),
                static_cast<ssize_t>(now.size()));
      changed += now != bytes;
    }
    if (lock) {
      EXPECT_EQ(changed, 0u) << "the writer reused pages of the snapshot a reader holds";
    } else {
      // Without the reader slot nothing stops the writer reusing the freed
      // pages: what the lock protects against happens.
      EXPECT_GT(changed, 0u);
    }
  }
}

TEST(LmdbEnvTest, CountRecordsReadsEachMetaPageAndMarksWhatItCannotRead) {
  TempDir dir;
  std::vector<std::string> paths;
  for (int k = 0; k < 150; ++k) {
    paths.push_back(dir.Sub("db" + std::to_string(k)));
    testing::WriteLmdb(paths.back(), Numbered(k % 7, k, 16), "", /*nosubdir=*/k % 2 == 1);
  }
  testing::WriteLmdb(dir.Sub("named"), Numbered(5, 0, 16), "frames");
  paths.push_back(dir.Sub("named"));
  paths.push_back(dir.Sub("absent"));
  testing::WriteAll(dir.Sub("not-lmdb"), std::string(8192, 'x'));
  paths.push_back(dir.Sub("not-lmdb"));
  for (unsigned threads : {1u, 4u}) {
    std::vector<MetaCount> counts;
    CountRecords(paths, "", threads, &counts);
    ASSERT_EQ(counts.size(), paths.size());
    for (int k = 0; k < 150; ++k) {
      std::unique_ptr<LmdbEnv> env;
      ASSERT_OK(OpenAt(paths[k], false, "", &env));
      ASSERT_TRUE(counts[k].ok) << paths[k];
      EXPECT_EQ(counts[k].records, env->tree().entries) << paths[k];
      EXPECT_EQ(counts[k].records, static_cast<uint64_t>(k % 7)) << paths[k];
      EXPECT_EQ(counts[k].file_bytes, env->identity().size) << paths[k];
      EXPECT_EQ(counts[k].format, 1) << paths[k];
    }
    EXPECT_TRUE(counts[150].ok);
    EXPECT_EQ(counts[150].records, 1u) << "the main tree holds the named database's header";
    EXPECT_FALSE(counts[151].ok) << "a missing path";
    EXPECT_FALSE(counts[152].ok) << "a file that is no LMDB";
  }
  std::vector<MetaCount> named;
  CountRecords({dir.Sub("named"), paths[3]}, "frames", 2, &named);
  EXPECT_TRUE(named[0].ok);
  EXPECT_EQ(named[0].records, 5u);
  EXPECT_FALSE(named[1].ok) << "no database 'frames' in it";
  std::vector<MetaCount> none;
  CountRecords({}, "", 4, &none);
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace lmdbloader
