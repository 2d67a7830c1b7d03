// The Gaussian blur of the colour ops (ColourOpKind::kBlur): torchvision's
// GaussianBlur on a PIL image (a k x k kernel, the outer product of two
// float32 axis kernels, reflect padding), made separable on 8-bit levels.
#ifndef LMDBLOADER_SRC_IMAGE_BLUR_H_
#define LMDBLOADER_SRC_IMAGE_BLUR_H_

#include <cstddef>
#include <cstdint>

namespace lmdbloader {

// torchvision's kernel of one axis as torch makes it in float32:
// linspace(-(k - 1) / 2, (k - 1) / 2, k), exp(-x^2 / (2 sigma^2)), over its
// sum. k odd, 1 to kMaxBlurKernel; out holds k floats.
void BlurKernel(uint32_t k, float sigma, float* out);

// Floats of work a blur of a width x height image of `channels` needs
// (any kernel up to kMaxBlurKernel).
size_t BlurWorkFloats(uint32_t width, uint32_t height, uint32_t channels);

// Blurs `height` rows of `width` pixels of `channels` interleaved levels in
// place: rows into `work` as floats, then columns back, each level rounded
// half to even and clamped to 0..255. The same sum as torch's k x k kernel
// but for float rounding, which can move a level that lands on .5 by one.
// `work`: BlurWorkFloats floats. No allocation (FinishColour cannot fail).
void Blur(uint32_t k, float sigma, uint8_t* p, uint32_t width, uint32_t height, uint32_t channels,
          float* work) noexcept;

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IMAGE_BLUR_H_
