#include "corpus/corpus_format.h"

namespace lmdbloader {

std::string RecordKey(uint64_t index) {
  std::string key(8, '\0');
  for (int b = 7; b >= 0; --b) {
    key[b] = static_cast<char>(index & 0xff);
    index >>= 8;
  }
  return key;
}

bool ParseRecordKey(std::string_view key, uint64_t* index) {
  if (key.size() != 8) return false;
  uint64_t v = 0;
  for (char c : key) v = (v << 8) | static_cast<unsigned char>(c);
  *index = v;
  return true;
}

bool IsMetaKey(std::string_view key) {
  return key.substr(0, kMetaPrefix.size()) == kMetaPrefix;
}

}  // namespace lmdbloader
