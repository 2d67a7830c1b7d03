#include "corpus/shard_list.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "corpus/corpus_format.h"
#include "io/open_file.h"

namespace lmdbloader {

namespace {

// A plain relative name: components that are neither empty, "." nor "..".
bool InsideFolder(const std::string& name) {
  if (name.empty() || name[0] == '/') return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

Status ParseShardList(const std::string& text, const std::string& dir, const std::string& list_path,
                      std::vector<ShardEntry>* parts, int64_t* total) {
  auto bad = [&](const std::string& what) { return Status::Corruption("read " + list_path + ": " + what); };
  parts->clear();
  if (total) *total = -1;
  nlohmann::json list = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded() || !list.is_object() || !list.contains("shards") || !list["shards"].is_array())
    return bad("not a valid shard list");
  std::set<std::string> seen;
  for (const auto& shard : list["shards"]) {
    if (!shard.is_object() || !shard.contains("path") || !shard["path"].is_string())
      return bad("a shard entry has no path");
    const std::string name = shard["path"].get<std::string>();
    if (!InsideFolder(name)) return bad("part '" + name + "' lies outside " + dir);
    if (!seen.insert(name).second) return bad("part '" + name + "' is listed twice");
    ShardEntry entry;
    entry.path = dir + "/" + name;
    if (shard.contains("records")) {
      if (!shard["records"].is_number_unsigned() || shard["records"].get<uint64_t>() > INT64_MAX)
        return bad("part '" + name + "' has a 'records' that is not a count");
      entry.records = shard["records"].get<int64_t>();
    }
    parts->push_back(std::move(entry));
  }
  if (parts->empty()) return bad("no shards listed");
  // The total, where given, must be what the parts add up to (each part's
  // own count is checked against the part itself at open).
  if (list.contains("records")) {
    if (!list["records"].is_number_unsigned() || list["records"].get<uint64_t>() > INT64_MAX)
      return bad("'records' is not a count");
    uint64_t sum = 0;
    bool all_counted = true;
    for (const ShardEntry& e : *parts) {
      if (e.records < 0) all_counted = false;
      else sum += static_cast<uint64_t>(e.records);
    }
    const uint64_t all = list["records"].get<uint64_t>();
    if (all_counted && all != sum)
      return bad("it says " + std::to_string(all) + " records in all, its parts add up to " + std::to_string(sum));
    if (total) *total = static_cast<int64_t>(all);
  }
  return Status::OK();
}

Status ReadShardList(const std::string& dir, bool* is_set, std::vector<ShardEntry>* parts, int64_t* total) {
  parts->clear();
  if (total) *total = -1;
  const std::string list_path = dir + "/" + kShardListFile;
  struct stat st;
  *is_set = ::stat(list_path.c_str(), &st) == 0;
  if (!*is_set) return Status::OK();
  std::string text;
  LMDBLOADER_RETURN_IF_ERROR(ReadWholeFile(list_path, &text));
  return ParseShardList(text, dir, list_path, parts, total);
}

namespace {

// Whether `dir` holds parts that `convert --shard-index` writes.
bool HoldsShardParts(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().filename().string().rfind("part-", 0) == 0) return true;
  return false;
}

}  // namespace

Status ResolveDataLocation(const std::string& path, DataLocation* location) {
  Status s = ResolveLocation(path, location);
  if (s.ok() || s.sys_errno() != ENOENT || location->data_path.empty() || !HoldsShardParts(path)) return s;
  return Status::IOError(s.message() + " (the folder holds shard parts but no " + kShardListFile +
                             ": run `lmdbloader shard-list " + path + "` once every shard is written)",
                         ENOENT);
}

}  // namespace lmdbloader
