#include "lmdbloader/options.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include "base/enum_names.h"
#include "base/option_table.h"

namespace lmdbloader {

Status ParseByteSize(std::string_view text, uint64_t* bytes) {
  std::string s(text);
  auto bad = [&] {
    return Status::InvalidArgument("invalid byte size '" + s +
                                   "' (expected e.g. 1048576, 256MiB, 1GiB, 500MB)");
  };
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return bad();
  std::string number = s.substr(0, i);
  std::string unit = s.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  char* end = nullptr;
  double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) return bad();
  double scale = 0;
  std::string u;
  for (char c : unit) u += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (u.empty() || u == "b") scale = 1;
  else if (u == "k" || u == "kib") scale = 1024.0;
  else if (u == "m" || u == "mib") scale = 1024.0 * 1024;
  else if (u == "g" || u == "gib") scale = 1024.0 * 1024 * 1024;
  else if (u == "t" || u == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (u == "kb") scale = 1e3;
  else if (u == "mb") scale = 1e6;
  else if (u == "gb") scale = 1e9;
  else if (u == "tb") scale = 1e12;
  else return bad();
  double result = value * scale;
  if (result >= 1.8e19) return Status::InvalidArgument("byte size '" + s + "' is too large");
  // "0.4" must not silently mean 0 (unbounded): bytes are whole.
  if (result != std::floor(result))
    return Status::InvalidArgument("byte size '" + s + "' is not a whole number of bytes");
  *bytes = static_cast<uint64_t>(result);
  return Status::OK();
}

namespace {

// Each enum's names, written once: parsing, naming, checking a value and
// the lists that help shows all read these.
constexpr EnumName<AccessMode> kAccessModes[] = {
    {AccessMode::kAuto, "auto"}, {AccessMode::kPread, "pread"}, {AccessMode::kMmap, "mmap"}};
constexpr EnumName<IoEngine> kIoEngines[] = {
    {IoEngine::kAuto, "auto"}, {IoEngine::kIoUring, "io_uring"}, {IoEngine::kThreads, "threads"},
    {IoEngine::kSync, "sync"}};
constexpr EnumName<CachePolicy> kCachePolicies[] = {
    {CachePolicy::kAuto, "auto"}, {CachePolicy::kFill, "fill"}, {CachePolicy::kExact, "exact"},
    {CachePolicy::kDrop, "drop"}};
constexpr EnumName<IndexResidence> kIndexResidences[] = {
    {IndexResidence::kAuto, "auto"}, {IndexResidence::kResident, "resident"}, {IndexResidence::kPaged, "paged"},
    {IndexResidence::kLeaves, "leaves"}};
// As Python spells them (True, "once", False) in lower case, as the
// command line takes them.
constexpr EnumName<ChecksumPolicy> kChecksumPolicies[] = {
    {ChecksumPolicy::kEveryRead, "true"}, {ChecksumPolicy::kFirstRead, "once"}, {ChecksumPolicy::kOff, "false"}};

const char* Known(const char* name) { return name ? name : "unknown"; }

constexpr uint32_t kMaxQueueDepth = 4096;  // batched reads in flight at most

}  // namespace

Status ParseAccessMode(std::string_view text, AccessMode* mode) { return ParseName(kAccessModes, "mode", text, mode); }
const char* AccessModeName(AccessMode mode) { return Known(NameOf(kAccessModes, mode)); }

Status ParseIoEngine(std::string_view text, IoEngine* engine) {
  return ParseName(kIoEngines, "io_engine", text, engine);
}
const char* IoEngineName(IoEngine engine) { return Known(NameOf(kIoEngines, engine)); }

Status ParseIndexResidence(std::string_view text, IndexResidence* residence) {
  return ParseName(kIndexResidences, "index_mode", text, residence);
}
const char* IndexResidenceName(IndexResidence residence) { return Known(NameOf(kIndexResidences, residence)); }

Status ParseCachePolicy(std::string_view text, CachePolicy* policy) {
  return ParseName(kCachePolicies, "cache", text, policy);
}
const char* CachePolicyName(CachePolicy policy) { return Known(NameOf(kCachePolicies, policy)); }

namespace {

// The checks of fields that can be wrong on their own, shared by
// ValidateOptions (a struct filled in C++) and SetReaderOption (by name).
Status CheckQueueDepth(uint64_t depth, std::string_view as_given) {
  if (depth < 1 || depth > kMaxQueueDepth)
    return Status::InvalidArgument("queue_depth must be between 1 and " + std::to_string(kMaxQueueDepth) + ", got " +
                                   std::string(as_given));
  return Status::OK();
}

Status CheckRssBudget(uint64_t budget) {
  if (budget != 0 && budget < kMinRssBudget)
    return Status::InvalidArgument("rss_budget of " + std::to_string(budget) + " bytes is below the floor of " +
                                   std::to_string(kMinRssBudget) +
                                   " bytes (1 MiB): the budget holds a batch's buffers and the record index's "
                                   "page cache");
  return Status::OK();
}

Status CheckMmapWindow(uint64_t window) {
  if (window < (64u << 10))
    return Status::InvalidArgument("mmap_window must be at least 64KiB, got " + std::to_string(window));
  return Status::OK();
}

}  // namespace

Status ValidateOptions(const ReaderOptions& options) {
  LMDBLOADER_RETURN_IF_ERROR(CheckRssBudget(options.rss_budget));
  LMDBLOADER_RETURN_IF_ERROR(CheckQueueDepth(options.queue_depth, std::to_string(options.queue_depth)));
  LMDBLOADER_RETURN_IF_ERROR(CheckMmapWindow(options.mmap_window));
  if (!NameOf(kIoEngines, options.io_engine)) return Status::InvalidArgument("invalid io_engine");
  if (!NameOf(kCachePolicies, options.cache_policy)) return Status::InvalidArgument("invalid cache policy");
  if (!NameOf(kAccessModes, options.mode)) return Status::InvalidArgument("invalid access mode");
  if (!NameOf(kIndexResidences, options.index_residence)) return Status::InvalidArgument("invalid index residence");
  if ((options.index_residence == IndexResidence::kPaged || options.index_residence == IndexResidence::kLeaves) &&
      options.index_dir == "none")
    return Status::InvalidArgument(std::string("index_mode='") + IndexResidenceName(options.index_residence) +
                                   "' reads the saved index file: index_dir must not be 'none'");
  if (!NameOf(kChecksumPolicies, options.verify_checksums))
    return Status::InvalidArgument("invalid checksum policy");
  return Status::OK();
}

Status ParseBool(std::string_view name, std::string_view text, bool* value) {
  if (text == "true" || text == "1" || text == "yes") *value = true;
  else if (text == "false" || text == "0" || text == "no") *value = false;
  else
    return Status::InvalidArgument(std::string(name) + " must be true or false, got '" + std::string(text) + "'");
  return Status::OK();
}

Status ParseChecksumPolicy(std::string_view text, ChecksumPolicy* policy) {
  if (ParseName(kChecksumPolicies, "verify_checksums", text, policy).ok()) return Status::OK();
  // Python's spelling, which is what most users type.
  return Status::InvalidArgument("verify_checksums must be True, False or \"once\"; got '" + std::string(text) + "'");
}

const char* ChecksumPolicyName(ChecksumPolicy policy) { return Known(NameOf(kChecksumPolicies, policy)); }

namespace {

using ReaderEntry = OptionEntry<ReaderOptions>;

Status SetBytes(const char* name, std::string_view text, uint64_t* out) {
  Status s = ParseByteSize(text, out);
  return s.ok() ? s : Status::InvalidArgument(std::string(name) + ": " + s.message());
}

const std::vector<ReaderEntry>& Entries() {
  static const std::vector<ReaderEntry> entries = {
      {{"rss_budget", "bytes", "a byte size, e.g. 64MiB; 0: unbounded",
        "memory this reader may make its process hold because of the data file (the default comes "
        "from $LMDBLOADER_RSS_BUDGET when set)"},
       [](std::string_view t, ReaderOptions* o) {
         uint64_t v = 0;
         LMDBLOADER_RETURN_IF_ERROR(SetBytes("rss_budget", t, &v));
         LMDBLOADER_RETURN_IF_ERROR(CheckRssBudget(v));
         o->rss_budget = v;
         return Status::OK();
       },
       [](const ReaderOptions& o) { return std::to_string(o.rss_budget); }},
      {{"mode", "choice", NameList(kAccessModes, " or "), "how record bytes reach the caller"},
       [](std::string_view t, ReaderOptions* o) { return ParseAccessMode(t, &o->mode); },
       [](const ReaderOptions& o) { return std::string(AccessModeName(o.mode)); }},
      {{"lock", "bool", "true or false", "use LMDB's lock file and hold a read transaction"},
       [](std::string_view t, ReaderOptions* o) { return ParseBool("lock", t, &o->lock); },
       [](const ReaderOptions& o) { return std::string(o.lock ? "true" : "false"); }},
      {{"db", "text", "a database name", "named database (empty: the main one)"},
       [](std::string_view t, ReaderOptions* o) {
         o->db_name = std::string(t);
         return Status::OK();
       },
       [](const ReaderOptions& o) { return o.db_name; }},
      {{"index_dir", "text", "a directory, or none", "where the record index is saved and loaded (empty: "
        "beside the data, then the cache directory; none: never)"},
       [](std::string_view t, ReaderOptions* o) {
         o->index_dir = std::string(t);
         return Status::OK();
       },
       [](const ReaderOptions& o) { return o.index_dir; }},
      {{"skip_bad_files", "bool", "true or false",
        "a set of files: leave out a file that does not open as an LMDB instead of failing"},
       [](std::string_view t, ReaderOptions* o) { return ParseBool("skip_bad_files", t, &o->skip_bad_files); },
       [](const ReaderOptions& o) { return std::string(o.skip_bad_files ? "true" : "false"); }},
      {{"index_mode", "choice", NameList(kIndexResidences, " or "),
        "where the record index lives: in memory, read from its saved file as reads need it, or so "
        "with a table of leaf pages that small values are read out of"},
       [](std::string_view t, ReaderOptions* o) { return ParseIndexResidence(t, &o->index_residence); },
       [](const ReaderOptions& o) { return std::string(IndexResidenceName(o.index_residence)); }},
      {{"verify_checksums", "checksums", NameList(kChecksumPolicies, " or "),
        "corpora: check each record's checksum on every read, never, or once"},
       [](std::string_view t, ReaderOptions* o) { return ParseChecksumPolicy(t, &o->verify_checksums); },
       [](const ReaderOptions& o) { return std::string(ChecksumPolicyName(o.verify_checksums)); }},
      {{"io_engine", "choice", NameList(kIoEngines, " or "), "how batched reads reach the device "
        "(auto: io_uring, else threads)"},
       [](std::string_view t, ReaderOptions* o) { return ParseIoEngine(t, &o->io_engine); },
       [](const ReaderOptions& o) { return std::string(IoEngineName(o.io_engine)); }},
      {{"queue_depth", "int", "1 to " + std::to_string(kMaxQueueDepth), "batched reads in flight at most"},
       [](std::string_view t, ReaderOptions* o) { return SetInt("queue_depth", t, 1, kMaxQueueDepth, &o->queue_depth); },
       [](const ReaderOptions& o) { return std::to_string(o.queue_depth); }},
      {{"cache", "choice", NameList(kCachePolicies, " or "), "what reads leave in the page cache"},
       [](std::string_view t, ReaderOptions* o) { return ParseCachePolicy(t, &o->cache_policy); },
       [](const ReaderOptions& o) { return std::string(CachePolicyName(o.cache_policy)); }},
      {{"mmap_window", "bytes", "a byte size of at least 64KiB",
        "mmap mode: the windows the governor releases"},
       [](std::string_view t, ReaderOptions* o) {
         uint64_t v = 0;
         LMDBLOADER_RETURN_IF_ERROR(SetBytes("mmap_window", t, &v));
         LMDBLOADER_RETURN_IF_ERROR(CheckMmapWindow(v));
         o->mmap_window = v;
         return Status::OK();
       },
       [](const ReaderOptions& o) { return std::to_string(o.mmap_window); }},
      {{"remap_every", "bytes", "a byte size; 0: never", "mmap mode: a fresh mapping after this many bytes read"},
       [](std::string_view t, ReaderOptions* o) { return SetBytes("remap_every", t, &o->remap_every); },
       [](const ReaderOptions& o) { return std::to_string(o.remap_every); }},
  };
  return entries;
}

}  // namespace

const std::vector<OptionInfo>& ReaderOptionList() {
  static const std::vector<OptionInfo> list = OptionInfos(Entries());
  return list;
}

Status SetReaderOption(std::string_view name, std::string_view value, ReaderOptions* options) {
  return SetOptionByName(Entries(), name, value, options);
}

std::string ReaderOptionValue(const ReaderOptions& options, std::string_view name) {
  return OptionValueByName(Entries(), options, name);
}

Status ReaderOptionsFromEnvironment(ReaderOptions* options) {
  const char* budget = std::getenv("LMDBLOADER_RSS_BUDGET");
  if (!budget || !*budget) return Status::OK();
  uint64_t v = 0;
  Status s = ParseByteSize(budget, &v);
  if (s.ok()) s = CheckRssBudget(v);
  if (!s.ok()) return Status::InvalidArgument("LMDBLOADER_RSS_BUDGET: " + s.message());
  options->rss_budget = v;
  return Status::OK();
}

}  // namespace lmdbloader
