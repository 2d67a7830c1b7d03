// The corpus layout shared by the writer and the reader (see docs/NOTES.md, "Corpus
// format"). Records sit in the main database under 8-byte big-endian record
// numbers, so position i is record i. Metadata keys start with kMetaPrefix,
// whose first byte ('_', 0x5f) sorts after every record key below 2^56, so
// metadata never shifts a record's position.
#ifndef LMDBLOADER_SRC_CORPUS_FORMAT_H_
#define LMDBLOADER_SRC_CORPUS_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "lmdb/record_key.h"  // records are keyed by RecordKey(i)

namespace lmdbloader {

inline constexpr std::string_view kMetaPrefix = "__lmdbloader__/";
inline constexpr std::string_view kManifestKey = "__lmdbloader__/manifest";
// XXH3-64 of the manifest's bytes, 8 bytes little-endian.
inline constexpr std::string_view kManifestChecksumKey = "__lmdbloader__/manifest.xxh3";
// XXH3-64 of every record, 8 bytes little-endian each, in record order.
inline constexpr std::string_view kChecksumsKey = "__lmdbloader__/checksums";
inline constexpr std::string_view kNamesBlobKey = "__lmdbloader__/names";
inline constexpr std::string_view kNamesOffsetsKey = "__lmdbloader__/names.offsets";
inline constexpr std::string_view kColumnPrefix = "__lmdbloader__/column/";
inline constexpr const char* kShardListFile = "shards.json";
inline constexpr const char* kCorpusFormatName = "lmdbloader-corpus";
inline constexpr int kCorpusFormatVersion = 1;
// The manifest's "keys" (lmdbloader/corpus_keys.h); absent means numbers.
inline constexpr const char* kCorpusKeysNumbers = "numbers";
inline constexpr const char* kCorpusKeysNames = "names";
// The largest record a corpus holds: LMDB's largest value (MAXDATASIZE in
// mdb.c; a node stores its data size in 32 bits), which is also the largest
// msgpack bin. Checked before anything is packed or read: a bigger one would
// otherwise be cut to its size modulo 2^32 by a 32-bit length.
inline constexpr uint64_t kMaxRecordBytes = 0xffffffffull;

bool IsMetaKey(std::string_view key);
// Names, strings in records and the manifest are UTF-8 (no overlong forms,
// surrogates or code points past U+10FFFF).
bool IsUtf8(std::string_view text);
// A name for messages: 'text' when it is printable UTF-8, else its bytes in
// hex (0x00ff...), cut after 64 bytes.
std::string PrintableName(std::string_view name);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_CORPUS_FORMAT_H_
