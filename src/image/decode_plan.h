// How the decoders of lmdbloader/image_decode.h decode one image: the
// checks of their arguments, the IDCT scale, the region of the scaled image
// to decode, and the resize of stored rows. Shared by the single-crop path
// (image_decode.cc), the several crops of one decode (decode_views.cc) and
// the benchmark (bench/image_bench.cc), which times each step alone.
#ifndef LMDBLOADER_SRC_IMAGE_DECODE_PLAN_H_
#define LMDBLOADER_SRC_IMAGE_DECODE_PLAN_H_

#include <string_view>

#include "image/jpeg_decoder.h"
#include "image/jpeg_header.h"
#include "image/resample.h"
#include "lmdbloader/image_decode.h"

namespace lmdbloader {

struct JpegDecodePlan {
  JpegRegionRequest request;  // y_end before the resampler trims it
  ResampleGeometry geometry;  // relative to (x_begin, y_begin)
};

// InvalidArgument for an output size, layout, type, normalization or
// filter out of range.
Status CheckSpec(const OutputSpec& spec);
// InvalidArgument for a box that is empty, not finite or not inside the image.
Status CheckBox(const CropBox& box, uint32_t width, uint32_t height);

// The IDCT scale n (of 8) the single-crop path decodes `box` at for `spec`:
// the smallest of 1, 2 and 4 that keeps the box at least as large as the
// output on both axes, else 8 (always 8 without spec.scale_in_idct).
uint32_t ChooseScale(const CropBox& box, const OutputSpec& spec);

// The header of a JPEG that DecodeJpegRegion decodes; DecodeError for data
// that is not a JPEG or a variant libjpeg-turbo 2.1 does not decode.
Status ReadDecodableHeader(std::string_view jpeg, JpegHeader* header);

// Needs a box checked to lie inside header's image. PlanJpegDecode plans
// at ChooseScale's scale, PlanJpegDecodeAt at scale n/8.
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
