// BuildIndex: the record index of a database against liblmdb's own cursor
// (keys, values at the offsets it records, flags and order), the metadata
// keys it sets apart, and FindMapping against mappings this test makes.
#include "lmdb/index_builder.h"

#include <fcntl.h>
#include <lmdb.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "lmdb/record_index_util.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;
using Pairs = std::vector<std::pair<std::string, std::string>>;

Status Build(const std::string& path, const std::string& db_name, std::string_view meta_prefix,
             RecordIndex* index, DataLocation* location) {
  LMDBLOADER_RETURN_IF_ERROR(ResolveLocation(path, location));
  std::unique_ptr<LmdbEnv> env;
  LMDBLOADER_RETURN_IF_ERROR(LmdbEnv::Open(*location, /*lock=*/false, db_name, &env));
  return BuildIndex(*env, *location, db_name, meta_prefix, index);
}

std::string ReadAt(const std::string& file, uint64_t offset, uint64_t size) {
  std::string out(size, '\0');
  const int fd = ::open(file.c_str(), O_RDONLY);
  EXPECT_EQ(::pread(fd, out.data(), size, static_cast<off_t>(offset)), static_cast<ssize_t>(size));
  ::close(fd);
  return out;
}

std::string U32(uint32_t v) { return std::string(reinterpret_cast<char*>(&v), 4); }

TEST(IndexBuilderTest, TheIndexHoldsWhatLiblmdbsCursorReturnsInItsOrder) {
  struct Case {
    const char* name;
    unsigned flags;
    std::string db_name;
    bool keys_sorted;  // bytewise order, so the index may binary-search its keys
  };
  Pairs plain, ints, dups;
  for (int i = 0; i < 1500; ++i) plain.emplace_back("key" + std::to_string(i * 7919 % 1501), testing::RecordBytes(i, i % 10 == 0 ? 5000 : 200));
  for (uint32_t i = 0; i < 800; ++i) ints.emplace_back(U32(i * 2654435761u), std::to_string(i));
  for (int k = 0; k < 40; ++k)
    for (int d = 0; d < (k % 4 ? 3 : 300); ++d) dups.emplace_back("k" + std::to_string(k), testing::RecordBytes(d, 30));
  for (const Case& c : {Case{"plain", 0, "", true}, Case{"named", 0, "images", true},
                        Case{"integerkey", MDB_INTEGERKEY, "", false}, Case{"reversekey", MDB_REVERSEKEY, "", false},
                        Case{"dupsort", MDB_DUPSORT, "", true}}) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    const Pairs& records = c.flags & MDB_INTEGERKEY ? ints : c.flags & MDB_DUPSORT ? dups : plain;
    testing::WriteLmdb(dir.Sub("db"), records, c.db_name, false, c.flags);
    unsigned flags = 0;
    const Pairs expected = testing::LiblmdbPairs(dir.Sub("db"), c.db_name, &flags);
    RecordIndex index;
    DataLocation location;
    ASSERT_OK(Build(dir.Sub("db"), c.db_name, "", &index, &location));
    ASSERT_EQ(index.size(), expected.size());
    for (uint64_t i = 0; i < index.size(); ++i) {
      ASSERT_EQ(testing::KeyAt(index, i), expected[i].first) << i;
      ASSERT_EQ(ReadAt(location.data_path, index.offset(i), index.value_size(i)), expected[i].second) << i;
    }
    EXPECT_EQ(index.db_flags(), flags);
    EXPECT_EQ(index.keys_sorted(), c.keys_sorted);
    EXPECT_EQ(index.db_name, c.db_name);
    EXPECT_TRUE(index.meta().empty());
  }
}

TEST(IndexBuilderTest, KeysWithTheMetadataPrefixAreSetApartInTheMainDatabaseOnly) {
  const Pairs records = {{"a", "1"}, {"b", "22"}, {"meta/x", "333"}, {"meta/y", "4444"}, {"z", "5"}};
  TempDir dir;
  testing::WriteLmdb(dir.Sub("main"), records);
  testing::WriteLmdb(dir.Sub("named"), records, "named");
  RecordIndex index;
  DataLocation location;
  ASSERT_OK(Build(dir.Sub("main"), "", "meta/", &index, &location));
  ASSERT_EQ(index.size(), 3u);
  EXPECT_EQ(testing::KeyAt(index, 2), "z");
  ASSERT_EQ(index.meta().size(), 2u);
  const ValueLocation y = index.meta().at("meta/y");
  EXPECT_EQ(ReadAt(location.data_path, y.offset, y.size), "4444");
  // A named database is a user's own: its keys are records whatever they
  // begin with; so are the main database's without a prefix.
  RecordIndex named, unprefixed;
  ASSERT_OK(Build(dir.Sub("named"), "named", "meta/", &named, &location));
  EXPECT_EQ(named.size(), 5u);
  EXPECT_TRUE(named.meta().empty());
  ASSERT_OK(Build(dir.Sub("main"), "", "", &unprefixed, &location));
  EXPECT_EQ(unprefixed.size(), 5u);
}

TEST(IndexBuilderTest, TheIdentityIsTheFilesAndItsSnapshots) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), {{"a", "1"}});
  RecordIndex first, again;
  DataLocation location;
  ASSERT_OK(Build(dir.Sub("db"), "", "", &first, &location));
  ASSERT_OK(Build(dir.Sub("db"), "", "", &again, &location));
  EXPECT_TRUE(first.identity == again.identity);
  struct stat st;
  ASSERT_EQ(::stat(location.data_path.c_str(), &st), 0);
  EXPECT_EQ(first.identity.inode, st.st_ino);
  EXPECT_EQ(first.identity.size, static_cast<uint64_t>(st.st_size));
  // Another commit is another snapshot: another identity.
  testing::WriteLmdb(dir.Sub("db"), {{"b", "2"}});
  RecordIndex later;
  ASSERT_OK(Build(dir.Sub("db"), "", "", &later, &location));
  EXPECT_FALSE(first.identity == later.identity);
  EXPECT_GT(later.identity.txnid, first.identity.txnid);
  EXPECT_EQ(later.size(), 2u);
}

TEST(IndexBuilderTest, AnEntryCountFromADamagedMetaPageReservesNoMoreThanTheFileCouldHold) {
  // The main tree's md_entries in both meta pages (page header 16 bytes,
  // MDB_meta's magic, version, address and map size 24, the free tree 48,
  // then the main tree, whose entry count is its 33rd-40th bytes).
  TempDir dir;
  testing::WriteLmdb(dir.Sub("db"), {{"a", "1"}, {"b", "2"}});
  const std::string data = dir.Sub("db") + "/data.mdb";
  const int fd = ::open(data.c_str(), O_RDWR);
  const uint64_t huge = uint64_t{1} << 60;
  const off_t page = ::sysconf(_SC_PAGESIZE);  // LMDB's page size is the system's
  for (off_t meta : {off_t{0}, page})
    ASSERT_EQ(::pwrite(fd, &huge, 8, meta + 16 + 24 + 48 + 32), 8);
  ::close(fd);
  RecordIndex index;
  DataLocation location;
  // A reserve of 2^60 entries would throw; one of 2^60 / 10 bytes' worth
  // would show in the index's own size, which counts its capacity.
  Status s = Build(dir.Sub("db"), "", "", &index, &location);
  EXPECT_TRUE(s.ok() || s.code() == Status::Code::kCorruption) << s.ToString();
  EXPECT_LT(index.MemoryBytes(), 1u << 20);
  if (s.ok()) {
    EXPECT_EQ(index.size(), 2u);
  }
}

TEST(IndexBuilderTest, FindMappingFindsTheWholeMappingOfAFileFromAnyAddressInIt) {
  TempDir dir;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const std::string path = dir.Sub("file");
  const std::string bytes(5 * page, 'x');
  const int fd = ::open(path.c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  // Mapped from its second page: the mapping says where offset 0 would be.
  void* p = ::mmap(nullptr, 3 * page, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(page));
  ASSERT_NE(p, MAP_FAILED);
  ::close(fd);
  const char* mapped = static_cast<const char*>(p);
  for (size_t at : {size_t{0}, page + 904, 3 * page - 1}) {
    const char* base = nullptr;
    uint64_t length = 0;
    ASSERT_OK(FindMapping(mapped + at, &base, &length));
    EXPECT_EQ(base, mapped - page) << at;
    EXPECT_EQ(length, 4 * page) << at;
  }
  ::munmap(p, 3 * page);
  // An address no mapping holds (the page just unmapped).
  const char* base = nullptr;
  uint64_t length = 0;
  EXPECT_EQ(FindMapping(mapped, &base, &length).code(), Status::Code::kCorruption);
}

}  // namespace
}  // namespace lmdbloader
