// Side-by-side read throughput: raw LMDB (mdb_get + copy, unbounded) against
// lmdbloader's pread mode and governed mmap mode, for 100 KiB and 2 KiB
// values, random order, warm page cache; plus a bare pread() per record (no
// library), the floor any pread-based reader pays. Corpora with record
// checksums, read with verification on and off. And what an open costs:
// liblmdb's cursor walk (what the index walk used to be) against the checked
// page reader's walk and a load of the saved index; and one pass over memory
// out of the CPU's caches, copied or checksummed. Compare the ratios
// printed in one run; absolute times vary from machine to machine.
//
//   build/bench/reader_bench --benchmark_min_time=2
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <lmdb.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "base/checksum.h"
#include "corpus/corpus_format.h"
#include "lmdb/index_builder.h"
#include "lmdbloader/reader.h"
#include "lmdbloader/writer.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

constexpr uint64_t kCorpusBytes = 256ull << 20;

struct Fixture {
  testing::TempDir dir;
  std::string path;
  uint64_t count;
  size_t value_size;
  std::vector<uint64_t> order;
  std::vector<uint64_t> offsets;  // file offset of each value, for the bare pread floor
};

// A raw liblmdb read transaction on the main database of `path`, the way
// an unbounded reader opens it; Close() ends it.
struct RawLmdb {
  MDB_env* env = nullptr;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  explicit RawLmdb(const std::string& path) {
    mdb_env_create(&env);
    if (mdb_env_open(env, path.c_str(), MDB_RDONLY | MDB_NOLOCK | MDB_NORDAHEAD | MDB_NOTLS, 0644) != 0 ||
        mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) != 0 || mdb_dbi_open(txn, nullptr, 0, &dbi) != 0)
      std::abort();
  }
  // Closed with the object: every benchmark iteration that opens one would
  // otherwise leave a mapping and a descriptor behind, and repetitions run
  // out of mappings (vm.max_map_count) and abort.
  ~RawLmdb() {
    if (txn != nullptr) mdb_txn_abort(txn);
    if (env != nullptr) mdb_env_close(env);
  }
  RawLmdb(const RawLmdb&) = delete;
  RawLmdb& operator=(const RawLmdb&) = delete;
};

// Offsets of every value in the data file: its address in LMDB's map minus
// the map's base (found as the library finds it, in /proc/self/maps).
std::vector<uint64_t> ValueOffsets(const std::string& path, uint64_t count) {
  RawLmdb db(path);
  MDB_txn* txn = db.txn;
  MDB_dbi dbi = db.dbi;
  std::vector<uint64_t> offsets(count);
  const char* base = nullptr;
  uint64_t length = 0;
  for (uint64_t i = 0; i < count; ++i) {
    std::string key = RecordKey(i);
    MDB_val kv{key.size(), key.data()}, val;
    mdb_get(txn, dbi, &kv, &val);
    if (base == nullptr && !FindMapping(val.mv_data, &base, &length).ok()) std::abort();
    offsets[i] = static_cast<uint64_t>(static_cast<const char*>(val.mv_data) - base);
  }
  return offsets;
}

// A 256 MiB database of `value_size` values, written once per size by
// `write(path, count)`, warm in the page cache, with a shuffled read order.
template <typename Write>
Fixture& CachedFixture(std::map<size_t, std::unique_ptr<Fixture>>& cache, size_t value_size, Write write) {
  auto& f = cache[value_size];
  if (!f) {
    f = std::make_unique<Fixture>();
    f->value_size = value_size;
    f->count = kCorpusBytes / (value_size > 2000 ? value_size + 4096 : 2048);
    f->path = f->dir.Sub("db");
    write(f->path, f->count);
    testing::WarmPageCache(f->path + "/data.mdb");
    f->order.resize(f->count);
    for (uint64_t i = 0; i < f->count; ++i) f->order[i] = i;
    std::shuffle(f->order.begin(), f->order.end(), std::mt19937_64(7));
  }
  return *f;
}

// Records written straight with liblmdb (keys are record numbers).
Fixture& Corpus(size_t value_size) {
  static std::map<size_t, std::unique_ptr<Fixture>> cache;
  Fixture& f = CachedFixture(cache, value_size, [&](const std::string& path, uint64_t count) {
    testing::WriteNumberedLmdb(path, count, value_size);
  });
  if (f.offsets.empty()) f.offsets = ValueOffsets(f.path, f.count);
  return f;
}

// The same shape written by CorpusWriter: records carry checksums.
Fixture& CorpusWithChecksums(size_t value_size) {
  static std::map<size_t, std::unique_ptr<Fixture>> cache;
  return CachedFixture(cache, value_size, [&](const std::string& path, uint64_t count) {
    std::unique_ptr<CorpusWriter> w;
    if (!CorpusWriter::Create(path, WriterOptions(), &w).ok()) std::abort();
    for (uint64_t i = 0; i < count; ++i)
      if (!w->Add("r" + std::to_string(i), testing::RecordBytes(i, value_size)).ok()) std::abort();
    if (!w->Finish("{}").ok()) std::abort();
  });
}

void BM_RawMdbGetCopy(benchmark::State& state) {
  Fixture& f = Corpus(state.range(0));
  RawLmdb db(f.path);
  MDB_txn* txn = db.txn;
  MDB_dbi dbi = db.dbi;
  std::string buf(f.value_size, '\0');
  size_t k = 0;
  for (auto _ : state) {
    uint64_t i = f.order[k++ % f.count];
    char key[8];
    for (int b = 7; b >= 0; --b, i >>= 8) key[b] = static_cast<char>(i & 0xff);
    MDB_val kv{8, key}, v;
    mdb_get(txn, dbi, &kv, &v);
    std::memcpy(buf.data(), v.mv_data, v.mv_size);
    benchmark::DoNotOptimize(buf.data());
  }
  state.SetBytesProcessed(state.iterations() * f.value_size);
}

// The floor for pread mode: one pread() per record at a known offset, no
// library at all. lmdbloader's pread mode over this ratio is its own overhead.
void BM_BarePread(benchmark::State& state) {
  Fixture& f = Corpus(state.range(0));
  int fd = ::open((f.path + "/data.mdb").c_str(), O_RDONLY);
  std::string buf(f.value_size, '\0');
  size_t k = 0;
  for (auto _ : state) {
    ssize_t n = ::pread(fd, buf.data(), f.value_size, static_cast<off_t>(f.offsets[f.order[k++ % f.count]]));
    benchmark::DoNotOptimize(n);
  }
  state.SetBytesProcessed(state.iterations() * f.value_size);
  ::close(fd);
}

// Every record of `f` in its random order through a Reader opened with
// `options` (a 64 MiB budget).
void ReadRandomly(benchmark::State& state, const Fixture& f, ReaderOptions options) {
  options.rss_budget = 64ull << 20;
  std::unique_ptr<Reader> r;
  if (!Reader::Open(f.path, options, &r).ok()) {
    state.SkipWithError("open failed");
    return;
  }
  std::string buf(f.value_size, '\0');
  size_t k = 0;
  for (auto _ : state) {
    if (!r->ReadInto(f.order[k++ % f.count], buf.data(), buf.size()).ok()) state.SkipWithError("read failed");
    benchmark::DoNotOptimize(buf.data());
  }
  state.SetBytesProcessed(state.iterations() * f.value_size);
}

void BM_Lmdbloader(benchmark::State& state, AccessMode mode) {
  ReaderOptions options;
  options.mode = mode;
  ReadRandomly(state, Corpus(state.range(0)), options);
}

void BM_CorpusPread(benchmark::State& state, bool verify) {
  ReaderOptions options;
  options.verify_checksums = verify ? ChecksumPolicy::kEveryRead : ChecksumPolicy::kOff;
  ReadRandomly(state, CorpusWithChecksums(state.range(0)), options);
}

// Open cost. liblmdb's cursor walk over the whole database, recording each
// value's offset: what building the index cost before the checked reader.
void BM_OpenWalkLiblmdbCursor(benchmark::State& state) {
  Fixture& f = Corpus(state.range(0));
  std::vector<uint64_t> offsets;
  for (auto _ : state) {
    RawLmdb db(f.path);
    MDB_txn* txn = db.txn;
    MDB_dbi dbi = db.dbi;
    MDB_cursor* c;
    mdb_cursor_open(txn, dbi, &c);
    MDB_val k, v;
    const char* base = nullptr;
    uint64_t length = 0;
    offsets.clear();
    for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
      if (base == nullptr && !FindMapping(v.mv_data, &base, &length).ok()) std::abort();
      offsets.push_back(static_cast<uint64_t>(static_cast<const char*>(v.mv_data) - base));
    }
    mdb_cursor_close(c);
  }
  state.counters["records"] = static_cast<double>(offsets.size());
}

// Reader::Open: the checked walk (index_dir "none": nothing saved or loaded),
// or loading the index saved by an earlier open.
void BM_OpenReader(benchmark::State& state, bool saved_index) {
  Fixture& f = Corpus(state.range(0));
  ReaderOptions options;
  options.index_dir = saved_index ? "" : "none";
  std::unique_ptr<Reader> r;
  if (saved_index && !Reader::Open(f.path, options, &r).ok()) state.SkipWithError("open failed");
  for (auto _ : state) {
    if (!Reader::Open(f.path, options, &r).ok()) state.SkipWithError("open failed");
    benchmark::DoNotOptimize(r.get());
  }
  state.counters["records"] = static_cast<double>(r ? r->size() : 0);
}

// The floor under warm reads of large records: one pass over bytes that are
// in memory but not in the CPU's caches (a 512 MiB buffer walked record by
// record). A copy out (what py-lmdb's txn.get does from its map) and a
// checksum in place (what views with verification do) are each one such
// pass, so both run at the memory's speed for one core.
enum class MemoryPass { kChecksumInPlace, kCopyOut };
void BM_MemoryPass(benchmark::State& state, MemoryPass pass) {
  static std::string memory(512ull << 20, 'm');
  const size_t size = state.range(0);
  std::string out(size, '\0');
  size_t offset = 0;
  for (auto _ : state) {
    if (offset + size > memory.size()) offset = 0;
    if (pass == MemoryPass::kChecksumInPlace) {
      benchmark::DoNotOptimize(Checksum(memory.data() + offset, size));
    } else {
      std::memcpy(out.data(), memory.data() + offset, size);
      benchmark::DoNotOptimize(out.data());
    }
    offset += size;
  }
  state.SetBytesProcessed(state.iterations() * size);
}

BENCHMARK_CAPTURE(BM_MemoryPass, checksum_in_place, MemoryPass::kChecksumInPlace)->Arg(100 * 1024)->Arg(1 << 20);
BENCHMARK_CAPTURE(BM_MemoryPass, copy_out, MemoryPass::kCopyOut)->Arg(100 * 1024)->Arg(1 << 20);
BENCHMARK(BM_RawMdbGetCopy)->Arg(100 * 1024)->Arg(2048);
BENCHMARK(BM_BarePread)->Arg(100 * 1024)->Arg(2048);
BENCHMARK_CAPTURE(BM_Lmdbloader, pread_budget64MiB, AccessMode::kPread)->Arg(100 * 1024)->Arg(2048);
BENCHMARK_CAPTURE(BM_Lmdbloader, mmap_budget64MiB, AccessMode::kMmap)->Arg(100 * 1024)->Arg(2048);
BENCHMARK_CAPTURE(BM_CorpusPread, checksums_verified, true)->Arg(100 * 1024)->Arg(2048);
BENCHMARK_CAPTURE(BM_CorpusPread, checksums_skipped, false)->Arg(100 * 1024)->Arg(2048);
BENCHMARK(BM_OpenWalkLiblmdbCursor)->Arg(100 * 1024)->Arg(2048)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_OpenReader, checked_walk, false)->Arg(100 * 1024)->Arg(2048)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_OpenReader, saved_index, true)->Arg(100 * 1024)->Arg(2048)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lmdbloader

BENCHMARK_MAIN();
