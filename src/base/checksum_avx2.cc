// XXH3 compiled for AVX2; called by checksum.cc only when the CPU has it.
#include <cstddef>
#include <cstdint>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace lmdbloader {

uint64_t ChecksumAvx2(const void* data, size_t size) { return XXH3_64bits(data, size); }

}  // namespace lmdbloader
