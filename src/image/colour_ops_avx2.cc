// ShiftHue (colour_ops.h) compiled for AVX2, eight pixels at a time; this
// file alone is built with -mavx2 and no contraction of multiply-adds.
// Every step is the portable loop's in the same type and order (float
// divisions and products, the hue's offset and the levels in double,
// truncations and Pillow's round half away from zero), computed for every
// branch and then chosen per pixel by masks: the same bytes for all 2^24
// colours (ColourOpsTest.HueAvx2IsThePortableLoop, and against Pillow in
// test_colour_ops.py). The scalar loop took 14 ns a pixel, mostly in
// mispredicted branches on the pixel's largest channel and hue sector.
#include <immintrin.h>

#include <cstring>

#include "image/colour_ops.h"

namespace lmdbloader {

namespace {

// Four doubles from the low or high half of eight floats.
inline __m256d Low(__m256 v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
inline __m256d High(__m256 v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }

// Eight floats from two halves of four doubles, each rounded to nearest
// (static_cast<float>).
inline __m256 Floats(__m256d lo, __m256d hi) {
  return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}

// Eight ints from two halves of four doubles, each truncated (static_cast<int>).
inline __m256i Truncated(__m256d lo, __m256d hi) {
  return _mm256_set_m128i(_mm256_cvttpd_epi32(hi), _mm256_cvttpd_epi32(lo));
}

// colour_ops.cc's RoundUp of four doubles >= 0: k = trunc(x), k + 1 where
// x - k >= 0.5; as doubles (small integers, exact).
inline __m256d RoundUp(__m256d x) {
  const __m256d k = _mm256_round_pd(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256d up = _mm256_cmp_pd(_mm256_sub_pd(x, k), _mm256_set1_pd(0.5), _CMP_GE_OQ);
  return _mm256_add_pd(k, _mm256_and_pd(up, _mm256_set1_pd(1.0)));
}

inline __m256i Select(__m256i mask, __m256i yes, __m256i no) { return _mm256_blendv_epi8(no, yes, mask); }
inline __m256 Select(__m256i mask, __m256 yes, __m256 no) {
  return _mm256_blendv_ps(no, yes, _mm256_castsi256_ps(mask));
}

}  // namespace

size_t ShiftHueAvx2(uint8_t* p, size_t pixels, int shift, const HsvTables& t) {
  // One channel of 8 RGB pixels (24 bytes: 16 + 8) to 8 bytes.
  const __m128i r_lo = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i r_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i g_lo = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i g_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i b_lo = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i b_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256d one = _mm256_set1_pd(1.0), six = _mm256_set1_pd(6.0), levels = _mm256_set1_pd(255.0);
  const __m256d two = _mm256_set1_pd(2.0), four = _mm256_set1_pd(4.0);
  const __m256i top = _mm256_set1_epi32(255), zero = _mm256_setzero_si256();
  const __m256i turn = _mm256_set1_epi32(shift);
  // Within each 128-bit lane, r0-3 g0-3 b0-3 (then b0-3 again) to r g b a pixel.
  const __m256i interleave = _mm256_setr_epi8(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -1, -1, -1, -1,
                                              0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -1, -1, -1, -1);
  size_t i = 0;
  for (; i + 8 <= pixels; i += 8) {
    uint8_t* q = p + i * 3;
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 16));
    const __m256i r = _mm256_cvtepu8_epi32(_mm_or_si128(_mm_shuffle_epi8(lo, r_lo), _mm_shuffle_epi8(hi, r_hi)));
    const __m256i g = _mm256_cvtepu8_epi32(_mm_or_si128(_mm_shuffle_epi8(lo, g_lo), _mm_shuffle_epi8(hi, g_hi)));
    const __m256i b = _mm256_cvtepu8_epi32(_mm_or_si128(_mm_shuffle_epi8(lo, b_lo), _mm_shuffle_epi8(hi, b_hi)));

    // rgb2hsv. Gray pixels (max == min) divide by zero here; their lanes
    // are replaced by the pixel itself at the end, as the scalar code
    // returns early for them.
    const __m256i maxc = _mm256_max_epi32(r, _mm256_max_epi32(g, b));
    const __m256i minc = _mm256_min_epi32(r, _mm256_min_epi32(g, b));
    const __m256i gray = _mm256_cmpeq_epi32(maxc, minc);
    const __m256 range = _mm256_cvtepi32_ps(_mm256_sub_epi32(maxc, minc));
    const __m256 sat = _mm256_div_ps(range, _mm256_cvtepi32_ps(maxc));
    const __m256 rc = _mm256_div_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(maxc, r)), range);
    const __m256 gc = _mm256_div_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(maxc, g)), range);
    const __m256 bc = _mm256_div_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(maxc, b)), range);
    const __m256 hue_r = _mm256_sub_ps(bc, gc);
    const __m256 hue_g = Floats(_mm256_sub_pd(_mm256_add_pd(two, Low(rc)), Low(bc)),
                                _mm256_sub_pd(_mm256_add_pd(two, High(rc)), High(bc)));
    const __m256 hue_b = Floats(_mm256_sub_pd(_mm256_add_pd(four, Low(gc)), Low(rc)),
                                _mm256_sub_pd(_mm256_add_pd(four, High(gc)), High(rc)));
    const __m256 hue6 = Select(_mm256_cmpeq_epi32(r, maxc), hue_r, Select(_mm256_cmpeq_epi32(g, maxc), hue_g, hue_b));
    // hue / 6 + 1, less 1 where that is >= 1, as a float; then * 255 truncated.
    __m256d turn_lo = _mm256_add_pd(_mm256_div_pd(Low(hue6), six), one);
    __m256d turn_hi = _mm256_add_pd(_mm256_div_pd(High(hue6), six), one);
    turn_lo = _mm256_blendv_pd(turn_lo, _mm256_sub_pd(turn_lo, one), _mm256_cmp_pd(turn_lo, one, _CMP_GE_OQ));
    turn_hi = _mm256_blendv_pd(turn_hi, _mm256_sub_pd(turn_hi, one), _mm256_cmp_pd(turn_hi, one, _CMP_GE_OQ));
    const __m256 hue = Floats(turn_lo, turn_hi);
    const __m256i h = _mm256_min_epi32(
        Truncated(_mm256_mul_pd(Low(hue), levels), _mm256_mul_pd(High(hue), levels)), top);
    // Clamped below too: only a gray lane (NaN, truncated to INT_MIN) is
    // below 0, and it must not index the tables.
    const __m256i s = _mm256_max_epi32(
        _mm256_min_epi32(Truncated(_mm256_mul_pd(Low(sat), levels), _mm256_mul_pd(High(sat), levels)), top), zero);

    // hsv2rgb of the turned hue.
    const __m256i h2 = _mm256_and_si256(_mm256_add_epi32(h, turn), top);
    const __m256 f = _mm256_i32gather_ps(t.remainder, h2, 4);
    const __m256 fs = _mm256_i32gather_ps(t.saturation, s, 4);
    const __m256i sector = _mm256_i32gather_epi32(t.sector, h2, 4);
    const __m256 fv = _mm256_cvtepi32_ps(maxc);
    const __m256 fsf = _mm256_mul_ps(fs, f);
    __m256d part[3][2];  // lo, down, up; low and high halves
    for (int half = 0; half < 2; ++half) {
      const __m256d v = half ? High(fv) : Low(fv), sd = half ? High(fs) : Low(fs);
      const __m256d fd = half ? High(f) : Low(f), sfd = half ? High(fsf) : Low(fsf);
      part[0][half] = RoundUp(_mm256_mul_pd(v, _mm256_sub_pd(one, sd)));
      part[1][half] = RoundUp(_mm256_mul_pd(v, _mm256_sub_pd(one, sfd)));
      part[2][half] = RoundUp(_mm256_mul_pd(v, _mm256_sub_pd(one, _mm256_mul_pd(sd, _mm256_sub_pd(one, fd)))));
    }
    const __m256i low = Truncated(part[0][0], part[0][1]);
    const __m256i down = Truncated(part[1][0], part[1][1]);
    const __m256i up = Truncated(part[2][0], part[2][1]);
    __m256i in[6];
    for (int k = 0; k < 6; ++k) in[k] = _mm256_cmpeq_epi32(sector, _mm256_set1_epi32(k));
    // Sectors 0-5: (v, up, lo) (down, v, lo) (lo, v, up) (lo, down, v) (up, lo, v) (v, lo, down).
    __m256i nr = Select(_mm256_or_si256(in[0], in[5]), maxc, low);
    nr = Select(in[1], down, Select(in[4], up, nr));
    __m256i ng = Select(in[0], up, Select(_mm256_or_si256(in[1], in[2]), maxc, low));
    ng = Select(in[3], down, ng);
    __m256i nb = Select(_mm256_or_si256(in[0], in[1]), low, down);
    nb = Select(in[2], up, Select(_mm256_or_si256(in[3], in[4]), maxc, nb));
    // Gray, or a saturation that truncates to 0: the value in every channel.
    const __m256i flat = _mm256_or_si256(gray, _mm256_cmpeq_epi32(s, zero));
    nr = Select(flat, maxc, nr);
    ng = Select(flat, maxc, ng);
    nb = Select(flat, maxc, nb);

    // Back to 24 bytes: levels packed to bytes, each 128-bit lane's four
    // pixels interleaved, stored low lane (16 bytes, the last 4 rewritten
    // next) then high lane (12 bytes), all inside this block's 24.
    const __m256i rg = _mm256_packus_epi32(nr, ng);  // r0-3 g0-3 | r4-7 g4-7, 16-bit
    const __m256i bb = _mm256_packus_epi32(nb, nb);  // b0-3 b0-3 | b4-7 b4-7
    const __m256i rgbb = _mm256_shuffle_epi8(_mm256_packus_epi16(rg, bb), interleave);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm256_castsi256_si128(rgbb));
    const __m128i high = _mm256_extracti128_si256(rgbb, 1);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + 12), high);
    const int last = _mm_extract_epi32(high, 2);
    std::memcpy(q + 20, &last, 4);
  }
  return i;
}

}  // namespace lmdbloader
