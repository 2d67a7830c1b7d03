#include "image/jpeg_header.h"

#include <string>

#include "lmdbloader/image_decode.h"

namespace lmdbloader {

namespace {

uint32_t BigEndian16(const unsigned char* p) { return (uint32_t{p[0]} << 8) | p[1]; }

bool IsFrameMarker(uint8_t m) {
  // SOF0-SOF15, less DHT (C4), JPG (C8) and DAC (CC), which share the range.
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

// Processes libjpeg-turbo 2.1 decodes: baseline, extended sequential and
// progressive, Huffman (C0-C2) or arithmetic (C9, CA) coded. Not lossless
// (C3, CB) nor hierarchical (C5-C7, CD-CF).
bool DecodableProcess(uint8_t m) { return m == 0xC0 || m == 0xC1 || m == 0xC2 || m == 0xC9 || m == 0xCA; }

Status Damaged(const std::string& what) { return Status::DecodeError("JPEG header: " + what); }

}  // namespace

bool LooksLikeJpeg(std::string_view data) {
  return data.size() >= 3 && static_cast<unsigned char>(data[0]) == 0xFF &&
         static_cast<unsigned char>(data[1]) == 0xD8 && static_cast<unsigned char>(data[2]) == 0xFF;
}

Status ParseJpegHeader(std::string_view data, JpegHeader* header) {
  *header = JpegHeader();
  if (!LooksLikeJpeg(data)) return Damaged("no SOI marker");
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const size_t n = data.size();
  size_t at = 2;
  while (true) {
    // A marker: 0xFF, any number of 0xFF fill bytes, then the code.
    if (at >= n) return Damaged("ends before the frame header (truncated)");
    if (p[at] != 0xFF) return Damaged("a marker was expected at byte " + std::to_string(at));
    while (at < n && p[at] == 0xFF) ++at;
    if (at >= n) return Damaged("ends before the frame header (truncated)");
    const uint8_t marker = p[at++];
    // Markers without a length.
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;
    if (marker == 0xD8) return Damaged("a second SOI marker");
    if (marker == 0xD9) return Damaged("the image ends before a frame header");
    if (marker == 0xDA) return Damaged("a scan starts before the frame header");
    if (marker == 0x00) return Damaged("a stray 0xFF00 at byte " + std::to_string(at - 2));
    if (n - at < 2) return Damaged("ends inside a segment's length (truncated)");
    const uint32_t length = BigEndian16(p + at);
    if (length < 2) return Damaged("a segment length below 2");
    if (n - at < length) return Damaged("a segment runs past the end of the data (truncated)");
    if (IsFrameMarker(marker)) {
      const unsigned char* s = p + at + 2;
      if (length < 8) return Damaged("a frame header shorter than 8 bytes");
      header->sof_marker = marker;
      header->precision = s[0];
      header->height = BigEndian16(s + 1);
      header->width = BigEndian16(s + 3);
      header->components = s[5];
      if (header->components == 0) return Damaged("a frame with no components");
      if (length < 8 + 3 * header->components) return Damaged("a frame header too short for its components");
      if (header->width == 0 || header->height == 0) {
        // Height 0 means "given later by a DNL marker", which libjpeg does not read either.
        return Damaged("a frame of " + std::to_string(header->width) + "x" + std::to_string(header->height) +
                       " pixels");
      }
      const uint64_t pixels = uint64_t{header->width} * header->height;
      if (pixels > kMaxImagePixels) {
        return Damaged("claims " + std::to_string(header->width) + "x" + std::to_string(header->height) + " = " +
                       std::to_string(pixels) + " pixels, more than the limit of " +
                       std::to_string(kMaxImagePixels) + " (a decompression bomb?)");
      }
      header->decodable = header->precision == 8 && DecodableProcess(marker) &&
                          (header->components == 1 || header->components == 3 || header->components == 4);
      return Status::OK();
    }
    at += length;
  }
}

}  // namespace lmdbloader
