// The resize's hottest loops compiled for AVX2 and FMA (this file alone is
// built with -mavx2 -mfma); resample.cc calls them only when the CPU has
// both. A pixel is a Float4 (R, G, B, unused), so one 256-bit register
// holds two neighbouring pixels, or one pixel times two neighbouring taps:
// half the instructions of the SSE2 loops, and a fused multiply-add a tap
// (the loops are bound by their loads and floating-point ports). The sums
// are the same products, unrounded before the addition and added in
// another order: closer to PIL's exact integer sums, and a level can
// differ from the SSE2 loops' only where a sum lies within a float's
// rounding of a half.
#include <immintrin.h>

#include "image/resample.h"

namespace lmdbloader {

namespace {

// PIL's clip8 (resample.cc's Level, as floats).
inline __m128 LevelFloat(__m128 v) {
  v = _mm_max_ps(_mm_min_ps(_mm_add_ps(v, _mm_set1_ps(0.5f)), _mm_set1_ps(255.5f)), _mm_setzero_ps());
  return _mm_cvtepi32_ps(_mm_cvttps_epi32(v));
}

template <uint32_t kTaps>
void Horizontal(const Float4* row, const uint32_t* start, const Float4* weights, uint32_t out_w, uint32_t taps,
                Float4* dst) {
  const uint32_t t = kTaps ? kTaps : taps;
  for (uint32_t x = 0; x < out_w; ++x) {
    const float* s = reinterpret_cast<const float*>(row + start[x]);
    const float* w = reinterpret_cast<const float*>(weights + size_t{x} * t);
    // Taps 2k and 2k + 1 side by side: the pixels they weigh are
    // neighbours in the row, and so are their weights.
    __m256 a = _mm256_setzero_ps();
    uint32_t j = 0;
    for (; j + 2 <= t; j += 2) a = _mm256_fmadd_ps(_mm256_loadu_ps(s + 4 * j), _mm256_loadu_ps(w + 4 * j), a);
    __m128 sum = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    if (j < t) sum = _mm_add_ps(sum, _mm_mul_ps(_mm_loadu_ps(s + 4 * j), _mm_loadu_ps(w + 4 * j)));
    _mm_storeu_ps(reinterpret_cast<float*>(dst + x), LevelFloat(sum));
  }
}

inline __m256 LevelFloat(__m256 v) {
  v = _mm256_max_ps(_mm256_min_ps(_mm256_add_ps(v, _mm256_set1_ps(0.5f)), _mm256_set1_ps(255.5f)),
                    _mm256_setzero_ps());
  return _mm256_cvtepi32_ps(_mm256_cvttps_epi32(v));
}

// Horizontal for two rows: each weight loaded once for both (the loop is
// bound by its loads: a tap pair is one load of pixels and one of weights).
template <uint32_t kTaps>
void HorizontalPair(const Float4* row_a, const Float4* row_b, const uint32_t* start, const Float4* weights,
                    uint32_t out_w, uint32_t taps, Float4* dst_a, Float4* dst_b) {
  const uint32_t t = kTaps ? kTaps : taps;
  for (uint32_t x = 0; x < out_w; ++x) {
    const float* sa = reinterpret_cast<const float*>(row_a + start[x]);
    const float* sb = reinterpret_cast<const float*>(row_b + start[x]);
    const float* w = reinterpret_cast<const float*>(weights + size_t{x} * t);
    __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    uint32_t j = 0;
    for (; j + 2 <= t; j += 2) {
      const __m256 k = _mm256_loadu_ps(w + 4 * j);
      a = _mm256_fmadd_ps(_mm256_loadu_ps(sa + 4 * j), k, a);
      b = _mm256_fmadd_ps(_mm256_loadu_ps(sb + 4 * j), k, b);
    }
    __m128 suma = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 sumb = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
    if (j < t) {
      const __m128 k = _mm_loadu_ps(w + 4 * j);
      suma = _mm_add_ps(suma, _mm_mul_ps(_mm_loadu_ps(sa + 4 * j), k));
      sumb = _mm_add_ps(sumb, _mm_mul_ps(_mm_loadu_ps(sb + 4 * j), k));
    }
    _mm_storeu_ps(reinterpret_cast<float*>(dst_a + x), LevelFloat(suma));
    _mm_storeu_ps(reinterpret_cast<float*>(dst_b + x), LevelFloat(sumb));
  }
}

template <uint32_t K>
struct Taps {
  static constexpr uint32_t value = K;
};

// f(Taps<K>()) with K = taps for windows of 2 to 12 taps (a loop unrolled
// for its length), K = 0 (any length) for the others.
template <typename F>
void ForTaps(uint32_t taps, F f) {
  switch (taps) {
    case 2: return f(Taps<2>());
    case 3: return f(Taps<3>());
    case 4: return f(Taps<4>());
    case 5: return f(Taps<5>());
    case 6: return f(Taps<6>());
    case 7: return f(Taps<7>());
    case 8: return f(Taps<8>());
    case 9: return f(Taps<9>());
    case 10: return f(Taps<10>());
    case 11: return f(Taps<11>());
    case 12: return f(Taps<12>());
    default: return f(Taps<0>());
  }
}

}  // namespace

void SumRowsAvx2(const Float4* const* rows, const float* w, uint32_t count, uint32_t n, Float4* dst) {
  float* d = reinterpret_cast<float*>(dst);
  uint32_t x = 0;
  // Four pixels at a time, the rows added in order.
  for (; x + 4 <= n; x += 4) {
    const float* r = reinterpret_cast<const float*>(rows[0] + x);
    __m256 k = _mm256_set1_ps(w[0]);
    __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(r), k), a1 = _mm256_mul_ps(_mm256_loadu_ps(r + 8), k);
    for (uint32_t j = 1; j < count; ++j) {
      r = reinterpret_cast<const float*>(rows[j] + x);
      k = _mm256_set1_ps(w[j]);
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r), k, a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 8), k, a1);
    }
    _mm256_storeu_ps(d + size_t{x} * 4, LevelFloat(a0));
    _mm256_storeu_ps(d + size_t{x} * 4 + 8, LevelFloat(a1));
  }
  for (; x < n; ++x) {
    __m128 a = _mm_mul_ps(_mm_loadu_ps(reinterpret_cast<const float*>(rows[0] + x)), _mm_set1_ps(w[0]));
    for (uint32_t j = 1; j < count; ++j) {
      a = _mm_add_ps(a, _mm_mul_ps(_mm_loadu_ps(reinterpret_cast<const float*>(rows[j] + x)), _mm_set1_ps(w[j])));
    }
    _mm_storeu_ps(d + size_t{x} * 4, LevelFloat(a));
  }
}

void VerticalSumAvx2(const Float4* ring, uint32_t ring_rows, uint32_t n, uint32_t first, uint32_t count,
                     const float* w, Float4* dst) {
  // Row by row into dst (a row of a few KB stays in the L1 cache); two
  // pixels a register, then the odd one.
  float* d = reinterpret_cast<float*>(dst);
  const size_t floats = size_t{n} * 4, pairs = floats & ~size_t{7};
  for (uint32_t j = 0; j < count; ++j) {
    const float* r = reinterpret_cast<const float*>(ring + size_t{(first + j) % ring_rows} * n);
    const __m256 k = _mm256_set1_ps(w[j]);
    if (j == 0) {
      for (size_t i = 0; i < pairs; i += 8) _mm256_storeu_ps(d + i, _mm256_mul_ps(_mm256_loadu_ps(r + i), k));
      if (pairs < floats) _mm_storeu_ps(d + pairs, _mm_mul_ps(_mm_loadu_ps(r + pairs), _mm256_castps256_ps128(k)));
      continue;
    }
    for (size_t i = 0; i < pairs; i += 8) {
      _mm256_storeu_ps(d + i, _mm256_fmadd_ps(_mm256_loadu_ps(r + i), k, _mm256_loadu_ps(d + i)));
    }
    if (pairs < floats) {
      _mm_storeu_ps(d + pairs, _mm_fmadd_ps(_mm_loadu_ps(r + pairs), _mm256_castps256_ps128(k), _mm_loadu_ps(d + pairs)));
    }
  }
}

uint32_t SumRowsToPlanesAvx2(const Float4* const* rows, const float* w, uint32_t count, uint32_t n,
                             const float* scale, const float* offset, bool flip, float* out, size_t plane) {
  // After the in-lane transpose below, a channel's lanes hold pixels
  // 0 2 4 6 | 1 3 5 7 of the block: these put them in order, or mirrored.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i mirrored = _mm256_setr_epi32(7, 3, 6, 2, 5, 1, 4, 0);
  const __m256i pick = flip ? mirrored : order;
  const __m256 sr = _mm256_set1_ps(scale[0]), sg = _mm256_set1_ps(scale[1]), sb = _mm256_set1_ps(scale[2]);
  const __m256 orr = _mm256_set1_ps(offset[0]), og = _mm256_set1_ps(offset[1]), ob = _mm256_set1_ps(offset[2]);
  uint32_t x = 0;
  for (; x + 8 <= n; x += 8) {
    const float* r = reinterpret_cast<const float*>(rows[0] + x);
    __m256 k = _mm256_set1_ps(w[0]);
    __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(r), k), a1 = _mm256_mul_ps(_mm256_loadu_ps(r + 8), k);
    __m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(r + 16), k), a3 = _mm256_mul_ps(_mm256_loadu_ps(r + 24), k);
    for (uint32_t j = 1; j < count; ++j) {
      r = reinterpret_cast<const float*>(rows[j] + x);
      k = _mm256_set1_ps(w[j]);
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r), k, a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 8), k, a1);
      a2 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 16), k, a2);
      a3 = _mm256_fmadd_ps(_mm256_loadu_ps(r + 24), k, a3);
    }
    a0 = LevelFloat(a0);
    a1 = LevelFloat(a1);
    a2 = LevelFloat(a2);
    a3 = LevelFloat(a3);
    // [R0 G0 B0 X0 | R1 G1 B1 X1] ... to [R0 R2 R4 R6 | R1 R3 R5 R7] a channel.
    const __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1);
    const __m256 t2 = _mm256_unpacklo_ps(a2, a3), t3 = _mm256_unpackhi_ps(a2, a3);
    __m256 red = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 green = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 blue = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    // Normalized as a multiply, then an add (the SSE2 writer's roundings).
    red = _mm256_add_ps(_mm256_mul_ps(_mm256_permutevar8x32_ps(red, pick), sr), orr);
    green = _mm256_add_ps(_mm256_mul_ps(_mm256_permutevar8x32_ps(green, pick), sg), og);
    blue = _mm256_add_ps(_mm256_mul_ps(_mm256_permutevar8x32_ps(blue, pick), sb), ob);
    float* d = out + (flip ? n - 8 - x : x);
    _mm256_storeu_ps(d, red);
    _mm256_storeu_ps(d + plane, green);
    _mm256_storeu_ps(d + 2 * plane, blue);
  }
  return x;
}

void HorizontalPassAvx2(const Float4* row, const uint32_t* start, const Float4* weights, uint32_t out_w,
                        uint32_t taps, Float4* dst) {
  ForTaps(taps, [&](auto k) { Horizontal<decltype(k)::value>(row, start, weights, out_w, taps, dst); });
}

void HorizontalPairAvx2(const Float4* a, const Float4* b, const uint32_t* start, const Float4* weights,
                        uint32_t out_w, uint32_t taps, Float4* dst_a, Float4* dst_b) {
  ForTaps(taps, [&](auto k) {
    HorizontalPair<decltype(k)::value>(a, b, start, weights, out_w, taps, dst_a, dst_b);
  });
}

void BytesToFloatsAvx2(const uint8_t* src, uint32_t n, Float4* dst) {
  uint32_t x = 0;
  float* d = reinterpret_cast<float*>(dst);
  for (; x + 4 <= n; x += 4) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + size_t{x} * 4));
    _mm256_storeu_ps(d + size_t{x} * 4, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)));
    _mm256_storeu_ps(d + size_t{x} * 4 + 8, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8))));
  }
  for (; x < n; ++x) {
    const __m128i b = _mm_cvtsi32_si128(static_cast<int>(uint32_t{src[x * 4]} | uint32_t{src[x * 4 + 1]} << 8 |
                                                         uint32_t{src[x * 4 + 2]} << 16 |
                                                         uint32_t{src[x * 4 + 3]} << 24));
    _mm_storeu_ps(d + size_t{x} * 4, _mm_cvtepi32_ps(_mm_cvtepu8_epi32(b)));
  }
}

}  // namespace lmdbloader
