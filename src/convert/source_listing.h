// Listing a source: what `lmdbloader convert` finds to write, one Item a
// record, before anything is read or written. Image and video folders
// (class folders of files or of frame folders), JSONL manifests (every path
// resolved inside the manifest's folder) and LMDBs (each key kept as the
// record's name). Bad inputs are errors naming the file or line, or with
// skip_bad, listed in Listing::skipped.
#ifndef LMDBLOADER_SRC_CONVERT_SOURCE_LISTING_H_
#define LMDBLOADER_SRC_CONVERT_SOURCE_LISTING_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lmdbloader/convert.h"
#include "lmdbloader/corpus_keys.h"
#include "lmdbloader/reader.h"

namespace lmdbloader {

// One record to be written, as found while listing the source.
struct Item {
  std::string name;
  std::vector<std::string> files;  // one image, or the frames of a video
  bool frames = false;             // files form a list of frames
  bool has_label = false;
  int64_t label = 0;
  nlohmann::json extra = nlohmann::json::object();     // jsonl: other scalar fields
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
  nlohmann::json schema;
  std::map<std::string, std::vector<double>> columns;
};

// The entries of `dir` that are folders (want_dirs) or files, by name.
std::vector<std::filesystem::path> SortedEntries(const std::filesystem::path& dir, bool want_dirs);
// image_folder (video false) or video_folder (video true): root/<class>/...
Status ListFolders(const ConvertOptions& o, bool video, Listing* listing);
// jsonl: one JSON object a line.
Status ListJsonl(const ConvertOptions& o, Listing* listing);
// lmdb: every record of `source`, opened from o.source.
Status ListLmdb(const ConvertOptions& o, Reader& source, Listing* listing);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_CONVERT_SOURCE_LISTING_H_
