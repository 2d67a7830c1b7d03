// Record numbers as LMDB keys: 8 bytes, big-endian, so that LMDB's bytewise
// order is numeric order and position i of a database keyed 0..n-1 is record
// i. The record index stores no keys for such a database (it computes them),
// and the corpus format keys its records this way.
#ifndef LMDBLOADER_SRC_LMDB_RECORD_KEY_H_
#define LMDBLOADER_SRC_LMDB_RECORD_KEY_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace lmdbloader {

// 8-byte big-endian encoding of a record number.
inline std::string RecordKey(uint64_t index) {
  std::string key(8, '\0');
  for (int b = 7; b >= 0; --b) {
    key[b] = static_cast<char>(index & 0xff);
    index >>= 8;
  }
  return key;
}

// True and the number when `key` is exactly 8 bytes.
inline bool ParseRecordKey(std::string_view key, uint64_t* index) {
  if (key.size() != 8) return false;
  uint64_t v = 0;
  for (char c : key) v = (v << 8) | static_cast<unsigned char>(c);
  *index = v;
  return true;
}

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_LMDB_RECORD_KEY_H_
