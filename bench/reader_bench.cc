// Side-by-side read throughput: raw LMDB (mdb_get + copy, unbounded) against
// lmdbloader's pread mode and governed mmap mode, for 100 KiB and 2 KiB
// values, random order, warm page cache. Compare the ratios printed in one
// run; absolute times vary from machine to machine.
//
//   build/bench/reader_bench --benchmark_min_time=2
#include <benchmark/benchmark.h>
#include <lmdb.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "lmdbloader/reader.h"
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
};

Fixture& Corpus(size_t value_size) {
  static std::map<size_t, std::unique_ptr<Fixture>> cache;
  auto& f = cache[value_size];
  if (!f) {
    f = std::make_unique<Fixture>();
    f->value_size = value_size;
    f->count = kCorpusBytes / (value_size > 2000 ? value_size + 4096 : 2048);
    f->path = f->dir.Sub("db");
    testing::WriteNumberedLmdb(f->path, f->count, value_size);
    testing::WarmPageCache(f->path + "/data.mdb");
    f->order.resize(f->count);
    for (uint64_t i = 0; i < f->count; ++i) f->order[i] = i;
    std::shuffle(f->order.begin(), f->order.end(), std::mt19937_64(7));
  }
  return *f;
}

void BM_RawMdbGetCopy(benchmark::State& state) {
  Fixture& f = Corpus(state.range(0));
  MDB_env* env;
  mdb_env_create(&env);
  mdb_env_open(env, f.path.c_str(), MDB_RDONLY | MDB_NOLOCK | MDB_NORDAHEAD | MDB_NOTLS, 0644);
  MDB_txn* txn;
  MDB_dbi dbi;
  mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
  mdb_dbi_open(txn, nullptr, 0, &dbi);
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
  mdb_txn_abort(txn);
  mdb_env_close(env);
}

void BM_Lmdbloader(benchmark::State& state, AccessMode mode) {
  Fixture& f = Corpus(state.range(0));
  ReaderOptions options;
  options.mode = mode;
  options.rss_budget = 64ull << 20;
  std::unique_ptr<Reader> r;
  if (!Reader::Open(f.path, options, &r).ok()) {
    state.SkipWithError("open failed");
    return;
  }
  std::string buf(f.value_size, '\0');
  size_t k = 0;
  for (auto _ : state) {
    r->ReadInto(f.order[k++ % f.count], buf.data(), buf.size());
    benchmark::DoNotOptimize(buf.data());
  }
  state.SetBytesProcessed(state.iterations() * f.value_size);
}

BENCHMARK(BM_RawMdbGetCopy)->Arg(100 * 1024)->Arg(2048);
BENCHMARK_CAPTURE(BM_Lmdbloader, pread_budget64MiB, AccessMode::kPread)->Arg(100 * 1024)->Arg(2048);
BENCHMARK_CAPTURE(BM_Lmdbloader, mmap_budget64MiB, AccessMode::kMmap)->Arg(100 * 1024)->Arg(2048);

}  // namespace
}  // namespace lmdbloader

BENCHMARK_MAIN();
