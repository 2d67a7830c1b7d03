// The manifest of a corpus (`__lmdbloader__/manifest`, JSON): parsed from
// untrusted bytes with every field's type checked. Fuzzed by
// fuzz/manifest_fuzzer.cc.
#ifndef LMDBLOADER_SRC_CORPUS_MANIFEST_H_
#define LMDBLOADER_SRC_CORPUS_MANIFEST_H_

#include <cstdint>
#include <map>
#include <string>

#include "lmdbloader/corpus_keys.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

struct CorpusManifest {
  uint64_t records = 0;
  std::map<std::string, std::string> column_dtypes;  // column name -> "<i8" or "<f8"
  bool has_checksums = false;                         // records carry XXH3-64 checksums
  std::map<std::string, uint64_t> meta_sums;          // full metadata key -> XXH3-64 of its value
  CorpusKeys keys = CorpusKeys::kRecordNumbers;       // "keys": "names" -> kNames
};

// NotFound when `text` is not a corpus manifest at all (not a JSON object
// with "format": "lmdbloader-corpus"); Corruption naming `where` when a field
// has the wrong type or value; Unsupported for an unknown checksum algorithm
// or an unknown "keys" (a later format).
Status ParseCorpusManifest(const std::string& text, const std::string& where, CorpusManifest* out);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_CORPUS_MANIFEST_H_
