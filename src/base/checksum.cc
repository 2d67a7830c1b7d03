#include "base/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace lmdbloader {

#if defined(__x86_64__)
uint64_t ChecksumAvx2(const void* data, size_t size);  // checksum_avx2.cc, built with -mavx2
#endif

uint64_t Checksum(const void* data, size_t size) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return ChecksumAvx2(data, size);
#endif
  return XXH3_64bits(data, size);
}

ChecksumStream::ChecksumStream() : state_(XXH3_createState()) { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_)); }

ChecksumStream::~ChecksumStream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void ChecksumStream::Add(const void* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}

uint64_t ChecksumStream::Value() const { return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_)); }

std::string ChecksumHex(uint64_t value) {
  static const char* digits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[i] = digits[value & 15];
  return out;
}

}  // namespace lmdbloader
