#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>

#include <msgpack.hpp>
#include <nlohmann/json.hpp>

#include "corpus/corpus_format.h"
#include "lmdb/lmdb_pages.h"
#include "io/atomic_write.h"
#include "io/open_file.h"
#include "lmdbloader/convert.h"
#include "lmdbloader/reader.h"
#include "lmdbloader/writer.h"

namespace lmdbloader {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// One record to be written, as found while listing the source.
struct Item {
  std::string name;
  std::vector<std::string> files;  // one image, or the frames of a video
  bool frames = false;             // files form a list of frames
  bool has_label = false;
  int64_t label = 0;
  json extra = json::object();     // jsonl: other scalar fields
  uint64_t position = 0;           // lmdb source: record position
  std::string origin;              // where the item came from, for errors
};

struct Listing {
  std::vector<Item> items;
  std::vector<std::string> label_names;
  std::vector<std::string> skipped;
  // lmdb source: what the corpus is keyed by, its schema (null: records as
  // they were), and its columns by record position (from a corpus source).
  CorpusKeys keys = CorpusKeys::kRecordNumbers;
  json schema;
  std::map<std::string, std::vector<double>> columns;
};

std::vector<fs::path> SortedEntries(const fs::path& dir, bool want_dirs) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind('.', 0) == 0) continue;  // hidden
    if (want_dirs ? e.is_directory(ec) : e.is_regular_file(ec)) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Record and class names are msgpack strings and JSON in the manifest: they
// must be UTF-8, which file names need not be.
Status CheckName(const fs::path& path) {
  if (IsUtf8(path.filename().string())) return Status::OK();
  return Status::InvalidArgument(path.string() + ": the name is not valid UTF-8 (record and class names must be)");
}

Status ListFolders(const ConvertOptions& o, bool video, Listing* listing) {
  std::error_code ec;
  if (!fs::is_directory(o.source, ec))
    return Status::IOError("open " + o.source + ": not a directory", ENOTDIR);
  std::vector<fs::path> classes = SortedEntries(o.source, true);
  for (size_t c = 0; c < classes.size(); ++c) {
    LMDBLOADER_RETURN_IF_ERROR(CheckName(classes[c]));
    listing->label_names.push_back(classes[c].filename().string());
    std::string cls = classes[c].filename().string();
    if (!video) {
      for (const fs::path& f : SortedEntries(classes[c], false)) {
        LMDBLOADER_RETURN_IF_ERROR(CheckName(f));
        Item it;
        it.name = cls + "/" + f.filename().string();
        it.files = {f.string()};
        it.has_label = true;
        it.label = static_cast<int64_t>(c);
        it.origin = f.string();
        listing->items.push_back(std::move(it));
      }
      continue;
    }
    for (const fs::path& v : SortedEntries(classes[c], true)) {
      LMDBLOADER_RETURN_IF_ERROR(CheckName(v));
      Item it;
      it.name = cls + "/" + v.filename().string();
      it.frames = true;
      it.has_label = true;
      it.label = static_cast<int64_t>(c);
      it.origin = v.string();
      std::vector<fs::path> frames = SortedEntries(v, false);
      for (size_t k = 0; k < frames.size(); k += o.frame_step) it.files.push_back(frames[k].string());
      if (it.files.empty()) {
        std::string why = v.string() + ": empty folder (no frames)";
        if (!o.skip_bad) return Status::InvalidArgument(why);
        listing->skipped.push_back(why);
        continue;
      }
      listing->items.push_back(std::move(it));
    }
  }
  if (listing->items.empty())
    return Status::InvalidArgument("no " + std::string(video ? "videos" : "images") + " found under " + o.source +
                                   " (expected " + (video ? "class/video/frame files" : "class/image files") + ")");
  return Status::OK();
}

// Resolves a manifest path against `root`; false when it leaves the root.
bool ResolveInside(const fs::path& root, const std::string& relative, std::string* out) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(root / relative, ec);
  if (ec) return false;
  std::string s = p.string(), r = root.string();
  if (s.size() <= r.size() || s.compare(0, r.size(), r) != 0 || s[r.size()] != '/') return false;
  *out = s;
  return true;
}

Status ListJsonl(const ConvertOptions& o, Listing* listing) {
  // A regular file only, as for every file a corpus is made of: std::ifstream
  // opens a directory and reads nothing ("no records"), and waits forever on
  // a FIFO.
  int fd = -1;
  LMDBLOADER_RETURN_IF_ERROR(OpenReadOnly(o.source, &fd));
  ::close(fd);
  std::ifstream in(o.source);
  if (!in) return Status::FromErrno(errno ? errno : ENOENT, "open", o.source);
  std::error_code ec;
  fs::path root = fs::canonical(fs::absolute(o.source).parent_path(), ec);
  std::map<std::string, size_t> seen;  // name -> line
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string where = o.source + ":" + std::to_string(number);
    auto bad = [&](const std::string& why) -> Status {
      if (!o.skip_bad) return Status::InvalidArgument(where + ": " + why);
      listing->skipped.push_back(where + ": " + why);
      return Status::OK();
    };
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      LMDBLOADER_RETURN_IF_ERROR(bad("not a JSON object"));
      continue;
    }
    Item it;
    it.origin = where;
    if (!j.contains("name") || !j["name"].is_string()) {
      LMDBLOADER_RETURN_IF_ERROR(bad("missing string field 'name'"));
      continue;
    }
    it.name = j["name"].get<std::string>();
    std::vector<std::string> rel;
    if (j.contains("path") && j["path"].is_string()) {
      rel.push_back(j["path"].get<std::string>());
    } else if (j.contains("paths") && j["paths"].is_array() && !j["paths"].empty()) {
      it.frames = true;
      for (const auto& p : j["paths"]) rel.push_back(p.is_string() ? p.get<std::string>() : std::string());
    } else {
      LMDBLOADER_RETURN_IF_ERROR(bad("needs 'path' (a string) or 'paths' (a list of strings)"));
      continue;
    }
    bool ok = true;
    for (const std::string& r : rel) {
      std::string resolved;
      if (r.empty() || !ResolveInside(root, r, &resolved)) {
        LMDBLOADER_RETURN_IF_ERROR(bad("path '" + r + "' is outside " + root.string()));
        ok = false;
        break;
      }
      it.files.push_back(resolved);
    }
    if (!ok) continue;
    if (j.contains("label")) {
      // Labels go to an int64 column read as float64 on the way: exact up to 2^53.
      constexpr int64_t kExact = int64_t{1} << 53;
      if (!j["label"].is_number_integer() ||
          (j["label"].is_number_unsigned() ? j["label"].get<uint64_t>() > static_cast<uint64_t>(kExact)
                                           : std::llabs(j["label"].get<int64_t>()) > kExact)) {
        LMDBLOADER_RETURN_IF_ERROR(bad("'label' must be an integer between -2^53 and 2^53"));
        continue;
      }
      it.has_label = true;
      it.label = j["label"].get<int64_t>();
    }
    for (auto& [k, v] : j.items()) {
      if (k == "name" || k == "path" || k == "paths" || k == "label") continue;
      if (k == "image" || k == "frames") {
        LMDBLOADER_RETURN_IF_ERROR(bad("field '" + k + "' is reserved: it holds the bytes of 'path' or 'paths'"));
        ok = false;
        break;
      }
      if (v.is_number_integer() && !v.is_number_unsigned() && std::llabs(v.get<int64_t>()) > (int64_t{1} << 53)) {
        LMDBLOADER_RETURN_IF_ERROR(bad("field '" + k + "' is an integer beyond 2^53, which its column cannot hold exactly"));
        ok = false;
        break;
      }
      if (v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t{1} << 53)) {
        LMDBLOADER_RETURN_IF_ERROR(bad("field '" + k + "' is an integer beyond 2^53, which its column cannot hold exactly"));
        ok = false;
        break;
      }
      if (!v.is_primitive() || v.is_null()) {
        LMDBLOADER_RETURN_IF_ERROR(bad("field '" + k + "' is not a scalar"));
        ok = false;
        break;
      }
      it.extra[k] = v;
    }
    if (!ok) continue;
    auto [pos, inserted] = seen.emplace(it.name, number);
    if (!inserted) {
      LMDBLOADER_RETURN_IF_ERROR(bad("duplicate name '" + it.name + "' (first on line " +
                                     std::to_string(pos->second) + ")"));
      continue;
    }
    listing->items.push_back(std::move(it));
  }
  if (listing->items.empty()) return Status::InvalidArgument(o.source + ": no records");
  return Status::OK();
}

Status ListLmdb(const ConvertOptions& o, Reader& source, Listing* listing) {
  const std::string where = o.source + (o.db_name.empty() ? "" : " (database '" + o.db_name + "')");
  // A corpus names each record by its source key, one value a name.
  if (source.db_flags() & kLmdbDupSort)
    return Status::InvalidArgument(where + ": holds sorted duplicates (MDB_DUPSORT: several values under one key); a "
                                   "corpus keeps one record a name, so it cannot be converted as it is");
  // An LMDB's keys are bytes of any kind (packed integers, hashes): they
  // become the names of a corpus keyed by names, so that get(key) still
  // finds each value. A corpus converts to an equal corpus: its names, keys,
  // columns, schema and label names carry over.
  const bool corpus = source.is_corpus();
  listing->keys = corpus ? source.corpus_keys() : CorpusKeys::kNames;
  for (uint64_t i = 0; i < source.size(); ++i) {
    Item it;
    LMDBLOADER_RETURN_IF_ERROR(corpus ? source.Name(i, &it.name) : source.Key(i, &it.name));
    it.position = i;
    it.origin = where + " record " + std::to_string(i);
    listing->items.push_back(std::move(it));
  }
  if (!corpus) return Status::OK();
  const json manifest = json::parse(source.manifest(), nullptr, /*allow_exceptions=*/false);
  if (manifest.is_object() && manifest.contains("schema")) listing->schema = manifest["schema"];
  if (manifest.is_object() && manifest.contains("label_names") && manifest["label_names"].is_array())
    for (const json& label : manifest["label_names"])
      if (label.is_string()) listing->label_names.push_back(label.get<std::string>());
  if (!manifest.is_object() || !manifest.contains("columns") || !manifest["columns"].is_object()) return Status::OK();
  for (const auto& [column, type] : manifest["columns"].items()) {
    std::string bytes;
    LMDBLOADER_RETURN_IF_ERROR(source.ReadColumn(column, &bytes));
    const bool integral = type.is_object() && type.contains("dtype") && type["dtype"] == "<i8";
    std::vector<double>& values = listing->columns[column];
    values.resize(bytes.size() / 8);
    for (size_t i = 0; i < values.size(); ++i) {
      if (integral) {
        int64_t v = 0;
        std::memcpy(&v, bytes.data() + i * 8, 8);
        values[i] = static_cast<double>(v);
      } else {
        std::memcpy(&values[i], bytes.data() + i * 8, 8);
      }
    }
  }
  return Status::OK();
}

Status ReadFile(const std::string& path, std::string* out) {
  // A regular file only: a FIFO named in a manifest would wait for a writer.
  int fd = -1;
  struct stat st;
  LMDBLOADER_RETURN_IF_ERROR(OpenReadOnly(path, &fd, &st));
  if (static_cast<uint64_t>(st.st_size) > kMaxRecordBytes) {
    ::close(fd);
    return Status::InvalidArgument(path + ": " + std::to_string(st.st_size) + " bytes; a record holds at most " +
                                   std::to_string(kMaxRecordBytes) + " bytes (LMDB's largest value)");
  }
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    ssize_t n = ::read(fd, out->data() + done, out->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      return Status::FromErrno(err, "read", path);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::OK();
}

void PackScalar(msgpack::packer<msgpack::sbuffer>& pk, const json& v) {
  if (v.is_boolean()) v.get<bool>() ? pk.pack_true() : pk.pack_false();
  else if (v.is_number_unsigned()) pk.pack(v.get<uint64_t>());
  else if (v.is_number_integer()) pk.pack(v.get<int64_t>());
  else if (v.is_number_float()) pk.pack(v.get<double>());
  else pk.pack(v.get<std::string>());
}

// Builds the msgpack record of a file-backed item.
Status PackItem(const Item& it, std::vector<std::string>& contents, msgpack::sbuffer* buf) {
  buf->clear();
  uint64_t content_bytes = 0;
  for (const std::string& c : contents) content_bytes += c.size();
  if (content_bytes > kMaxRecordBytes)  // each file was checked alone; a video's frames together may not fit
    return Status::InvalidArgument(it.origin + ": its files hold " + std::to_string(content_bytes) +
                                   " bytes; a record holds at most " + std::to_string(kMaxRecordBytes) +
                                   " bytes (LMDB's largest value)");
  msgpack::packer<msgpack::sbuffer> pk(*buf);
  pk.pack_map(2 + (it.has_label ? 1 : 0) + static_cast<uint32_t>(it.extra.size()));
  pk.pack(std::string(it.frames ? "frames" : "image"));
  if (it.frames) pk.pack_array(static_cast<uint32_t>(contents.size()));
  for (const std::string& c : contents) {
    pk.pack_bin(static_cast<uint32_t>(c.size()));
    pk.pack_bin_body(c.data(), static_cast<uint32_t>(c.size()));
  }
  if (it.has_label) {
    pk.pack(std::string("label"));
    pk.pack(it.label);
  }
  pk.pack(std::string("name"));
  pk.pack(it.name);
  for (auto& [k, v] : it.extra.items()) {
    pk.pack(k);
    PackScalar(pk, v);
  }
  return Status::OK();
}

class Progress {
 public:
  Progress(bool on, uint64_t total) : on_(on), total_(total), start_(Clock::now()), last_(start_) {}
  void Update(uint64_t records, uint64_t bytes) {
    if (!on_) return;
    auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(500) && records != total_) return;
    last_ = now;
    double s = std::chrono::duration<double>(now - start_).count();
    double rate = s > 0 ? records / s : 0;
    double eta = rate > 0 ? (total_ - records) / rate : 0;
    std::fprintf(stderr, "\rconvert: %llu/%llu records, %.1f MB, %.1f MB/s, %.0f s left   ",
                 (unsigned long long)records, (unsigned long long)total_, bytes / 1e6, s > 0 ? bytes / 1e6 / s : 0.0,
                 eta);
    if (records == total_) std::fputc('\n', stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_;
  uint64_t total_;
  Clock::time_point start_, last_;
};

Status WriteOne(const ConvertOptions& o, const Listing& listing, size_t begin, size_t end, Reader* lmdb_source,
                const std::string& target, ConvertSummary* summary) {
  WriterOptions wo;
  wo.overwrite = o.overwrite;
  wo.keys = listing.keys;
  std::unique_ptr<CorpusWriter> writer;
  LMDBLOADER_RETURN_IF_ERROR(CorpusWriter::Create(target, wo, &writer));
  Progress progress(o.progress, end - begin);
  msgpack::sbuffer buf;
  std::string value;
  std::vector<std::string> contents;
  for (size_t i = begin; i < end; ++i) {
    const Item& it = listing.items[i];
    std::map<std::string, double> columns;
    if (lmdb_source) {
      LMDBLOADER_RETURN_IF_ERROR(lmdb_source->Read(it.position, &value));
      for (const auto& [column, values] : listing.columns) columns[column] = values[it.position];
      Status added = writer->Add(it.name, value, columns);
      if (!added.ok()) return Status::InvalidArgument(it.origin + ": " + added.message());
    } else {
      contents.resize(it.files.size());
      Status s;
      for (size_t k = 0; k < it.files.size() && s.ok(); ++k) s = ReadFile(it.files[k], &contents[k]);
      if (s.ok()) s = PackItem(it, contents, &buf);
      if (!s.ok()) {
        if (!o.skip_bad) return s;
        summary->skipped.push_back(s.message());
        continue;
      }
      if (it.has_label) columns["label"] = static_cast<double>(it.label);
      for (auto& [k, v] : it.extra.items())
        if (v.is_number()) columns[k] = v.get<double>();
      Status added = writer->Add(it.name, std::string_view(buf.data(), buf.size()), columns);
      if (!added.ok()) return Status::InvalidArgument(it.origin + ": " + added.message());
    }
    progress.Update(i + 1 - begin, writer->bytes());
  }
  json manifest = {{"source", {{"kind", o.source_kind}, {"path", o.source}}},
                   {"schema", lmdb_source ? (listing.schema.is_null() ? json{{"encoding", "as-is"}} : listing.schema)
                                          : json{{"encoding", "msgpack"},
                                                 {"fields", o.source_kind == "video_folder"
                                                                ? json::array({"frames", "label", "name"})
                                                                : json::array({"image", "label", "name"})}}}};
  if (!listing.label_names.empty()) manifest["label_names"] = listing.label_names;
  if (o.num_shards > 1) manifest["shard"] = {{"index", begin == 0 ? 0 : -1}, {"count", o.num_shards}};
  LMDBLOADER_RETURN_IF_ERROR(writer->Finish(manifest.dump(-1, ' ', false, json::error_handler_t::replace)));
  summary->records += writer->size();
  summary->bytes += writer->bytes();
  summary->outputs.push_back(target);
  return Status::OK();
}

}  // namespace

std::string ShardName(uint32_t index, uint32_t count) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "part-%05u-of-%05u", index, count);
  return buf;
}

Status Convert(const ConvertOptions& o, ConvertSummary* summary) {
  auto start = std::chrono::steady_clock::now();
  if (o.output.empty()) return Status::InvalidArgument("no output path given");
  if (o.order != "given" && o.order != "sorted" && o.order != "shuffle")
    return Status::InvalidArgument("order must be given, sorted or shuffle; got '" + o.order + "'");
  if (o.frame_step < 1) return Status::InvalidArgument("frame_step must be at least 1");
  if (o.num_shards < 1 || o.num_shards > kMaxShards)
    return Status::InvalidArgument("num_shards must be between 1 and " + std::to_string(kMaxShards) + ", got " +
                                   std::to_string(o.num_shards));
  if (o.shard_index < -1)
    return Status::InvalidArgument("shard_index must be 0 or more (-1: every shard), got " +
                                   std::to_string(o.shard_index));
  if (o.shard_index >= static_cast<int32_t>(o.num_shards))
    return Status::InvalidArgument("shard_index " + std::to_string(o.shard_index) + " is not below num_shards " +
                                   std::to_string(o.num_shards));
  Listing listing;
  std::unique_ptr<Reader> lmdb_source;
  if (o.source_kind == "image_folder" || o.source_kind == "video_folder") {
    LMDBLOADER_RETURN_IF_ERROR(ListFolders(o, o.source_kind == "video_folder", &listing));
  } else if (o.source_kind == "jsonl") {
    LMDBLOADER_RETURN_IF_ERROR(ListJsonl(o, &listing));
  } else if (o.source_kind == "lmdb") {
    ReaderOptions ro;
    ro.db_name = o.db_name;
    ro.index_dir = "none";  // never write into the source
    LMDBLOADER_RETURN_IF_ERROR(Reader::Open(o.source, ro, &lmdb_source));
    LMDBLOADER_RETURN_IF_ERROR(ListLmdb(o, *lmdb_source, &listing));
  } else {
    return Status::InvalidArgument("unknown source kind '" + o.source_kind +
                                   "' (expected image_folder, video_folder, jsonl or lmdb)");
  }
  summary->skipped = listing.skipped;
  if (o.order == "sorted") {
    std::stable_sort(listing.items.begin(), listing.items.end(),
                     [](const Item& a, const Item& b) { return a.name < b.name; });
  } else if (o.order == "shuffle") {
    std::mt19937_64 rng(o.seed);
    std::shuffle(listing.items.begin(), listing.items.end(), rng);
  }
  const size_t n = listing.items.size();
  if (o.num_shards == 1) {
    LMDBLOADER_RETURN_IF_ERROR(WriteOne(o, listing, 0, n, lmdb_source.get(), o.output, summary));
  } else {
    std::error_code ec;
    fs::create_directories(o.output, ec);
    if (ec) return Status::IOError("mkdir " + o.output + ": " + ec.message());
    for (uint32_t s = 0; s < o.num_shards; ++s) {
      if (o.shard_index >= 0 && static_cast<uint32_t>(o.shard_index) != s) continue;
      size_t begin = n * s / o.num_shards, end = n * (s + 1) / o.num_shards;
      LMDBLOADER_RETURN_IF_ERROR(WriteOne(o, listing, begin, end, lmdb_source.get(),
                                          o.output + "/" + ShardName(s, o.num_shards), summary));
    }
    if (o.shard_index < 0) {
      uint64_t records = 0;
      LMDBLOADER_RETURN_IF_ERROR(WriteShardList(o.output, &records));
    }
  }
  summary->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::OK();
}

Status WriteShardList(const std::string& folder, uint64_t* records) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return Status::IOError("open " + folder + ": not a directory", ENOTDIR);
  static const std::regex pattern("part-(\\d{5})-of-(\\d{5})");
  std::map<uint32_t, std::string> parts;
  uint32_t count = 0;
  for (const fs::path& p : SortedEntries(folder, true)) {
    std::smatch m;
    std::string name = p.filename().string();
    if (!std::regex_match(name, m, pattern)) continue;
    uint32_t index = std::stoul(m[1]), of = std::stoul(m[2]);
    if (count != 0 && of != count)
      return Status::InvalidArgument(folder + ": shards of different sets (" + name + ")");
    count = of;
    parts[index] = name;
  }
  if (parts.empty()) return Status::InvalidArgument(folder + ": no part-NNNNN-of-NNNNN shards");
  for (uint32_t i = 0; i < count; ++i)
    if (!parts.count(i)) return Status::InvalidArgument(folder + ": shard " + ShardName(i, count) + " is missing");
  json list = {{"format", "lmdbloader-shards"}, {"version", 1}, {"shards", json::array()}};
  *records = 0;
  for (const auto& [index, name] : parts) {
    std::unique_ptr<Reader> r;
    LMDBLOADER_RETURN_IF_ERROR(Reader::Open(folder + "/" + name, ReaderOptions(), &r));
    if (!r->is_corpus())
      return Status::InvalidArgument(folder + "/" + name + ": not an lmdbloader corpus (write shards with "
                                     "`lmdbloader convert --num-shards N --shard-index I`)");
    list["shards"].push_back({{"path", name}, {"records", r->size()}});
    *records += r->size();
  }
  list["records"] = *records;
  std::string path = folder + "/" + kShardListFile, tmp = path + ".tmp-" + std::to_string(::getpid());
  return WriteFileAtomically(path, list.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace lmdbloader
