// Region and scaled decoding of one JPEG with libjpeg-turbo's libjpeg API:
// the image shrunk by scale_num/8 in the inverse DCT, only the rows and
// columns asked for delivered, one row at a time, to a RowSink.
//
// Settings are Pillow's (islow IDCT, fancy upsampling), so at scale 8/8 the
// rows equal Pillow's decode. Columns: jpeg_crop_scanline starts the region
// at an iMCU boundary at or left of the one asked for (the sink is told
// where), which costs the decoder's fancy upsampling its left neighbour
// there; the region decoded therefore starts one pixel further left and
// ends a few further right than asked where the image has them, so the
// columns asked for match a full decode. Rows: jpeg_skip_scanlines keeps
// the upsampler's context, and decoding stops after the last row asked for
// where what follows cannot change the verdict (see read_to_end).
//
// Damaged data is judged as Pillow judges it (its JpegDecode.c): libjpeg's
// warnings (corrupt entropy data, extraneous bytes, a bogus progression) are
// ignored, its errors are errors, and data that ends before the last row is
// truncated. Pillow then reads the markers after the scan up to the end of
// the image (jpeg_finish_decompress), where a marker that makes no sense
// there is an error and the end of the data is not. The same is done here.
//
// libjpeg reports fatal errors through a longjmp out of its error handler:
// the function that calls libjpeg (RunJob in jpeg_decoder.cc) holds no C++
// object with a destructor, and the decompressor is destroyed on every path.
// A RowSink is called from inside that frame: it must not throw.
#ifndef LMDBLOADER_SRC_IMAGE_JPEG_DECODER_H_
#define LMDBLOADER_SRC_IMAGE_JPEG_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "image/jpeg_header.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

// The bytes of one decoded pixel: libjpeg's extended RGB with a fourth byte
// (0xFF), Adobe CMYK as libjpeg gives it (inverted: 0 is full ink), which
// Pillow reads as "CMYK;I" and converts with its cmyk2rgb, or the luma alone
// (one byte: a gray JPEG's samples, a colour one's Y).
enum class JpegPixels { kRgbx, kCmykInverted, kGray };

inline uint32_t JpegPixelBytes(JpegPixels format) { return format == JpegPixels::kGray ? 1 : 4; }

// Size of the image scaled by num/8 (libjpeg rounds up).
inline uint32_t JpegScaledSize(uint32_t size, uint32_t num) {
  return static_cast<uint32_t>((uint64_t{size} * num + 7) / 8);
}

struct JpegRegionRequest {
  uint32_t scale_num = 8;  // 1..8: decode at scale_num/8 of the full size
  // Columns [x_begin, x_end) and rows [y_begin, y_end) of the scaled image.
  uint32_t x_begin = 0, x_end = 0;
  uint32_t y_begin = 0, y_end = 0;
  // After row y_end - 1, always decode the rows below (entropy decoding
  // only) and read the markers after the scan. Without it, a single-scan
  // JPEG whose scan data below the region runs, with restart markers only,
  // into its end-of-image marker is not read further (nothing there could
  // make Pillow refuse it); other data (cut, or damaged into a marker) is
  // read to the end all the same. The verdict is the same either way.
  bool read_to_end = false;
  // The luma alone (kGray) for a JPEG of 1 or 3 components: libjpeg skips
  // the chroma's inverse DCT, upsampling and colour conversion (a 500x375
  // photograph at 1/2: 0.48 ms against 0.63 through Pillow's draft). A
  // colour JPEG's Y is within a level of PIL's convert("L") of its RGB but
  // where the RGB was clipped. CMYK JPEGs stay kCmykInverted.
  bool gray = false;
};

class RowSink {
 public:
  virtual ~RowSink() = default;
  // Before the first row: rows will hold `width` pixels starting at column
  // `x0` of the scaled image (x0 <= x_begin asked; the row pointer handed to
  // Row points at column x0), 4 bytes each, in `format`. Return false to stop
  // (the sink keeps its own reason).
  virtual bool Begin(uint32_t x0, uint32_t width, JpegPixels format) noexcept = 0;
  // Rows y_begin to y_end - 1, in order.
  virtual void Row(const uint8_t* pixels) noexcept = 0;
};

// Decodes the request's region of `jpeg`, whose header ParseJpegHeader read
// (header.decodable). DecodeError with libjpeg's message for damaged data
// (anywhere, as Pillow would raise), "truncated" when the data ends before
// the last row, or more than kMaxJpegScans scans; InvalidArgument for a request outside the
// scaled image. When the sink's Begin refuses, returns OK with
// *sink_refused set (the sink knows why).
Status DecodeJpegRegion(std::string_view jpeg, const JpegHeader& header, const JpegRegionRequest& request,
                        RowSink* sink, bool* sink_refused);

// The first marker in entropy-coded data p[0, n): the byte after a 0xFF
// that is neither a stuffed 0, a fill 0xFF nor a restart marker's (0xD0 to
// 0xD7); 0 when the data ends first.
int NextMarker(const uint8_t* p, size_t n);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IMAGE_JPEG_DECODER_H_
