// Record checksums: XXH3-64 (Debian's libxxhash-dev, used header-only).
//
// XXH3 runs at about 9 GB/s with SSE2 and 26 GB/s with AVX2 on one core of
// the machines we measured (bench/reader_bench.cc), so the AVX2 build is
// chosen at run time where the CPU has it. The value is the same either way.
#ifndef LMDBLOADER_SRC_CHECKSUM_H_
#define LMDBLOADER_SRC_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lmdbloader {

inline constexpr const char* kChecksumAlgorithm = "xxh3_64";

uint64_t Checksum(const void* data, size_t size);
inline uint64_t Checksum(std::string_view bytes) { return Checksum(bytes.data(), bytes.size()); }

// The same checksum over bytes given in pieces (XXH3-64's streaming form,
// equal to Checksum of the pieces joined): for values checked without
// holding them whole.
class ChecksumStream {
 public:
  ChecksumStream();
  ~ChecksumStream();
  ChecksumStream(const ChecksumStream&) = delete;
  ChecksumStream& operator=(const ChecksumStream&) = delete;
  void Add(const void* data, size_t size);
  uint64_t Value() const;

 private:
  void* state_;  // XXH3_state_t, kept out of this header
};

// 16 lowercase hex digits, as the manifest stores them.
std::string ChecksumHex(uint64_t value);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_CHECKSUM_H_
