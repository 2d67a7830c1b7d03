#include "convert/source_listing.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "convert/record_layout.h"
#include "corpus/corpus_format.h"
#include "io/open_file.h"
#include "lmdb/lmdb_pages.h"

namespace lmdbloader {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Record and class names are msgpack strings and JSON in the manifest: they
// must be UTF-8, which file names need not be. *usable is false for a name
// that is not; with skip_bad it is listed as skipped, else an error.
Status CheckName(const fs::path& path, bool skip_bad, Listing* listing, bool* usable) {
  *usable = IsUtf8(path.filename().string());
  if (*usable) return Status::OK();
  const std::string why = path.string() + ": the name is not valid UTF-8 (record and class names must be)";
  if (!skip_bad) return Status::InvalidArgument(why);
  listing->skipped.push_back(why);
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

// An integer JSON number within -2^53..2^53: a label and a numeric field go
// to columns read as float64 on the way, exact up to 2^53. Compared, never
// negated (-2^63 has no positive int64).
bool WithinDoubleExact(const json& number) {
  constexpr int64_t kExact = int64_t{1} << 53;
  if (number.is_number_unsigned()) return number.get<uint64_t>() <= static_cast<uint64_t>(kExact);
  const int64_t v = number.get<int64_t>();
  return v >= -kExact && v <= kExact;
}

}  // namespace

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

Status ListFolders(const ConvertOptions& o, bool video, Listing* listing) {
  std::error_code ec;
  if (!fs::is_directory(o.source, ec))
    return Status::IOError("open " + o.source + ": not a directory", ENOTDIR);
  std::vector<fs::path> classes = SortedEntries(o.source, true);
  bool usable = true;
  for (size_t c = 0; c < classes.size(); ++c) {
    LMDBLOADER_RETURN_IF_ERROR(CheckName(classes[c], o.skip_bad, listing, &usable));
    if (!usable) continue;  // a class skipped whole: labels stay consecutive
    const int64_t label = static_cast<int64_t>(listing->label_names.size());
    listing->label_names.push_back(classes[c].filename().string());
    std::string cls = classes[c].filename().string();
    if (!video) {
      for (const fs::path& f : SortedEntries(classes[c], false)) {
        LMDBLOADER_RETURN_IF_ERROR(CheckName(f, o.skip_bad, listing, &usable));
        if (!usable) continue;
        Item it;
        it.name = cls + "/" + f.filename().string();
        it.files = {f.string()};
        it.has_label = true;
        it.label = label;
        it.origin = f.string();
        listing->items.push_back(std::move(it));
      }
      continue;
    }
    for (const fs::path& v : SortedEntries(classes[c], true)) {
      LMDBLOADER_RETURN_IF_ERROR(CheckName(v, o.skip_bad, listing, &usable));
      if (!usable) continue;
      Item it;
      it.name = cls + "/" + v.filename().string();
      it.frames = true;
      it.has_label = true;
      it.label = label;
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
      if (!j["label"].is_number_integer() || !WithinDoubleExact(j["label"])) {
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
      if (v.is_number_integer() && !WithinDoubleExact(v)) {
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
    it.origin = where + " record " + std::to_string(i) + " (key " + PrintableName(it.name) + ")";
    // A layout splits samples: the writer's own bookkeeping beside them
    // (__keys__, __len__, ...) is no sample.
    if (o.record != RecordLayout::kAsIs && IsMetadataKey(it.name)) {
      listing->skipped.push_back(it.origin + ": a metadata record (a key of the form __name__), not a sample");
      continue;
    }
    listing->items.push_back(std::move(it));
  }
  if (o.record != RecordLayout::kAsIs && listing->items.empty())
    return Status::InvalidArgument(where + ": no records but metadata (keys of the form __name__) to convert");
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

}  // namespace lmdbloader
