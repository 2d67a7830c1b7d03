// The `lmdbloader` command: get, scan, stat, verify, convert. The reading
// commands take what Reader::Open takes: one database, a corpus or shard
// set, or a set of files (a folder of LMDBs, a glob, several paths).
// Errors go to stderr with exit status 1 (2 for bad usage).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>

#include "lmdbloader/atomic_write.h"
#include "lmdbloader/database_info.h"
#include "lmdbloader/memory.h"
#include "lmdbloader/reader.h"
#include "lmdbloader/scan.h"
#include "lmdbloader/verify.h"
#include "tools/convert_command.h"
#include "tools/option_flags.h"
#include "tools/report_json.h"

namespace lmdbloader {
namespace {

using json = nlohmann::json;

int Fail(const Status& s) {
  std::fprintf(stderr, "lmdbloader: %s\n", s.ToString().c_str());
  return 1;
}

// A value no run could use (a zero batch, an unknown order): bad usage.
int Usage(const char* command, const std::string& what) {
  std::fprintf(stderr, "lmdbloader %s: %s\n", command, what.c_str());
  return 2;
}

// --index as written: decimal digits only. Sets *too_big where the number
// does not fit 64 bits (no file holds that many records, so it is out of
// range, reported with the number as given rather than a clamped one).
bool ParseIndex(const std::string& text, uint64_t* index, bool* too_big) {
  if (text.empty() || text.size() > 40 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  errno = 0;
  *index = std::strtoull(text.c_str(), nullptr, 10);
  *too_big = errno == ERANGE;
  return true;
}

// Options shared by the reading commands: every reader option of the
// library's one list (ReaderOptionList), as --name with '-' for '_', passed
// through as text; the library parses and checks them. The budget's default
// comes from LMDBLOADER_RSS_BUDGET, as in Python.
struct OpenFlags {
  std::vector<std::string> paths;  // one path, or several read as one set of files
  std::string path;                // how messages name them (Reader::path())
  GivenOptions given;

  void Add(CLI::App* cmd) {
    cmd->add_option("path", paths,
                    "LMDB folder or data file, corpus or shard set; or a set of LMDBs: a folder of them "
                    "(*.lmdb, *.mdb, folders holding data.mdb), a glob, or several paths")
        ->required();
    AddOptionFlags(cmd, ReaderOptionList(), [](const std::string& name) { return ReaderOptionValue(ReaderOptions(), name); },
                   &given);
    // The checksum policy's short forms.
    cmd->add_flag_function("--no-verify-checksums", [this](int64_t) { given.emplace_back("verify_checksums", "false"); },
                           "corpora: skip checking each record's checksum (--verify-checksums false)");
    cmd->add_flag_function("--verify-checksums-once",
                           [this](int64_t) { given.emplace_back("verify_checksums", "once"); },
                           "corpora: check each record's checksum the first time it is read, then trust the page "
                           "cache (--verify-checksums once)");
  }
  // The options as given: InvalidArgument naming a bad one (a usage error).
  Status Options(ReaderOptions* options) const {
    LMDBLOADER_RETURN_IF_ERROR(ReaderOptionsFromEnvironment(options));
    return ApplyGivenOptions(given, &SetReaderOption, options);
  }
  // The named database given (--db), "" for the main one.
  std::string db() const {
    ReaderOptions options;
    return Options(&options).ok() ? options.db_name : "";
  }
  // The options as given, checked together as an open checks them
  // (InvalidArgument: a usage error).
  Status CheckedOptions(ReaderOptions* options) const {
    LMDBLOADER_RETURN_IF_ERROR(Options(options));
    return ValidateOptions(*options);
  }
  Status Open(std::unique_ptr<Reader>* reader) const {
    ReaderOptions options;
    LMDBLOADER_RETURN_IF_ERROR(Options(&options));
    return paths.size() == 1 ? Reader::Open(path, options, reader) : Reader::Open(paths, options, reader);
  }
  // After parsing: the name of what is read, as Reader::Open names a list.
  void Parsed() {
    path = paths.front();
    if (paths.size() > 1) path += " and " + std::to_string(paths.size() - 1) + " more";
  }
};

Status FromHex(const std::string& hex, std::string* out) {
  if (hex.size() % 2) return Status::InvalidArgument("--key-hex needs an even number of hex digits");
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    int v = 0;
    for (int k = 0; k < 2; ++k) {
      char c = hex[i + k];
      int n = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (n < 0) return Status::InvalidArgument("--key-hex: '" + hex + "' is not hexadecimal");
      v = v * 16 + n;
    }
    *out += static_cast<char>(v);
  }
  return Status::OK();
}

// A key as an error message shows it: printable ASCII quoted, anything else
// in hexadecimal; long keys cut after 64 bytes.
std::string KeyForMessage(std::string_view key) {
  constexpr size_t kShown = 64;
  std::string_view shown = key.substr(0, kShown);
  bool printable = std::all_of(shown.begin(), shown.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  std::string out;
  if (printable) {
    out = "'" + std::string(shown) + "'";
  } else {
    static const char kHex[] = "0123456789abcdef";
    out = "0x";
    for (unsigned char c : shown) out += {kHex[c >> 4], kHex[c & 15]};
  }
  if (key.size() > kShown) out += "... (" + std::to_string(key.size()) + " bytes)";
  return out;
}

int RunGet(const OpenFlags& flags, bool by_index, const std::string& index, const std::string& key,
           const std::string& key_hex, const std::string& output, bool name) {
  uint64_t position = 0;
  bool too_big = false;
  if (by_index && !ParseIndex(index, &position, &too_big))
    return Usage("get", "--index must be a whole number, 0 or more, got '" + index + "'");
  std::unique_ptr<Reader> r;
  Status s = flags.Open(&r);
  if (!s.ok()) return Fail(s);
  if (too_big)
    return Fail(Status::OutOfRange("index " + index + " out of range for " + r->path() + " (" +
                                   std::to_string(r->size()) + " records)"));
  if (!by_index) {
    std::string k = key;
    if (!key_hex.empty() && !(s = FromHex(key_hex, &k)).ok()) return Fail(s);
    s = r->Find(k, &position);
    if (s.IsNotFound()) return Fail(Status::NotFound("key " + KeyForMessage(k) + " not found in " + r->path()));
    if (!s.ok()) return Fail(s);
  }
  std::string value;
  s = name ? r->Name(position, &value) : r->Read(position, &value);
  if (!s.ok()) return Fail(s);
  if (name) value += '\n';
  if (output.empty() || output == "-") {
    // A full disk or closed pipe shows only when the buffer is flushed.
    if (std::fwrite(value.data(), 1, value.size(), stdout) != value.size() || std::fflush(stdout) != 0)
      return Fail(Status::FromErrno(errno, "write", "standard output"));
    return 0;
  }
  s = WriteFileAtomically(output, value);
  return s.ok() ? 0 : Fail(s);
}

int RunScan(const OpenFlags& flags, int passes, const std::string& order, int batch, bool as_json) {
  if (order != "random" && order != "key") return Usage("scan", "--order must be random or key, got '" + order + "'");
  if (passes < 1) return Usage("scan", "--passes must be at least 1, got " + std::to_string(passes));
  if (batch < 1) return Usage("scan", "--batch must be at least 1, got " + std::to_string(batch));
  StatmProbe statm;
  Status s = statm.Open();
  if (!s.ok()) return Fail(s);
  uint64_t baseline = 0, rss = 0, file_rss = 0;
  s = statm.Read(&baseline, &file_rss);
  if (!s.ok()) return Fail(s);
  std::unique_ptr<Reader> r;
  s = flags.Open(&r);
  if (!s.ok()) return Fail(s);
  std::vector<uint64_t> positions(r->size());
  for (uint64_t i = 0; i < positions.size(); ++i) positions[i] = i;
  std::mt19937_64 rng(12345);
  uint64_t peak = baseline, bytes = 0;
  auto count_bytes = [&](const ScanSlice& slice) {
    bytes += slice.bytes;
    return Status::OK();
  };
  auto sample_rss = [&] {  // half a microsecond: sample every batch
    LMDBLOADER_RETURN_IF_ERROR(statm.Read(&rss, &file_rss));
    peak = std::max(peak, rss);
    return Status::OK();
  };
  auto start = std::chrono::steady_clock::now();
  for (int pass = 0; pass < passes; ++pass) {
    if (order == "random") std::shuffle(positions.begin(), positions.end(), rng);
    s = ScanRecords(*r, positions.data(), positions.size(), static_cast<size_t>(batch), count_bytes, sample_rss);
    if (!s.ok()) return Fail(s);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ReaderStats st = r->stats();
  json out = {{"path", flags.path},
              {"order", order},
              {"passes", passes},
              {"records", r->size() * passes},
              {"bytes", bytes},
              {"seconds", seconds},
              {"records_per_s", seconds > 0 ? r->size() * passes / seconds : 0.0},
              {"mb_per_s", seconds > 0 ? bytes / seconds / 1e6 : 0.0},
              {"baseline_rss_bytes", baseline},
              {"peak_rss_bytes", peak},
              {"peak_growth_bytes", peak - baseline},
              {"batch", batch}};
  AddReportFields(st, &out);  // mode, the budget, drops, the index, the I/O chosen
  if (as_json) {
    std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << std::endl;
  } else {
    std::printf("%s: %llu records, %.1f MB in %.2f s: %.0f records/s, %.1f MB/s (%s, %s order)\n",
                flags.path.c_str(), static_cast<unsigned long long>(r->size() * passes), bytes / 1e6, seconds,
                out["records_per_s"].get<double>(), out["mb_per_s"].get<double>(), st.mode.c_str(), order.c_str());
    std::printf("reads: %s, batches of %d, queue depth %u, cache %s%s\n", st.io_engine.c_str(), batch,
                st.queue_depth, st.cache_policy.c_str(),
                st.io_fallback.empty() ? "" : (" (io_uring unavailable: " + st.io_fallback + ")").c_str());
    std::printf("peak RSS %.1f MiB (grew %.1f MiB since before the open; budget %s)\n", peak / 1048576.0,
                (peak - baseline) / 1048576.0,
                st.rss_budget ? (std::to_string(st.rss_budget >> 20) + " MiB").c_str() : "unbounded");
  }
  return 0;
}

// LMDB's counts of a set of files: its files' summed, the deepest tree, the
// newest transaction, as InspectDatabase sums a shard set's parts.
Status InspectMembers(const std::string& name, const std::vector<FileSetMember>& members, const std::string& db,
                      DatabaseInfo* info) {
  *info = DatabaseInfo();
  info->data_path = name;
  for (const FileSetMember& m : members) {
    DatabaseInfo one;
    Status s = InspectDatabase(m.path, db, &one);
    if (!s.ok()) return s.message().find(m.path) == std::string::npos ? s.WithPrefix(m.path + ": ") : s;
    AddDatabaseInfo(one, info);
  }
  return Status::OK();
}

int RunStat(const OpenFlags& flags, bool as_json) {
  // A set of files is known once the Reader has listed it: each of its
  // files is inspected, an error naming the one that fails.
  DatabaseInfo info;
  std::unique_ptr<Reader> r;
  Status s = flags.Open(&r);
  if (s.ok()) {
    const std::vector<FileSetMember> members = r->FileSetMembers();
    s = members.empty() ? InspectDatabase(flags.path, flags.db(), &info)
                        : InspectMembers(r->path(), members, flags.db(), &info);
  }
  if (!s.ok()) return Fail(s);
  std::vector<uint64_t> sizes(r->size());
  uint64_t total = 0;
  for (uint64_t i = 0; i < sizes.size(); ++i) {
    if (!(s = r->ValueSize(i, &sizes[i])).ok()) return Fail(s);
    total += sizes[i];
  }
  std::sort(sizes.begin(), sizes.end());
  auto pct = [&](double p) { return sizes.empty() ? 0 : sizes[std::min<size_t>(sizes.size() - 1, p * sizes.size())]; };
  json out = {{"path", flags.path},
              {"records", r->size()},
              {"value_bytes", {{"total", total}, {"min", sizes.empty() ? 0 : sizes.front()}, {"p50", pct(0.5)},
                               {"p90", pct(0.9)}, {"p99", pct(0.99)}, {"max", sizes.empty() ? 0 : sizes.back()},
                               {"mean", sizes.empty() ? 0.0 : double(total) / sizes.size()}}},
              {"corpus", r->is_corpus()},
              {"files", r->stats().files}};
  AddReportFields(info, &out);  // the data file, its pages, depth and last transaction
  if (r->is_corpus()) out["manifest"] = json::parse(r->manifest(), nullptr, false);
  if (as_json) {
    std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << std::endl;
    return 0;
  }
  std::printf("%s\n  records         %llu\n  file            %llu bytes\n  page size       %u\n"
              "  depth           %u\n  branch pages    %llu\n  leaf pages      %llu\n  overflow pages  %llu\n"
              "  value bytes     min %llu  p50 %llu  p90 %llu  p99 %llu  max %llu  mean %.1f\n  corpus          %s\n",
              flags.path.c_str(), (unsigned long long)r->size(), (unsigned long long)info.file_bytes,
              info.page_size, info.depth, (unsigned long long)info.branch_pages, (unsigned long long)info.leaf_pages,
              (unsigned long long)info.overflow_pages, (unsigned long long)out["value_bytes"]["min"],
              (unsigned long long)pct(0.5), (unsigned long long)pct(0.9), (unsigned long long)pct(0.99),
              (unsigned long long)out["value_bytes"]["max"], out["value_bytes"]["mean"].get<double>(),
              r->is_corpus() ? "yes (lmdbloader)" : "no (plain LMDB)");
  if (!r->FileSetMembers().empty()) std::printf("  files           %llu\n", (unsigned long long)r->stats().files);
  return 0;
}

int RunVerify(const OpenFlags& flags, bool as_json) {
  ReaderOptions options;
  Status s = flags.Options(&options);
  VerifyReport report;
  if (s.ok())
    s = flags.paths.size() == 1 ? VerifyDatabase(flags.path, options, &report)
                                : VerifyDatabase(flags.paths, options, &report);
  if (!s.ok()) return Fail(s);
  if (as_json) {
    std::cout << json{{"path", flags.path}, {"records", report.records}, {"files", std::max<uint64_t>(report.files, 1)},
                      {"ok", report.problems.empty()}, {"problems", report.problems}}
                     .dump(2, ' ', false, json::error_handler_t::replace)
              << std::endl;
  } else if (report.problems.empty()) {
    std::printf("%s: OK, %llu records read%s\n", flags.path.c_str(), (unsigned long long)report.records,
                report.files ? (" in " + std::to_string(report.files) + " files").c_str() : "");
  }
  if (!as_json || !report.opened)
    for (const auto& p : report.problems) std::fprintf(stderr, "%s: %s\n", flags.path.c_str(), p.c_str());
  return report.problems.empty() ? 0 : 1;
}

}  // namespace
}  // namespace lmdbloader

int main(int argc, char** argv) {
  using namespace lmdbloader;
  CLI::App app{"lmdbloader: read LMDB datasets under a per-process memory budget"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("lmdbloader ") + LMDBLOADER_VERSION);

  OpenFlags get_flags, scan_flags, stat_flags, verify_flags;
  std::string index, key, key_hex, output;
  bool name = false, scan_json = false, stat_json = false, verify_json = false;
  int passes = 1;
  std::string order = "random";
  int batch = 512;

  CLI::App* get = app.add_subcommand("get", "print one record's bytes");
  get_flags.Add(get);
  auto* by_index = get->add_option("--index", index, "position (key order)");
  auto* by_key = get->add_option("--key", key, "key (bytes as given)");
  auto* by_hex = get->add_option("--key-hex", key_hex, "key in hexadecimal");
  by_index->excludes(by_key)->excludes(by_hex);
  by_key->excludes(by_hex);
  get->add_option("-o,--output", output, "write to this file instead of stdout");
  get->add_flag("--name", name, "print the record's name (corpora) instead of its bytes");

  CLI::App* scan = app.add_subcommand("scan", "read every record under a budget; report throughput and peak RSS");
  scan_flags.Add(scan);
  scan->add_option("--passes", passes, "passes over the data (default 1)");
  scan->add_option("--order", order, "random or key (default random)");
  scan->add_option("--batch", batch, "records prefetched and read together in one batch (default 512)");
  scan->add_flag("--json", scan_json, "print the report as JSON");

  CLI::App* stat = app.add_subcommand("stat", "records, pages, depth, value size distribution");
  stat_flags.Add(stat);
  stat->add_flag("--json", stat_json, "print as JSON");

  CLI::App* verify = app.add_subcommand("verify", "walk the file, read every record, check corpus metadata");
  verify_flags.Add(verify);
  verify->add_flag("--json", verify_json, "print as JSON");

  ConvertCommand convert;
  convert.Register(&app);

  // CLI11 answers an unknown command with "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* c : app.get_subcommands([](CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + c->get_name();
      known = known || c->get_name() == argv[1];
    }
    if (!known) {
      std::fprintf(stderr, "lmdbloader: unknown command '%s' (the commands: %s)\n", argv[1], names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (auto [cmd, flags] : {std::pair{get, &get_flags}, {scan, &scan_flags}, {stat, &stat_flags},
                             {verify, &verify_flags}}) {
    if (!*cmd) continue;
    flags->Parsed();
    ReaderOptions options;
    Status s = flags->CheckedOptions(&options);
    if (!s.ok()) return Usage(cmd->get_name().c_str(), s.message());
  }
  if (*get) {
    if (!*by_index && !*by_key && !*by_hex) return Usage("get", "give --index, --key or --key-hex");
    return RunGet(get_flags, by_index->count() > 0, index, key, key_hex, output, name);
  }
  if (*scan) return RunScan(scan_flags, passes, order, batch, scan_json);
  if (*stat) return RunStat(stat_flags, stat_json);
  if (*verify) return RunVerify(verify_flags, verify_json);
  return convert.Run();
}
