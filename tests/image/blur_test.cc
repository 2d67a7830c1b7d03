// The separable blur against the per-pixel loop it replaced (the same
// float sums, written plainly: bit-exact) and against a direct k x k sum in
// double (within a level).
#include "image/blur.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "image_test_util.h"
#include "lmdbloader/image_decode.h"

namespace lmdbloader {
namespace {

// Each level's row sum, then column sum, tap by tap from the first, in
// float; rounded with nearbyint.
std::vector<uint8_t> LoopBlur(const std::vector<uint8_t>& in, uint32_t w, uint32_t h, uint32_t c, uint32_t k,
                              float sigma) {
  std::vector<float> g(k);
  BlurKernel(k, sigma, g.data());
  const int64_t r = k / 2;
  std::vector<float> rows(in.size());
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t x = 0; x < w; ++x)
      for (uint32_t ch = 0; ch < c; ++ch) {
        float s = 0.0f;
        for (uint32_t i = 0; i < k; ++i)
          s += g[i] * static_cast<float>(in[(size_t{y} * w + testing::Reflected(int64_t{x} + i - r, int(w))) * c + ch]);
        rows[(size_t{y} * w + x) * c + ch] = s;
      }
  std::vector<uint8_t> out(in.size());
  for (uint32_t y = 0; y < h; ++y)
    for (size_t j = 0; j < size_t{w} * c; ++j) {
      float s = 0.0f;
      for (uint32_t i = 0; i < k; ++i) s += g[i] * rows[testing::Reflected(int64_t{y} + i - r, int(h)) * size_t{w} * c + j];
      out[size_t{y} * w * c + j] = static_cast<uint8_t>(std::clamp(std::nearbyint(s), 0.0f, 255.0f));
    }
  return out;
}

std::vector<uint8_t> Blurred(std::vector<uint8_t> p, uint32_t w, uint32_t h, uint32_t c, uint32_t k, float sigma) {
  std::vector<float> work(BlurWorkFloats(w, h, c));
  Blur(k, sigma, p.data(), w, h, c, work.data());
  return p;
}

TEST(BlurTest, IsThePerPixelLoopExactly) {
  std::mt19937 rng(11);
  for (int round = 0; round < 60; ++round) {
    const uint32_t c = round % 3 == 0 ? 1 : 3;
    const uint32_t w = 1 + rng() % 70, h = 1 + rng() % 50;
    const uint32_t k = 1 + 2 * (rng() % (round % 5 == 0 ? 40 : 12));
    const float sigma = 0.1f + float(rng() % 1000) / 1000.0f * 3.0f;
    std::vector<uint8_t> in;
    if (round % 2) {
      in = testing::SyntheticPhoto(w, h, round, c).data;
    } else {
      in.resize(size_t{w} * h * c);
      for (uint8_t& b : in) b = static_cast<uint8_t>(rng());
    }
    ASSERT_EQ(Blurred(in, w, h, c, k, sigma), LoopBlur(in, w, h, c, k, sigma))
        << w << "x" << h << "x" << c << " kernel " << k << " sigma " << sigma;
  }
}

TEST(BlurTest, IsTheTwoDimensionalGaussianWithinALevel) {
  for (const uint32_t c : {1u, 3u}) {
    const std::vector<uint8_t> in = testing::SyntheticPhoto(53, 31, 4 + c, c).data;
    const std::vector<std::pair<uint32_t, float>> kernels = {{9, 0.1f}, {9, 2.0f}, {23, 1.7f}, {5, 1.3f}};
    for (const auto& [k, sigma] : kernels) {
      const std::vector<uint8_t> got = Blurred(in, 53, 31, c, k, sigma);
      const std::vector<uint8_t> want = testing::DirectBlur(in, 53, 31, c, k, sigma);
      int worst = 0;
      double total = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::abs(got[i] - want[i]));
        total += std::abs(got[i] - want[i]);
      }
      EXPECT_LE(worst, 1) << "kernel " << k << " sigma " << sigma;
      EXPECT_LT(total / got.size(), 0.05) << "kernel " << k << " sigma " << sigma;
    }
  }
}

TEST(BlurTest, KernelOfOneAndFlatImagesChangeNothing) {
  const std::vector<uint8_t> in = testing::SyntheticPhoto(17, 9, 2).data;
  EXPECT_EQ(Blurred(in, 17, 9, 3, 1, 1.0f), in);
  const std::vector<uint8_t> flat(size_t{2} * 3 * 3, 77);
  EXPECT_EQ(Blurred(flat, 2, 3, 3, 23, 2.0f), flat);  // mirrored again: smaller than half the kernel
  const std::vector<uint8_t> white(size_t{40} * 30 * 3, 255);
  EXPECT_EQ(Blurred(white, 40, 30, 3, kMaxBlurKernel, 50.0f), white);
}

}  // namespace
}  // namespace lmdbloader
