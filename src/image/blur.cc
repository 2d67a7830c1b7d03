#include "image/blur.h"

#include <algorithm>
#include <cmath>

#include "lmdbloader/image_decode.h"

namespace lmdbloader {

namespace {

// Index i of an axis of n, mirrored at the edges without repeating them
// (torch's reflect padding), again where it lands outside.
uint32_t Reflect(int64_t i, uint32_t n) {
  if (n == 1) return 0;
  const int64_t period = 2 * (int64_t{n} - 1);
  i %= period;
  if (i < 0) i += period;
  return static_cast<uint32_t>(i < n ? i : period - i);
}

// out[j] = sum over i of kernel[i] * in_i[j], i from 0 up, in float: each
// level's sum in the order a per-pixel loop would take it, whole rows at a
// time so the compiler vectorizes it. Taps go four at a time to keep the
// partial sums in registers; adding them one by one keeps the order.
void Accumulate(const float* kernel, uint32_t k, const float* const* in, size_t n, float* out) {
  for (size_t j = 0; j < n; ++j) out[j] = 0.0f;
  uint32_t i = 0;
  for (; i + 4 <= k; i += 4) {
    const float w0 = kernel[i], w1 = kernel[i + 1], w2 = kernel[i + 2], w3 = kernel[i + 3];
    const float *a = in[i], *b = in[i + 1], *c = in[i + 2], *d = in[i + 3];
    for (size_t j = 0; j < n; ++j) {
      float s = out[j];
      s += w0 * a[j];
      s += w1 * b[j];
      s += w2 * c[j];
      s += w3 * d[j];
      out[j] = s;
    }
  }
  for (; i < k; ++i) {
    const float w = kernel[i];
    const float* a = in[i];
    for (size_t j = 0; j < n; ++j) out[j] += w * a[j];
  }
}

// nearbyint (half to even, the default rounding) of 0 <= x < 2^22 without a
// libm call: adding 1.5 * 2^23 leaves no fraction bits, subtracting it back
// is exact. Then clamped to 0..255.
void Round(const float* in, size_t n, uint8_t* out) {
  constexpr float kMagic = 12582912.0f;
  for (size_t j = 0; j < n; ++j) {
    const float r = (in[j] + kMagic) - kMagic;
    out[j] = static_cast<uint8_t>(static_cast<int>(std::min(std::max(r, 0.0f), 255.0f)));
  }
}

}  // namespace

void BlurKernel(uint32_t k, float sigma, float* out) {
  const float half = static_cast<float>(k - 1) * 0.5f;
  float sum = 0.0f;
  for (uint32_t i = 0; i < k; ++i) {
    const float x = k == 1 ? 0.0f : -half + static_cast<float>(i) * (2.0f * half / static_cast<float>(k - 1));
    const float z = x / sigma;
    out[i] = std::exp(-0.5f * z * z);
    sum += out[i];
  }
  for (uint32_t i = 0; i < k; ++i) out[i] /= sum;
}

// The rows blurred along x (height rows), a padded source row, a row of
// column sums.
size_t BlurWorkFloats(uint32_t width, uint32_t height, uint32_t channels) {
  return (size_t{height} + 1) * width * channels + (size_t{width} + kMaxBlurKernel - 1) * channels;
}

void Blur(uint32_t k, float sigma, uint8_t* p, uint32_t width, uint32_t height, uint32_t channels,
          float* work) noexcept {
  const uint32_t r = k / 2;
  float kernel[kMaxBlurKernel];
  BlurKernel(k, sigma, kernel);
  const size_t row = size_t{width} * channels;
  float* rows = work;
  float* acc = work + size_t{height} * row;
  float* pad = acc + row;  // (width + 2r) pixels: the row mirrored r pixels out on each side
  const float* taps[kMaxBlurKernel];
  for (uint32_t i = 0; i < k; ++i) taps[i] = pad + size_t{i} * channels;
  for (uint32_t y = 0; y < height; ++y) {
    const uint8_t* in = p + y * row;
    for (uint32_t x = 0; x < r; ++x) {
      const uint8_t* left = in + size_t{Reflect(int64_t{x} - r, width)} * channels;
      const uint8_t* right = in + size_t{Reflect(int64_t{width} + x, width)} * channels;
      for (uint32_t c = 0; c < channels; ++c) {
        pad[size_t{x} * channels + c] = left[c];
        pad[(size_t{r} + width + x) * channels + c] = right[c];
      }
    }
    float* middle = pad + size_t{r} * channels;
    for (size_t j = 0; j < row; ++j) middle[j] = in[j];
    Accumulate(kernel, k, taps, row, rows + y * row);
  }
  for (uint32_t y = 0; y < height; ++y) {
    for (uint32_t i = 0; i < k; ++i) taps[i] = rows + size_t{Reflect(int64_t{y} + i - r, height)} * row;
    Accumulate(kernel, k, taps, row, acc);
    Round(acc, row, p + y * row);
  }
}

}  // namespace lmdbloader
