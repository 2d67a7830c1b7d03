// A JPEG's frame header (SOF), read by walking its markers without libjpeg:
// the image's size is known, and a decompression bomb refused, before the
// decoder allocates anything. Nothing in the bytes is trusted: every length
// is checked against the data. Fuzzed by fuzz/image_decode_fuzzer.cc.
#ifndef LMDBLOADER_SRC_IMAGE_JPEG_HEADER_H_
#define LMDBLOADER_SRC_IMAGE_JPEG_HEADER_H_

#include <cstdint>
#include <string_view>

#include "lmdbloader/status.h"

namespace lmdbloader {

struct JpegHeader {
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t components = 0;
  uint32_t precision = 0;  // bits a sample
  uint8_t sof_marker = 0;  // 0xC0 baseline, 0xC2 progressive, ...
  // libjpeg-turbo 2.1 decodes it and the result is RGB: 8-bit samples, a
  // DCT process it implements (sequential or progressive, Huffman or
  // arithmetic coded), 1, 3 or 4 components.
  bool decodable = false;
};

// Starts with a JPEG's signature (SOI and the next marker's 0xFF): what
// PIL's JPEG plugin accepts before parsing.
bool LooksLikeJpeg(std::string_view data);

// Walks the markers of `data` (which LooksLikeJpeg) up to the frame header.
// DecodeError when a segment runs past the end, a scan or the end of the
// image comes before a frame header, the header is too short for its
// components, or it claims a zero size or more than kMaxImagePixels pixels.
Status ParseJpegHeader(std::string_view data, JpegHeader* header);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IMAGE_JPEG_HEADER_H_
