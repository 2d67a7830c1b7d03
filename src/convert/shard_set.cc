// A shard set's names and its shard list (lmdbloader/shard_set.h).
#include "lmdbloader/shard_set.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>

#include <nlohmann/json.hpp>

#include "convert/source_listing.h"
#include "corpus/corpus_format.h"
#include "lmdbloader/atomic_write.h"
#include "lmdbloader/reader.h"

namespace lmdbloader {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string ShardName(uint32_t index, uint32_t count) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "part-%05u-of-%05u", index, count);
  return buf;
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
  const std::string path = folder + "/" + kShardListFile;
  return WriteFileAtomically(path, list.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace lmdbloader
