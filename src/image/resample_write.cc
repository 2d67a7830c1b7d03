// Resampler::WriteRow: an output row's vertical sum, rounded, normalized,
// mirrored and laid out (resample.h); split from resample.cc for length.
#include <cstring>

#include "image/resample.h"
#include "image/resample_levels.h"

namespace lmdbloader {

namespace {

// Pixel x of the weighted sum of `count` rows.
inline Float4 SumAt(const Float4* const* rows, const float* w, uint32_t count, uint32_t x) {
  Float4 a = rows[0][x] * w[0];
  for (uint32_t j = 1; j < count; ++j) a += rows[j][x] * w[j];
  return a;
}

}  // namespace

void Resampler::WriteRow(uint32_t y, const Float4* const* rows, const float* w, uint32_t count) noexcept {
  const uint32_t ow = spec_.width, oh = spec_.height;
#if defined(__x86_64__)
  // The vertical sums in AVX2 first, into acc (free here: windows of more
  // than kMaxFusedTaps rows arrive already summed, count 1); the layouts
  // below then write one row, weight 1, which rounds to itself.
  // Float32 CHW, the common output, sums straight into its planes.
  static const float one = 1.0f;
  Float4* const acc = s_->acc.data();
  const bool rgb_planes = !spec_.grayscale && spec_.type == PixelType::kFloat32 && spec_.layout == PixelLayout::kCHW;
  if (count > 1 && UseAvx2ResampleLoops() && !rgb_planes) {
    SumRowsAvx2(rows, w, count, ow, acc);
    rows = &acc;
    w = &one;
    count = 1;
  }
#endif
  // Mirror by walking the output row backwards; every store goes through
  // memcpy or an unaligned store: the caller's buffer need not be aligned.
  const bool flip = spec_.flip;
  const ptrdiff_t step = flip ? -1 : 1;
  const size_t x0 = flip ? ow - 1 : 0;
  const size_t plane = size_t{ow} * oh;
  if (spec_.grayscale) {  // one channel: CHW and HWC are the same bytes
    if (spec_.type == PixelType::kUint8) {
      uint8_t* d = out_ + size_t{y} * ow + x0;
      for (uint32_t x = 0; x < ow; ++x, d += step) *d = static_cast<uint8_t>(Level(SumAt(rows, w, count, x))[0]);
    } else {
      uint8_t* d = out_ + (size_t{y} * ow + x0) * 4;
      for (uint32_t x = 0; x < ow; ++x, d += 4 * step) {
        const float v = LevelFloat(SumAt(rows, w, count, x))[0] * scale_[0] + offset_[0];
        std::memcpy(d, &v, 4);
      }
    }
    return;
  }
  if (spec_.type == PixelType::kUint8) {
    if (spec_.layout == PixelLayout::kHWC) {
      uint8_t* d = out_ + (size_t{y} * ow + x0) * 3;
      for (uint32_t x = 0; x < ow; ++x, d += 3 * step) {
        const Int4 q = Level(SumAt(rows, w, count, x));
        d[0] = static_cast<uint8_t>(q[0]);
        d[1] = static_cast<uint8_t>(q[1]);
        d[2] = static_cast<uint8_t>(q[2]);
      }
    } else {
      uint8_t* d = out_ + size_t{y} * ow + x0;
      for (uint32_t x = 0; x < ow; ++x, d += step) {
        const Int4 q = Level(SumAt(rows, w, count, x));
        d[0] = static_cast<uint8_t>(q[0]);
        d[plane] = static_cast<uint8_t>(q[1]);
        d[2 * plane] = static_cast<uint8_t>(q[2]);
      }
    }
    return;
  }
  const Float4 scale = scale_, offset = offset_;
  if (spec_.layout == PixelLayout::kHWC) {
    uint8_t* d = out_ + (size_t{y} * ow + x0) * 12;
    for (uint32_t x = 0; x < ow; ++x, d += 12 * step) {
      const Float4 v = LevelFloat(SumAt(rows, w, count, x)) * scale + offset;
      std::memcpy(d, &v, 12);
    }
    return;
  }
  uint8_t* row0 = out_ + size_t{y} * ow * 4;  // row y of the first plane
  uint32_t x = 0;
#if defined(__x86_64__)
  if (UseAvx2ResampleLoops()) {
    float scales[3] = {scale[0], scale[1], scale[2]}, offsets[3] = {offset[0], offset[1], offset[2]};
    float* first = reinterpret_cast<float*>(row0);  // only written with unaligned stores
    x = SumRowsToPlanesAvx2(rows, w, count, ow, scales, offsets, flip, first, plane);
  }
#endif
#if defined(__SSE2__)
  // Four pixels at a time: summed, rounded, transposed to one vector a
  // channel, normalized, stored to the three planes (reversed to mirror).
  const __m128 sr = Splat(scale[0]), sg = Splat(scale[1]), sb = Splat(scale[2]);
  const __m128 orr = Splat(offset[0]), og = Splat(offset[1]), ob = Splat(offset[2]);
  for (; x + 4 <= ow; x += 4) {
    Float4 a0 = rows[0][x] * w[0], a1 = rows[0][x + 1] * w[0];
    Float4 a2 = rows[0][x + 2] * w[0], a3 = rows[0][x + 3] * w[0];
    for (uint32_t j = 1; j < count; ++j) {
      const Float4* r = rows[j] + x;
      const float k = w[j];
      a0 += r[0] * k;
      a1 += r[1] * k;
      a2 += r[2] * k;
      a3 += r[3] * k;
    }
    __m128 p0 = LevelFloat(a0), p1 = LevelFloat(a1), p2 = LevelFloat(a2), p3 = LevelFloat(a3);
    _MM_TRANSPOSE4_PS(p0, p1, p2, p3);
    __m128 r = p0 * sr + orr, g = p1 * sg + og, b = p2 * sb + ob;
    size_t at = x;
    if (flip) {
      r = _mm_shuffle_ps(r, r, _MM_SHUFFLE(0, 1, 2, 3));
      g = _mm_shuffle_ps(g, g, _MM_SHUFFLE(0, 1, 2, 3));
      b = _mm_shuffle_ps(b, b, _MM_SHUFFLE(0, 1, 2, 3));
      at = ow - 4 - x;
    }
    uint8_t* d = row0 + at * 4;
    _mm_storeu_ps(reinterpret_cast<float*>(d), r);
    _mm_storeu_ps(reinterpret_cast<float*>(d + plane * 4), g);
    _mm_storeu_ps(reinterpret_cast<float*>(d + plane * 8), b);
  }
#endif
  for (; x < ow; ++x) {
    const Float4 v = LevelFloat(SumAt(rows, w, count, x)) * scale + offset;
    uint8_t* d = row0 + (flip ? ow - 1 - x : x) * 4;
    const float r = v[0], g = v[1], b = v[2];
    std::memcpy(d, &r, 4);
    std::memcpy(d + plane * 4, &g, 4);
    std::memcpy(d + plane * 8, &b, 4);
  }
}

}  // namespace lmdbloader
