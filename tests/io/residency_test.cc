// The memory budget, checked against the kernel's own count (/proc/self/statm)
// while every record of a corpus 16x the budget is read in random order, three
// passes, with the page cache holding large folios. Each case also runs plain
// unbounded mmap on the same corpus and shows it growing far past the bound,
// so the bounded cases cannot pass by accident.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "lmdbloader/reader.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::ProcessRssBytes;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kSlack = 8 * kMiB;

// Corpus size: 512 MiB by default, LMDBLOADER_TEST_CORPUS_MIB to change it
// (the sanitizer build uses less). The budget is always 1/16 of it.
uint64_t CorpusBytes() {
  const char* env = std::getenv("LMDBLOADER_TEST_CORPUS_MIB");
  return (env ? std::strtoull(env, nullptr, 10) : 512) * kMiB;
}

struct Corpus {
  std::string path;
  uint64_t count;
  size_t value_size;
};

class ResidencyTest : public ::testing::TestWithParam<size_t> {
 protected:
  static void SetUpTestSuite() { dir_ = new testing::TempDir(); }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // 100 KiB values live in overflow pages; 2000-byte values sit inline, two
  // to a leaf page.
  Corpus MakeCorpus() {
    size_t value_size = GetParam();
    uint64_t per_record = value_size > 2000 ? value_size + 4096 : 2048;
    Corpus c{dir_->Sub("v" + std::to_string(value_size)), CorpusBytes() / per_record, value_size};
    if (::access((c.path + "/data.mdb").c_str(), F_OK) != 0)
      testing::WriteNumberedLmdb(c.path, c.count, value_size);
    testing::WarmPageCache(c.path + "/data.mdb");
    return c;
  }

  // Reads every record in random order for `passes` passes; returns the
  // largest RSS growth seen (sampled after every read) since `baseline`.
  static uint64_t ReadAllMeasuring(Reader& r, const Corpus& c, int passes, uint64_t baseline,
                                   uint64_t* bad) {
    std::vector<uint64_t> order(c.count);
    for (uint64_t i = 0; i < c.count; ++i) order[i] = i;
    std::mt19937_64 rng(42);
    std::string buf(c.value_size, '\0'), expect(c.value_size, '\0');
    testing::RssSampler rss_now;
    uint64_t peak = 0;
    *bad = 0;
    for (int pass = 0; pass < passes; ++pass) {
      std::shuffle(order.begin(), order.end(), rng);
      for (uint64_t i : order) {
        if (!r.ReadInto(i, buf.data(), buf.size()).ok()) ++*bad;
        testing::FillRecordBytes(i, expect.data(), expect.size());
        if (buf != expect) ++*bad;
        uint64_t rss = rss_now.ResidentBytes();
        peak = std::max(peak, rss > baseline ? rss - baseline : 0);
      }
    }
    return peak;
  }

  static testing::TempDir* dir_;
};

testing::TempDir* ResidencyTest::dir_ = nullptr;

TEST_P(ResidencyTest, BudgetHoldsInBothModesWhileUnboundedMmapGrows) {
  Corpus c = MakeCorpus();
  const uint64_t budget = CorpusBytes() / 16;
  for (AccessMode mode : {AccessMode::kPread, AccessMode::kMmap}) {
    uint64_t baseline = ProcessRssBytes();
    ReaderOptions options;
    options.rss_budget = budget;
    options.mode = mode;
    std::unique_ptr<Reader> r;
    ASSERT_OK(Reader::Open(c.path, options, &r));
    uint64_t bad = 0;
    uint64_t peak = ReadAllMeasuring(*r, c, 3, baseline, &bad);
    EXPECT_EQ(bad, 0u) << AccessModeName(mode);
#ifndef LMDBLOADER_SANITIZED  // the sanitizers' shadow memory is RSS too
    EXPECT_LE(peak, budget + kSlack) << AccessModeName(mode) << ": RSS grew by " << peak / kMiB
                                     << " MiB against a budget of " << budget / kMiB << " MiB";
#endif
    std::printf("[ residency ] %zu-byte values, %s, budget %llu MiB: peak growth %.1f MiB\n",
                c.value_size, AccessModeName(mode), static_cast<unsigned long long>(budget / kMiB),
                peak / double(kMiB));
  }
  // The control: the same reads through an unbounded mapping.
  uint64_t baseline = ProcessRssBytes();
  ReaderOptions unbounded;
  unbounded.mode = AccessMode::kMmap;
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open(c.path, unbounded, &r));
  uint64_t bad = 0;
  uint64_t peak = ReadAllMeasuring(*r, c, 1, baseline, &bad);
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(peak, 4 * (budget + kSlack)) << "unbounded mmap grew only " << peak / kMiB << " MiB";
  std::printf("[ residency ] %zu-byte values, unbounded mmap: peak growth %.1f MiB\n", c.value_size,
              peak / double(kMiB));
}

TEST_P(ResidencyTest, BudgetHoldsInTwoForkedChildren) {
  Corpus c = MakeCorpus();
  const uint64_t budget = CorpusBytes() / 16;
  for (AccessMode mode : {AccessMode::kPread, AccessMode::kMmap}) {
    ReaderOptions options;
    options.rss_budget = budget;
    options.mode = mode;
    std::unique_ptr<Reader> r;
    ASSERT_OK(Reader::Open(c.path, options, &r));
    std::vector<pid_t> children;
    for (int k = 0; k < 2; ++k) {
      pid_t pid = ::fork();
      if (pid == 0) {
        uint64_t baseline = ProcessRssBytes();
        uint64_t bad = 0;
        uint64_t peak = ReadAllMeasuring(*r, c, 1, baseline, &bad);
        std::printf("[ residency ] child %d, %s: peak growth %.1f MiB, %llu bad\n", k, AccessModeName(mode),
                    peak / double(kMiB), static_cast<unsigned long long>(bad));
        std::fflush(stdout);
        bool within = true;
#ifndef LMDBLOADER_SANITIZED
        within = peak <= budget + kSlack;
#endif
        ::_exit(bad == 0 && within ? 0 : 1);
      }
      children.push_back(pid);
    }
    for (pid_t pid : children) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << AccessModeName(mode) << ": a child read wrong bytes or grew past the budget";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ValueSizes, ResidencyTest, ::testing::Values(100 * 1024, 2000),
                         [](const auto& info) { return info.param > 2000 ? "Overflow100KiB" : "Inline2000B"; });

}  // namespace
}  // namespace lmdbloader
