// How DecodeJpegInto decodes one image: the IDCT scale, the region of the
// scaled image to decode, and the resize of that region. Shared with the
// benchmark (bench/image_bench.cc), which times each step alone.
#ifndef LMDBLOADER_SRC_IMAGE_DECODE_PLAN_H_
#define LMDBLOADER_SRC_IMAGE_DECODE_PLAN_H_

#include "image/jpeg_decoder.h"
#include "image/jpeg_header.h"
#include "image/resample.h"
#include "lmdbloader/image_decode.h"

namespace lmdbloader {

struct JpegDecodePlan {
  JpegRegionRequest request;  // y_end before the resampler trims it
  ResampleGeometry geometry;  // relative to (x_begin, y_begin)
};

// Needs a box checked to lie inside header's image.
void PlanJpegDecode(const JpegHeader& header, const CropBox& box, const OutputSpec& spec, JpegDecodePlan* plan);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IMAGE_DECODE_PLAN_H_
