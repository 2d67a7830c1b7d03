#include "image/resample.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include "image/resample_filter.h"
#include "image/resample_levels.h"

namespace lmdbloader {

namespace {

typedef uint8_t Byte4 __attribute__((vector_size(4)));

template <uint32_t kTaps>
void HorizontalPass(const Float4* row, const uint32_t* start, const Float4* weights, uint32_t out_w, uint32_t taps,
                    Float4* dst) {
  const uint32_t t = kTaps ? kTaps : taps;
  for (uint32_t x = 0; x < out_w; ++x) {
    const Float4* s = row + start[x];
    const Float4* w = weights + size_t{x} * t;
    Float4 a = s[0] * w[0];
    for (uint32_t j = 1; j < t; ++j) a += s[j] * w[j];
    dst[x] = LevelFloat(a);
  }
}

// n pixels of 4 bytes (R, G, B, unused) to floats.
void BytesToFloats(const uint8_t* src, uint32_t n, Float4* dst) {
  uint32_t x = 0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  for (; x + 4 <= n; x += 4) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + size_t{x} * 4));
    const __m128i lo = _mm_unpacklo_epi8(b, zero), hi = _mm_unpackhi_epi8(b, zero);
    dst[x] = _mm_cvtepi32_ps(_mm_unpacklo_epi16(lo, zero));
    dst[x + 1] = _mm_cvtepi32_ps(_mm_unpackhi_epi16(lo, zero));
    dst[x + 2] = _mm_cvtepi32_ps(_mm_unpacklo_epi16(hi, zero));
    dst[x + 3] = _mm_cvtepi32_ps(_mm_unpackhi_epi16(hi, zero));
  }
#endif
  for (; x < n; ++x) {
    Byte4 b;
    std::memcpy(&b, src + size_t{x} * 4, 4);
    dst[x] = __builtin_convertvector(b, Float4);
  }
}

std::atomic<bool> portable_loops{false};

}  // namespace

bool UseAvx2ResampleLoops() {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2 && !portable_loops.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void UseResampleLoops(ResampleLoops loops) {
  portable_loops.store(loops == ResampleLoops::kPortable, std::memory_order_relaxed);
}

namespace {

template <class T>
size_t Capacity(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

// Bytes the vector holds once it has n elements.
template <class T>
size_t NeedBytes(const std::vector<T>& v, size_t n) {
  return std::max(v.capacity(), n) * sizeof(T);
}

}  // namespace

size_t DecodeScratch::Rep::bytes() const {
  return Capacity(h_start) + Capacity(h_weights) + Capacity(v_first) + Capacity(v_count) + Capacity(v_weights) +
         Capacity(taps) + Capacity(row) + Capacity(ring) + Capacity(acc) + Capacity(colour) + Capacity(blur) +
         Capacity(decoded);
}

namespace {

// Swaps each with an empty one: clear() and shrink_to_fit() may keep the memory.
template <typename... Vectors>
void FreeAll(Vectors&... v) {
  (Vectors().swap(v), ...);
}

}  // namespace

void DecodeScratch::Rep::Release() {
  FreeAll(h_start, h_weights, v_first, v_count, v_weights, taps, row, ring, acc, blur, colour, decoded);
}

void BoxPixels(double b0, double b1, uint32_t n, uint32_t* begin, uint32_t* end) {
  // Pixel x's center x + 0.5 lies in [b0, b1) when ceil(b0 - 0.5) <= x < ceil(b1 - 0.5).
  double lo = std::ceil(b0 - 0.5);
  double hi = std::ceil(b1 - 0.5);
  lo = std::min(std::max(lo, 0.0), double(n));
  hi = std::min(std::max(hi, 0.0), double(n));
  if (hi <= lo) {
    lo = std::min(std::max(std::floor((b0 + b1) / 2), 0.0), double(n) - 1);
    hi = lo + 1;
  }
  *begin = static_cast<uint32_t>(lo);
  *end = static_cast<uint32_t>(hi);
}

Status Resampler::Prepare(const ResampleGeometry& g, const OutputSpec& spec, void* out) {
  spec_ = spec;
  out_ = static_cast<uint8_t*>(out);
  src_width_ = g.src_width;
  rows_in_ = 0;
  next_out_ = 0;
  const uint32_t ow = spec.width, oh = spec.height;
  const AxisFilter hf(g.box_left, g.box_width, g.src_width, ow, spec.interpolation);
  const AxisFilter vf(g.box_top, g.box_height, g.src_rows, oh, spec.interpolation);

  // Window lengths first: they size everything else.
  int64_t lo, hi;
  double c;
  h_taps_ = 1;
  for (uint32_t x = 0; x < ow; ++x) {
    hf.Window(x, &lo, &hi, &c);
    h_taps_ = std::max<uint32_t>(h_taps_, static_cast<uint32_t>(std::max<int64_t>(hi - lo, 1)));
  }
  v_taps_ = 1;
  rows_needed_ = 0;
  for (uint32_t y = 0; y < oh; ++y) {
    vf.Window(y, &lo, &hi, &c);
    v_taps_ = std::max<uint32_t>(v_taps_, static_cast<uint32_t>(std::max<int64_t>(hi - lo, 1)));
    rows_needed_ = std::max<uint32_t>(rows_needed_, static_cast<uint32_t>(hi));
  }
  // A row shorter than a window is padded with zero pixels (zero weights).
  const uint32_t padded = std::max(g.src_width, h_taps_);
  // Pillow 13 runs the vertical pass first when the height shrinks by more
  // than twice as many pixels as the width (its Resample.c); before 13 it
  // always ran the horizontal pass first. The order changes the rounding
  // between the passes, so follow it.
  const double dh = g.box_height - oh, dw = g.box_width - ow;
  vertical_first_ = dh > 0 && dh > 2 * dw;

  // Horizontal windows, all h_taps_ long: a shorter one is moved left where
  // it would run past the row, its extra weights zero. First their extent.
  h_begin_ = padded;
  uint32_t h_last = 0;
  for (uint32_t x = 0; x < ow; ++x) {
    hf.Window(x, &lo, &hi, &c);
    const uint32_t start = static_cast<uint32_t>(std::min<int64_t>(lo, padded - h_taps_));
    h_begin_ = std::min(h_begin_, start);
    h_last = std::max(h_last, start + h_taps_);
  }
  const uint32_t row_len = h_last - h_begin_;  // pixels a window reads, padding included
  h_end_ = std::min(h_last, g.src_width);      // pixels converted from each source row
  const uint32_t conv = h_end_ > h_begin_ ? h_end_ - h_begin_ : 0;
  ring_row_ = vertical_first_ ? conv : ow;
  // Horizontal first, source rows are resized two at a time (PushRow):
  // the ring holds one more row, so that the second of a pair never
  // overwrites a row an output still waiting for the first one reads; and
  // the row buffer holds both.
  ring_rows_ = v_taps_ + (vertical_first_ ? 0 : 1);
  const size_t row_bufs = vertical_first_ ? 1 : 2;
  row_len_ = row_len;
  pending_ = false;

  const size_t need = NeedBytes(s_->h_start, ow) + NeedBytes(s_->h_weights, size_t{ow} * h_taps_) +
                      NeedBytes(s_->v_first, oh) + NeedBytes(s_->v_count, oh) +
                      NeedBytes(s_->v_weights, size_t{oh} * v_taps_) + NeedBytes(s_->taps, h_taps_) +
                      NeedBytes(s_->row, row_bufs * row_len) +
                      NeedBytes(s_->ring, size_t{ring_rows_} * ring_row_) + NeedBytes(s_->acc, ow);
  if (need > s_->max_bytes) {
    return Status::InvalidArgument("resizing " + std::to_string(g.src_width) + "x" + std::to_string(g.src_rows) +
                                   " pixels to " + std::to_string(ow) + "x" + std::to_string(oh) + " needs " +
                                   std::to_string(need) + " bytes of scratch, more than its cap of " +
                                   std::to_string(s_->max_bytes));
  }
  try {
    s_->h_start.resize(ow);
    s_->h_weights.resize(size_t{ow} * h_taps_);
    s_->v_first.resize(oh);
    s_->v_count.resize(oh);
    s_->v_weights.resize(size_t{oh} * v_taps_);
    s_->taps.resize(h_taps_);
    s_->row.resize(row_bufs * row_len);
    s_->ring.resize(size_t{ring_rows_} * ring_row_);
    s_->acc.resize(ow);
  } catch (const std::bad_alloc&) {
    s_->Release();
    return Status::IOError("out of memory for " + std::to_string(need) + " bytes of image scratch", ENOMEM);
  }

  // Each weight repeated in four lanes: one multiply a tap for R, G and B.
  for (uint32_t x = 0; x < ow; ++x) {
    hf.Window(x, &lo, &hi, &c);
    const uint32_t start = static_cast<uint32_t>(std::min<int64_t>(lo, padded - h_taps_));
    s_->h_start[x] = start - h_begin_;
    std::fill(s_->taps.begin(), s_->taps.end(), 0.0f);
    hf.Weights(x, &s_->taps[lo - start]);
    for (uint32_t j = 0; j < h_taps_; ++j) s_->h_weights[size_t{x} * h_taps_ + j] = Splat(s_->taps[j]);
  }
  // Pixels past the source row stay zero.
  std::fill(s_->row.begin(), s_->row.end(), Float4{0, 0, 0, 0});

  std::fill(s_->v_weights.begin(), s_->v_weights.end(), 0.0f);
  for (uint32_t y = 0; y < oh; ++y) {
    vf.Window(y, &lo, &hi, &c);
    s_->v_first[y] = static_cast<uint32_t>(lo);
    s_->v_count[y] = static_cast<uint32_t>(hi - lo);
    vf.Weights(y, &s_->v_weights[size_t{y} * v_taps_]);
  }

  // (v / 255 - mean) / std as one multiply and add: within 2 ulp of
  // to_tensor then normalize.
  scale_ = Float4{0, 0, 0, 0};
  offset_ = Float4{0, 0, 0, 0};
  for (int ch = 0; ch < 3; ++ch) {
    scale_[ch] = static_cast<float>(1.0 / (255.0 * double(spec.std[ch])));
    offset_[ch] = static_cast<float>(-double(spec.mean[ch]) / double(spec.std[ch]));
  }
  return Status::OK();
}

void Resampler::ConvertRow(const uint8_t* p, SourcePixels format, Float4* dst) noexcept {
  const uint32_t n = h_end_ > h_begin_ ? h_end_ - h_begin_ : 0;
  switch (format) {
    case SourcePixels::kRgbx:
#if defined(__x86_64__)
      if (UseAvx2ResampleLoops()) {
        BytesToFloatsAvx2(p + size_t{h_begin_} * 4, n, dst);
        break;
      }
#endif
      BytesToFloats(p + size_t{h_begin_} * 4, n, dst);
      break;
    case SourcePixels::kRgb: {
      // Spread to 4 bytes a pixel a block at a time (a 4-byte copy from
      // each pixel; the last one's 3 bytes alone, not to read past the
      // row; the fourth byte, unused, is the next pixel's red), then
      // converted as RGBX: resize of PIL-decoded photos 0.40 -> 0.31 ms.
      const uint8_t* src = p + size_t{h_begin_} * 3;
      constexpr uint32_t kBlock = 64;
      uint8_t rgbx[kBlock * 4] = {};
      for (uint32_t x = 0; x < n; x += kBlock) {
        const uint32_t m = std::min(kBlock, n - x);
        const uint32_t whole = x + m < n ? m : m - 1;
        for (uint32_t i = 0; i < whole; ++i) std::memcpy(rgbx + i * 4, src + size_t{x + i} * 3, 4);
        if (whole < m) std::memcpy(rgbx + whole * 4, src + size_t{x + whole} * 3, 3);
        BytesToFloats(rgbx, m, dst + x);
      }
      break;
    }
    case SourcePixels::kGray: {  // already luma: every lane the level
      const uint8_t* src = p + h_begin_;
      for (uint32_t x = 0; x < n; ++x) {
        const float l = float(src[x]);
        dst[x] = Float4{l, l, l, 0.0f};
      }
      return;
    }
    case SourcePixels::kCmykInverted: {
      // Pillow: unpack "CMYK;I" (each byte inverted), then cmyk2rgb:
      // out = nk - nk * c / 255 (its MULDIV255 rounding) with nk = 255 - k,
      // which on the bytes libjpeg gives is k - k * (255 - c) / 255.
      const uint8_t* src = p + size_t{h_begin_} * 4;
      for (uint32_t x = 0; x < n; ++x) {
        const uint8_t* q = src + size_t{x} * 4;
        const int k = q[3];
        float rgb[3];
        for (int ch = 0; ch < 3; ++ch) {
          const int t = (255 - q[ch]) * k + 128;
          rgb[ch] = float(k - (((t >> 8) + t) >> 8));
        }
        dst[x] = Float4{rgb[0], rgb[1], rgb[2], 0.0f};
      }
      break;
    }
  }
  if (spec_.grayscale) {
    // PIL's L24 in integers (each level is exact in a float), in every lane:
    // the passes then resize one channel three times over.
    for (uint32_t x = 0; x < n; ++x) {
      const Float4 v = dst[x];
      const int l = (static_cast<int>(v[0]) * 19595 + static_cast<int>(v[1]) * 38470 +
                     static_cast<int>(v[2]) * 7471 + 0x8000) >> 16;
      dst[x] = Float4{float(l), float(l), float(l), 0.0f};
    }
  }
}

void Resampler::HorizontalRow(const Float4* row, Float4* dst) noexcept {
  const uint32_t ow = spec_.width;
  const uint32_t* start = s_->h_start.data();
  const Float4* w = s_->h_weights.data();
#if defined(__x86_64__)
  if (UseAvx2ResampleLoops() && h_taps_ > 1) {
    HorizontalPassAvx2(row, start, w, ow, h_taps_, dst);
    return;
  }
#endif
  switch (h_taps_) {
    case 1: HorizontalPass<1>(row, start, w, ow, h_taps_, dst); break;
    case 2: HorizontalPass<2>(row, start, w, ow, h_taps_, dst); break;
    case 3: HorizontalPass<3>(row, start, w, ow, h_taps_, dst); break;
    case 4: HorizontalPass<4>(row, start, w, ow, h_taps_, dst); break;
    case 5: HorizontalPass<5>(row, start, w, ow, h_taps_, dst); break;
    case 6: HorizontalPass<6>(row, start, w, ow, h_taps_, dst); break;
    case 7: HorizontalPass<7>(row, start, w, ow, h_taps_, dst); break;
    case 8: HorizontalPass<8>(row, start, w, ow, h_taps_, dst); break;
    default: HorizontalPass<0>(row, start, w, ow, h_taps_, dst); break;
  }
}

void Resampler::HorizontalRows(const Float4* a, const Float4* b, Float4* dst_a, Float4* dst_b) noexcept {
#if defined(__x86_64__)
  if (UseAvx2ResampleLoops() && h_taps_ > 1) {
    HorizontalPairAvx2(a, b, s_->h_start.data(), s_->h_weights.data(), spec_.width, h_taps_, dst_a, dst_b);
    return;
  }
#endif
  HorizontalRow(a, dst_a);
  HorizontalRow(b, dst_b);
}

void Resampler::VerticalRow(uint32_t y, Float4* dst) noexcept {
  const uint32_t n = ring_row_;
  const uint32_t first = s_->v_first[y];
  const uint32_t count = s_->v_count[y];
  const float* w = s_->v_weights.data() + size_t{y} * v_taps_;
  const Float4* ring = s_->ring.data();
#if defined(__x86_64__)
  if (UseAvx2ResampleLoops()) {
    VerticalSumAvx2(ring, ring_rows_, n, first, count, w, dst);
    return;
  }
#endif
  {
    const Float4* r = ring + size_t{first % ring_rows_} * n;
    const float k = w[0];
    for (uint32_t x = 0; x < n; ++x) dst[x] = r[x] * k;
  }
  for (uint32_t j = 1; j < count; ++j) {
    const Float4* r = ring + size_t{(first + j) % ring_rows_} * n;
    const float k = w[j];
    for (uint32_t x = 0; x < n; ++x) dst[x] += r[x] * k;
  }
}

void Resampler::PushRow(const uint8_t* pixels, SourcePixels format) noexcept {
  const uint32_t arrived = rows_in_ + (pending_ ? 1 : 0);
  if (arrived >= rows_needed_) return;
  Float4* slot = s_->ring.data() + size_t{rows_in_ % ring_rows_} * ring_row_;
  if (vertical_first_) {
    ConvertRow(pixels, format, slot);
    ++rows_in_;
  } else if (!pending_ && arrived + 1 < rows_needed_) {
    // The first of a pair waits, converted, for the second: the pair's
    // horizontal pass reads each weight once for both.
    ConvertRow(pixels, format, s_->row.data());
    pending_ = true;
    return;
  } else if (pending_) {
    Float4* second = s_->row.data() + row_len_;
    ConvertRow(pixels, format, second);
    HorizontalRows(s_->row.data(), second, slot,
                   s_->ring.data() + size_t{(rows_in_ + 1) % ring_rows_} * ring_row_);
    pending_ = false;
    rows_in_ += 2;
  } else {  // the last row needed, alone
    ConvertRow(pixels, format, s_->row.data());
    HorizontalRow(s_->row.data(), slot);
    ++rows_in_;
  }
  // Every output row whose window ends here (windows only move down).
  while (next_out_ < spec_.height && s_->v_first[next_out_] + s_->v_count[next_out_] <= rows_in_) {
    const uint32_t y = next_out_++;
    if (vertical_first_) {
      Float4* row = s_->row.data();
      VerticalRow(y, row);
      for (uint32_t x = 0; x < ring_row_; ++x) row[x] = LevelFloat(row[x]);
      Float4* acc = s_->acc.data();
      HorizontalRow(row, acc);
      const float one = 1.0f;
      WriteRow(y, &acc, &one, 1);
    } else {
      // The vertical pass is summed as the row is written.
      const Float4* rows[kMaxFusedTaps];
      const uint32_t first = s_->v_first[y], count = s_->v_count[y];
      const float* w = s_->v_weights.data() + size_t{y} * v_taps_;
      if (count > kMaxFusedTaps) {
        VerticalRow(y, s_->acc.data());
        rows[0] = s_->acc.data();
        const float one = 1.0f;
        WriteRow(y, rows, &one, 1);
        continue;
      }
      for (uint32_t j = 0; j < count; ++j) rows[j] = s_->ring.data() + size_t{(first + j) % ring_rows_} * ring_row_;
      WriteRow(y, rows, w, count);
    }
  }
}

}  // namespace lmdbloader
