// The resize's rounding of a pass's sums to levels, shared by its loops
// (resample.cc, resample_write.cc), and which build of them runs.
#ifndef LMDBLOADER_SRC_IMAGE_RESAMPLE_LEVELS_H_
#define LMDBLOADER_SRC_IMAGE_RESAMPLE_LEVELS_H_

#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include "image/resample.h"

namespace lmdbloader {

typedef int32_t Int4 __attribute__((vector_size(16)));

inline Float4 Splat(float v) { return Float4{v, v, v, v}; }

// PIL's clip8 of a pass's sum: round half up, clamp to 0..255. The
// bicubic filter's negative lobes can take a sum below zero, which
// truncation alone would round toward zero from -1.5 on: clamp both ends
// first.
inline Int4 Level(Float4 v) {
#if defined(__SSE2__)
  return reinterpret_cast<Int4>(_mm_cvttps_epi32(_mm_max_ps(_mm_min_ps(v + 0.5f, Splat(255.5f)), Splat(0.0f))));
#else
  const Float4 top = Splat(255.5f), zero = Splat(0.0f);
  v += 0.5f;
  v = v < top ? v : top;
  return __builtin_convertvector(v > zero ? v : zero, Int4);
#endif
}

inline Float4 LevelFloat(Float4 v) { return __builtin_convertvector(Level(v), Float4); }

// The AVX2 loops: where the CPU has them and no test asked for the
// portable ones (UseResampleLoops).
bool UseAvx2ResampleLoops();

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IMAGE_RESAMPLE_LEVELS_H_
