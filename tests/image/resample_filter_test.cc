// One axis of PIL's resize: windows and weights for both filters, against
// what PIL's precompute_coeffs gives (the whole resize is compared with an
// integer oracle of PIL in resample_test.cc).
#include "image/resample_filter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace lmdbloader {
namespace {

struct Window {
  int64_t lo, hi;
  std::vector<float> w;
  double sum() const {
    double s = 0;
    for (float v : w) s += v;
    return s;
  }
};

Window At(const AxisFilter& f, uint32_t i) {
  Window out;
  double center;
  f.Window(i, &out.lo, &out.hi, &center);
  out.w.resize(static_cast<size_t>(out.hi - out.lo));
  f.Weights(i, out.w.data());
  return out;
}

TEST(ResampleFilterTest, AtItsOwnSizeEachFilterCopiesThePixel) {
  for (Interpolation filter : {Interpolation::kBilinear, Interpolation::kBicubic}) {
    const AxisFilter f(0, 10, 10, 10, filter);
    for (uint32_t i = 0; i < 10; ++i) {
      const Window w = At(f, i);
      for (int64_t x = w.lo; x < w.hi; ++x) EXPECT_EQ(w.w[x - w.lo], x == i ? 1.0f : 0.0f) << i << " " << x;
    }
  }
}

TEST(ResampleFilterTest, ShrinkingWidensTheWindowByTheFactorAndTheCubicTwiceAsMuch) {
  const AxisFilter bilinear(0, 300, 300, 100, Interpolation::kBilinear);
  const AxisFilter bicubic(0, 300, 300, 100, Interpolation::kBicubic);
  const Window a = At(bilinear, 50), b = At(bicubic, 50);
  EXPECT_EQ(a.hi - a.lo, 6);   // support 1 x 3, both sides
  EXPECT_EQ(b.hi - b.lo, 12);  // support 2 x 3
  for (const Window& w : {a, b}) EXPECT_NEAR(w.sum(), 1.0, 4.0 / kWeightOne);
}

// Enlarging 2x, output 2 of 10 pixels: PIL's center 1.25, window [0, 3),
// cubic values 0.2266, 0.8672, -0.0703 normalized to sum 1; the negative
// lobe is what bilinear never has.
TEST(ResampleFilterTest, TheCubicMatchesPilsCoefficientsAndGoesNegative) {
  const AxisFilter f(0, 5, 5, 10, Interpolation::kBicubic);
  const Window w = At(f, 2);
  ASSERT_EQ(w.lo, 0);
  ASSERT_EQ(w.hi, 3);
  const double k0 = 0.2265625, k1 = 0.8671875, k2 = -0.0703125;
  const double sum = k0 + k1 + k2;
  EXPECT_NEAR(w.w[0], k0 / sum, 1e-6);
  EXPECT_NEAR(w.w[1], k1 / sum, 1e-6);
  EXPECT_NEAR(w.w[2], k2 / sum, 1e-6);
  EXPECT_LT(w.w[2], 0.0f);
  const Window linear = At(AxisFilter(0, 5, 5, 10, Interpolation::kBilinear), 2);
  for (float v : linear.w) EXPECT_GE(v, 0.0f);
}

}  // namespace
}  // namespace lmdbloader
