// AxisFilter: one axis of PIL's antialiased resize (libImaging/Resample.c,
// precompute_coeffs and normalize_coeffs_8bpc): for each output pixel, the
// window of source pixels it reads and their weights, for the bilinear
// (triangle, support 1) and bicubic (Keys, a = -0.5, support 2) filters,
// both widened by the factor the axis shrinks by. resample.h says how the
// passes use them.
#ifndef LMDBLOADER_SRC_IMAGE_RESAMPLE_FILTER_H_
#define LMDBLOADER_SRC_IMAGE_RESAMPLE_FILTER_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "lmdbloader/image_decode.h"

namespace lmdbloader {

constexpr int kWeightBits = 22;  // PIL's PRECISION_BITS for 8-bit images
constexpr double kWeightOne = double(1 << kWeightBits);

// One axis of the resize: output i's window of source pixels and weights.
class AxisFilter {
 public:
  // The box [b0, b0 + length) over pixels [0, n), resized to `out` with
  // `filter`.
  AxisFilter(double b0, double length, uint32_t n, uint32_t out, Interpolation filter) : n_(n), filter_(filter) {
    // Relative to a whole-pixel origin so a whole-pixel box computes exactly
    // as PIL does on its crop (where the box starts at 0).
    origin_ = std::floor(b0);
    frac_ = b0 - origin_;
    scale_ = length / out;
    const double filterscale = std::max(scale_, 1.0);
    // PIL's supports: the triangle's is 1, the cubic's 2.
    support_ = (filter == Interpolation::kBicubic ? 2.0 : 1.0) * filterscale;
    inv_ = 1.0 / filterscale;
  }

  // Output i's window [*lo, *hi), clipped to [0, n), and its center.
  void Window(uint32_t i, int64_t* lo, int64_t* hi, double* center) const {
    const double c = frac_ + (i + 0.5) * scale_;
    const int64_t o = static_cast<int64_t>(origin_);
    *lo = std::max<int64_t>(static_cast<int64_t>(std::floor(c - support_ + 0.5)) + o, 0);
    *hi = std::min<int64_t>(static_cast<int64_t>(std::floor(c + support_ + 0.5)) + o, n_);
    *center = c;
  }

  // The filter's value at pixel x for a window centered at `center`.
  double Weight(int64_t x, double center) const {
    double a = (static_cast<double>(x - static_cast<int64_t>(origin_)) - center + 0.5) * inv_;
    if (a < 0) a = -a;
    if (filter_ == Interpolation::kBilinear) return a < 1.0 ? 1.0 - a : 0.0;
    // Keys' cubic convolution with a = -0.5, as PIL's bicubic_filter.
    constexpr double k = -0.5;
    if (a < 1.0) return ((k + 2.0) * a - (k + 3.0)) * a * a + 1.0;
    if (a < 2.0) return (((a - 5.0) * a + 8.0) * a - 4.0) * k;
    return 0.0;
  }

  // Output i's weights for pixels [lo, hi), PIL's fixed point as floats,
  // into w[0 .. hi - lo).
  void Weights(uint32_t i, float* w) const {
    int64_t lo, hi;
    double center;
    Window(i, &lo, &hi, &center);
    double sum = 0;
    for (int64_t x = lo; x < hi; ++x) sum += Weight(x, center);
    for (int64_t x = lo; x < hi; ++x) {
      double k = Weight(x, center);
      if (sum != 0.0) k /= sum;
      // PIL's normalize_coeffs_8bpc rounds half away from zero.
      const int32_t q = static_cast<int32_t>(k < 0 ? -0.5 + k * kWeightOne : 0.5 + k * kWeightOne);
      w[x - lo] = static_cast<float>(q) * float(1.0 / kWeightOne);
    }
  }

 private:
  int64_t n_;
  Interpolation filter_;
  double origin_, frac_, scale_, support_, inv_;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IMAGE_RESAMPLE_FILTER_H_
