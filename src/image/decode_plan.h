// How the decoders of lmdbloader/image_decode.h decode one image: the
// checks of their arguments, the IDCT scale, the region of the scaled image
// to decode, and the resize of stored rows. Shared by the single-crop path
// (image_decode.cc), the several crops of one decode (shared_decode.cc) and
// the benchmark (bench/image_bench.cc), which times each step alone.
#ifndef LMDBLOADER_SRC_IMAGE_DECODE_PLAN_H_
#define LMDBLOADER_SRC_IMAGE_DECODE_PLAN_H_

#include <cstdint>
#include <string_view>

#include "image/jpeg_decoder.h"
#include "image/jpeg_header.h"
#include "image/resample.h"
#include "lmdbloader/image_decode.h"

namespace lmdbloader {

// How the resampler reads the decoder's pixels.
inline SourcePixels SourcePixelsOf(JpegPixels format) {
  switch (format) {
    case JpegPixels::kCmykInverted: return SourcePixels::kCmykInverted;
    case JpegPixels::kGray: return SourcePixels::kGray;
    case JpegPixels::kRgbx: break;
  }
  return SourcePixels::kRgbx;
}

struct JpegDecodePlan {
  JpegRegionRequest request;  // y_end before the resampler trims it
  ResampleGeometry geometry;  // relative to (x_begin, y_begin)
};

// InvalidArgument for an output size, layout, type, normalization or
// filter out of range.
Status CheckSpec(const OutputSpec& spec);
// InvalidArgument for a box that is empty, not finite or not inside the image.
Status CheckBox(const CropBox& box, uint32_t width, uint32_t height);

// How much larger than the output the box must stay, on both axes, once the
// IDCT has shrunk it. Decoding at n/8 leaves to the IDCT part of a shrink
// PIL does with its antialiasing filter, and the two low-pass filters differ:
// the less the resize shrinks after the IDCT, the more the result differs
// from torchvision's (PIL's full decode, then the resize). Per-image mean
// |difference| in levels of 255 against it, uint8 224x224, bilinear /
// bicubic (average, worst), by q = box / output after the IDCT, over 719
// crops of JPEG photographs 700-2,000 px (mosaics of scikit-image's at their
// own resolution: colour, gray, CMYK; quality 90), each at every scale:
//   q 1.00-1.25: 1.35, 3.16 / 1.46, 4.12   q 1.25-1.50: 0.83, 1.52 / 0.94, 1.83
//   q 1.50-1.75: 0.73, 1.27 / 0.73, 1.34   q 1.75-2.00: 0.51, 0.76 / 0.51, 0.75
//   q 2.00-3.00: 0.39, 0.60 / 0.37, 0.57   full scale: under 0.02
// The old rule (q >= 1) reached 3-4 levels on average for large crops; 1.5
// keeps every crop under 1.4 (the worst are fine gray textures), and the
// speed where it matters: a 2,000 px photograph's crop of 0.9-1.0 of its
// area to 224 px, bicubic float32, one thread: 18.4 ms at full scale, 9.3 at
// 1/2, 6.9 at 1/4 (chosen at 1.5, as at 1); 1,000 px: 5.0 against 2.8 at 1/2.
// A threshold of 2 would keep it under 0.8 but decode that 1,000 px crop at
// full scale, and the 2,000 px one at 1/2.
inline constexpr double kIdctMinShrink = 1.5;

// The n of the n/8 scale (1, 2, 4 or 8) the single-crop path decodes `box` at: the
// smallest that keeps the box kIdctMinShrink times the output on both axes;
// 8 when spec.scale_in_idct is false.
uint32_t ChooseIdctScale(const CropBox& box, const OutputSpec& spec);

// The header of a JPEG that DecodeJpegRegion decodes; DecodeError for data
// that is not a JPEG or a variant libjpeg-turbo 2.1 does not decode.
Status ReadDecodableHeader(std::string_view jpeg, JpegHeader* header);

// Needs a box checked to lie inside header's image. PlanJpegDecode plans
// at ChooseIdctScale's scale, PlanJpegDecodeAt at scale n/8.
void PlanJpegDecode(const JpegHeader& header, const CropBox& box, const OutputSpec& spec, JpegDecodePlan* plan);
void PlanJpegDecodeAt(const JpegHeader& header, const CropBox& box, uint32_t n, JpegDecodePlan* plan);

// Resizes stored rows into out as spec says (flip and colour ops included):
// row y of the crop at first + y * row_stride, geometry.src_width pixels
// of `format`, geometry.src_rows of them.
Status ResampleRows(const uint8_t* first, size_t row_stride, SourcePixels format, const ResampleGeometry& geometry,
                    const OutputSpec& spec, DecodeScratch::Rep* rep, void* out);

// Gives back a scratch that grew past its keep size, on every return.
class ScratchUse {
 public:
  explicit ScratchUse(DecodeScratch::Rep* rep) : rep_(rep) {}
  ~ScratchUse() {
    if (rep_->bytes() > rep_->keep_bytes) rep_->Release();
  }
  ScratchUse(const ScratchUse&) = delete;
  ScratchUse& operator=(const ScratchUse&) = delete;

 private:
  DecodeScratch::Rep* rep_;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IMAGE_DECODE_PLAN_H_
