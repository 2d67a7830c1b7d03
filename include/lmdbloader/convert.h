// Convert: turns a dataset on disk into an lmdbloader corpus (the code behind
// `lmdbloader convert` and `lmdbloader.convert()`).
//
// Sources:
//   image_folder  root/<class>/<file>          -> {image: bytes, label, name}
//   video_folder  root/<class>/<video>/<frame> -> {frames: [bytes...], label, name}
//   jsonl         one JSON object a line: name, path or paths (relative to the
//                 manifest's folder, never outside it), label, other scalars
//                 (numbers become columns)      -> {image | frames, label, name, ...}
//   lmdb          any LMDB: values stored as they are, keys kept exactly (any
//                 bytes) as the names of a corpus keyed by names
//                 (corpus_keys.h), so Get(original key) finds each value;
//                 a corpus converts to an equal corpus (names, keys,
//                 columns, schema and label names carry over). A DUPSORT
//                 database is refused (one record a name).
// Files are stored as they are: no decoding, no re-encoding.
#ifndef LMDBLOADER_CONVERT_H_
#define LMDBLOADER_CONVERT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

struct ConvertOptions {
  std::string source_kind;  // "image_folder", "video_folder", "jsonl", "lmdb"
  std::string source;       // folder, manifest file, or LMDB path
  std::string output;       // the corpus, or with num_shards > 1 the shard folder
  bool overwrite = false;
  // Records: "given" (listing / file order), "sorted" (by name) or "shuffle".
  std::string order = "sorted";
  uint64_t seed = 0;        // for "shuffle"
  uint32_t frame_step = 1;  // video_folder: keep every k-th frame
  // Write shard `shard_index` of `num_shards` (records split in contiguous
  // ranges after ordering) to <output>/part-IIIII-of-NNNNN. shard_index -1
  // with num_shards > 1 writes them all, and the shard list.
  uint32_t num_shards = 1;
  int32_t shard_index = -1;
  bool skip_bad = false;   // skip bad inputs and list them instead of failing
  bool progress = false;   // progress line on stderr
  std::string db_name;     // lmdb source: named database
};

struct ConvertSummary {
  std::vector<std::string> outputs;  // corpora written
  uint64_t records = 0;
  uint64_t bytes = 0;  // record bytes written
  double seconds = 0;
  std::vector<std::string> skipped;  // "<file or line>: <why>"
};

Status Convert(const ConvertOptions& options, ConvertSummary* summary);

// Writes <folder>/shards.json listing the part-* corpora in the folder, after
// checking that they form one complete set.
Status WriteShardList(const std::string& folder, uint64_t* records);

// "part-00003-of-00016": five digits, so at most kMaxShards shards.
std::string ShardName(uint32_t index, uint32_t count);
inline constexpr uint32_t kMaxShards = 99999;

// Writes `bytes` to a temporary file beside `path`, syncs it and renames it
// over `path`: readers see the old file or the whole new one. IOError naming
// the file and the system's reason (ENOSPC, ENOENT, ...) otherwise.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace lmdbloader

#endif  // LMDBLOADER_CONVERT_H_
