// PIL's antialiased resize (Image.resize(size, BILINEAR or BICUBIC) of a crop),
// streamed: source rows are pushed one at a time and every output row whose
// window of source rows is complete is finished at once: rounded, flipped,
// normalized and laid out.
//
// The filter is PIL's (libImaging/Resample.c, precompute_coeffs): for output
// i, center = box_start + (i + 0.5) * scale, where scale = box / output;
// support = max(scale, 1) (the triangle widens when shrinking, which is
// the antialiasing); the window is [floor(center - support + 0.5),
// floor(center + support + 0.5)) clipped to the crop; weights are the
// triangle at (x + 0.5 - center) / max(scale, 1), normalized to sum 1 and
// rounded to 22-bit fixed point. Bicubic: the same with support 2 x
// max(scale, 1) and PIL's cubic (a = -0.5) for the triangle; its negative
// weights round half away from zero, as PIL's do. Each pass rounds to whole levels 0..255
// as PIL's 8-bit passes do, in PIL's order: horizontal then vertical, but
// vertical first where Pillow 13 does (the height shrinks by more than
// twice as many pixels as the width).
//
// The sums are taken in float with those same weights. Products of a level
// and a 22-bit weight do not always fit float's 24-bit mantissa, so a sum
// that PIL's integers put just below a half level (or just above) can round
// the other way: a level's difference. That is not rare for simple ratios
// (weights of 7/12 and 5/12 put one pair of levels in twelve 2^-22 below a
// half), about 1-3% of values, a mean difference of 0.01-0.05 levels.
// Exact integer sums would cost about a third more time.
//
// Speed: in the horizontal pass, every window of an image has one length
// (a shorter one is moved to stay inside the row, its extra weights zero),
// so its inner loop has no branch; a pixel is four floats (R, G, B and a
// spare lane), one SSE vector, each weight stored in four lanes. The
// vertical pass (a weighted sum of whole rows from a ring of
// horizontally-resized rows) is fused with the writing of the output row,
// four pixels at a time transposed into the three planes.
#ifndef LMDBLOADER_SRC_IMAGE_RESAMPLE_H_
#define LMDBLOADER_SRC_IMAGE_RESAMPLE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lmdbloader/image_decode.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

typedef float Float4 __attribute__((vector_size(16)));

// The buffers behind a DecodeScratch.
struct DecodeScratch::Rep {
  size_t max_bytes = 0;
  size_t keep_bytes = 0;
  std::vector<uint32_t> h_start;   // per output column: first pixel of its window
  std::vector<Float4> h_weights;   // per output column: the window's weights, each in 4 lanes
  std::vector<uint32_t> v_first;   // per output row: first source row
  std::vector<uint32_t> v_count;   // per output row: source rows
  std::vector<float> v_weights;    // per output row: weights
  std::vector<float> taps;         // one window's weights while they are computed
  std::vector<Float4> row;         // the source row being resized, as floats
  std::vector<Float4> ring;        // horizontally resized rows
  std::vector<Float4> acc;         // one output row before writing
  std::vector<uint8_t> colour;     // the resized image before its colour changes
  std::vector<float> blur;         // a blur's rows, blurred along x, one float a level
  std::vector<uint8_t> decoded;    // the region of one decode several crops share (shared_decode.cc)

  size_t bytes() const;
  void Release();
};

// A scratch's buffers, for the code that decodes into them (and the
// benchmark that times its stages); the public header keeps them private.
// (A class, not a friend function: a friend function declared in the public
// header but defined inline here would be ill-formed, and a user finding it
// by argument-dependent lookup would get a link error.)
struct ScratchAccess {
  static DecodeScratch::Rep* Get(DecodeScratch* scratch) { return scratch->rep_.get(); }
};

// Which build of the resize's inner loops runs: the AVX2 + FMA one where
// the CPU has both (x86-64; resample_avx2.cc), else the portable one; tests
// run both and compare. Process-wide; the default is kBest.
enum class ResampleLoops { kBest, kPortable };
void UseResampleLoops(ResampleLoops loops);

#if defined(__x86_64__)
// resample_avx2.cc, built with -mavx2 -mfma: the horizontal pass (windows of
// `taps` pixels from row + start[x], weights[x * taps ..]; its sums in
// another order) and the bytes of n RGBX pixels to floats.
void HorizontalPassAvx2(const Float4* row, const uint32_t* start, const Float4* weights, uint32_t out_w,
                        uint32_t taps, Float4* dst);
void BytesToFloatsAvx2(const uint8_t* src, uint32_t n, Float4* dst);
// HorizontalPassAvx2 of two rows (a into dst_a, b into dst_b; the same sums).
void HorizontalPairAvx2(const Float4* a, const Float4* b, const uint32_t* start, const Float4* weights,
                        uint32_t out_w, uint32_t taps, Float4* dst_a, Float4* dst_b);
// n pixels of the weighted sum of `count` rows, rounded to levels (the
// vertical pass).
void SumRowsAvx2(const Float4* const* rows, const float* w, uint32_t count, uint32_t n, Float4* dst);
// VerticalRow's sum (not rounded): n pixels, `count` rows of the ring from
// row `first` (modulo ring_rows).
void VerticalSumAvx2(const Float4* ring, uint32_t ring_rows, uint32_t n, uint32_t first, uint32_t count,
                     const float* w, Float4* dst);
// The same sums for float32 CHW output, written as WriteRow writes them
// (level * scale[c] + offset[c] into out[c * plane + x], mirrored where
// `flip` within a row of n): whole blocks of 8 pixels, returning how many
// pixels it wrote (the first ones; the caller writes the rest).
uint32_t SumRowsToPlanesAvx2(const Float4* const* rows, const float* w, uint32_t count, uint32_t n,
                             const float* scale, const float* offset, bool flip, float* out, size_t plane);
#endif

// The pixels of [0, n) whose centers lie in the box [b0, b1) (PIL's crop
// of a whole-pixel box keeps exactly those); when none does, the pixel
// holding the box's middle. Needs 0 <= b0 < b1 <= n.
void BoxPixels(double b0, double b1, uint32_t n, uint32_t* begin, uint32_t* end);

// How a pushed row's pixels are stored.
enum class SourcePixels {
  kRgbx,          // R, G, B, unused: 4 bytes
  kRgb,           // R, G, B: 3 bytes
  kCmykInverted,  // Adobe CMYK as libjpeg gives it: 4 bytes, 0 = full ink
  kGray,          // a luma level: 1 byte (output as gray; never RGB)
};

// What is resized: rows of src_width pixels, src_rows of them (the crop),
// and the box to resize inside them, in their coordinates (whole pixels
// from 0 for a crop that PIL would make; fractional when the box was
// scaled). The box must lie within [-1, src + 1) of the crop (BoxPixels).
struct ResampleGeometry {
  uint32_t src_width = 0;
  uint32_t src_rows = 0;
  double box_left = 0, box_top = 0, box_width = 0, box_height = 0;
};

class Resampler {
 public:
  explicit Resampler(DecodeScratch::Rep* scratch) : s_(scratch) {}

  // Computes the filters and sizes the scratch. InvalidArgument when the
  // scratch would need more than its cap. `out` receives spec.bytes().
  Status Prepare(const ResampleGeometry& geometry, const OutputSpec& spec, void* out);

  // The next source row (src_width pixels). Rows past the last one any
  // output needs are ignored.
  void PushRow(const uint8_t* pixels, SourcePixels format) noexcept;

  // Every output row written.
  bool done() const { return next_out_ == spec_.height; }
  // Source rows the output needs (push at least these).
  uint32_t rows_needed() const { return rows_needed_; }

 private:
  void ConvertRow(const uint8_t* pixels, SourcePixels format, Float4* dst) noexcept;
  // Resizes one row across, into spec.width pixels (rounded to levels).
  void HorizontalRow(const Float4* row, Float4* dst) noexcept;
  // Two rows across at once, each as HorizontalRow resizes it.
  void HorizontalRows(const Float4* a, const Float4* b, Float4* dst_a, Float4* dst_b) noexcept;
  // Output row y's weighted sum of the ring's rows (ring_row_ pixels).
  void VerticalRow(uint32_t y, Float4* dst) noexcept;
  // Output row y: the weighted sum of `count` rows, rounded, normalized,
  // mirrored and laid out (the vertical pass and the writing in one loop).
  void WriteRow(uint32_t y, const Float4* const* rows, const float* w, uint32_t count) noexcept;
  // Windows up to this many rows are summed while writing; longer ones
  // (shrinking by more than 7) are summed into acc first.
  static constexpr uint32_t kMaxFusedTaps = 16;

  DecodeScratch::Rep* s_;
  OutputSpec spec_;
  uint8_t* out_ = nullptr;
  uint32_t src_width_ = 0;
  uint32_t h_taps_ = 0;
  uint32_t h_begin_ = 0;  // first source pixel any window reads
  uint32_t h_end_ = 0;    // one past the last, <= src_width
  uint32_t v_taps_ = 0;   // the longest vertical window
  uint32_t ring_rows_ = 0; // rows in the ring
  uint32_t row_len_ = 0;  // pixels of one converted source row (s_->row holds two)
  bool pending_ = false;  // a converted row waits in s_->row for its pair
  uint32_t ring_row_ = 0; // pixels a ring row holds
  bool vertical_first_ = false;
  uint32_t rows_needed_ = 0;
  uint32_t rows_in_ = 0;
  uint32_t next_out_ = 0;
  Float4 scale_, offset_;  // float32 output: level * scale_ + offset_
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IMAGE_RESAMPLE_H_
