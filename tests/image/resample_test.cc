// The resampler through ResampleRgbInto (the path for pixels PIL decoded),
// against the plain integer oracle of PIL's resize (image_test_util.h).
#include "image/resample.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "image_test_util.h"
#include "lmdbloader/image_decode.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::Compare;
using testing::Difference;
using testing::FromHwc;
using testing::Pixels;
using testing::ReferenceResize;
using testing::SyntheticPhoto;

OutputSpec Uint8Hwc(uint32_t w, uint32_t h) {
  OutputSpec spec;
  spec.width = w;
  spec.height = h;
  spec.layout = PixelLayout::kHWC;
  spec.type = PixelType::kUint8;
  return spec;
}

Status Resample(const Pixels& src, const CropBox& box, const OutputSpec& spec, DecodeScratch* scratch,
                std::vector<uint8_t>* out) {
  out->assign(spec.bytes(), 0xAB);
  return ResampleRgbInto(src.data.data(), src.width, src.height, size_t{src.width} * 3, box, spec, scratch,
                         out->data());
}

// Float sums with PIL's 22-bit weights: a sum within about 1e-5 of a half
// level can round the other way from PIL's exact integer sum. Such sums are
// not rare (weights of 7/12 and 5/12, rounded to 22 bits, put a pair of
// levels 2^-22 below a half in one case of twelve), but they move a value
// by one level, two where both passes round the other way. Nothing else
// may differ.
void ExpectMatchesPil(const Difference& d, const std::string& what) {
  EXPECT_LE(d.max, 2) << what;
  EXPECT_LE(d.mean, 0.06) << what << ": " << d.differing << " of " << d.values << " differ";
}

TEST(ResampleTest, MatchesPilsResizeForShrinkingGrowingAndMixedBoxes) {
  const Pixels src = SyntheticPhoto(300, 220, 1);
  struct Case {
    uint32_t left, top, width, height, out_w, out_h;
  };
  // Shrink both ways, grow both ways, one of each (both pass orders of
  // Pillow 13), a box of one pixel, the whole image, odd sizes.
  for (const Case& c : {Case{10, 20, 280, 190, 224, 224}, Case{100, 50, 40, 30, 224, 224},
                        Case{0, 0, 120, 219, 224, 100}, Case{5, 0, 220, 160, 160, 40},
                        Case{0, 0, 300, 220, 64, 200}, Case{17, 3, 1, 1, 8, 8}, Case{0, 0, 300, 220, 300, 220},
                        Case{299, 219, 1, 1, 3, 5}, Case{33, 44, 199, 151, 37, 211}, Case{0, 0, 300, 220, 1, 1},
                        Case{2, 2, 296, 216, 150, 110}}) {
    DecodeScratch scratch;
    std::vector<uint8_t> out;
    const CropBox box{double(c.left), double(c.top), double(c.width), double(c.height)};
    ASSERT_OK(Resample(src, box, Uint8Hwc(c.out_w, c.out_h), &scratch, &out));
    const Pixels want = ReferenceResize(src, c.left, c.top, c.width, c.height, c.out_w, c.out_h);
    ExpectMatchesPil(Compare(FromHwc(out, c.out_w, c.out_h), want),
                     "box " + std::to_string(c.width) + "x" + std::to_string(c.height) + " to " +
                         std::to_string(c.out_w) + "x" + std::to_string(c.out_h));
  }
}

// A whole-pixel box inside `src` and an output size of 1 to max_out a side.
struct RandomCase {
  uint32_t left, top, w, h, ow, oh;
  CropBox box() const { return CropBox{double(left), double(top), double(w), double(h)}; }
};
RandomCase DrawCase(std::mt19937& rng, const Pixels& src, uint32_t max_out) {
  RandomCase c;
  c.w = 1 + rng() % src.width;
  c.h = 1 + rng() % src.height;
  c.left = rng() % (src.width - c.w + 1);
  c.top = rng() % (src.height - c.h + 1);
  c.ow = 1 + rng() % max_out;
  c.oh = 1 + rng() % max_out;
  return c;
}

TEST(ResampleTest, MatchesPilOnRandomBoxes) {
  std::mt19937 rng(5);
  const Pixels src = SyntheticPhoto(257, 191, 2);
  DecodeScratch scratch;  // one scratch for all: reuse must not leak state
  for (int trial = 0; trial < 60; ++trial) {
    const RandomCase c = DrawCase(rng, src, 300);
    std::vector<uint8_t> out;
    ASSERT_OK(Resample(src, c.box(), Uint8Hwc(c.ow, c.oh), &scratch, &out));
    ExpectMatchesPil(Compare(FromHwc(out, c.ow, c.oh), ReferenceResize(src, c.left, c.top, c.w, c.h, c.ow, c.oh)),
                     "trial " + std::to_string(trial));
  }
}

// PIL's BICUBIC: support 2 and negative lobes, whose sums can fall below 0
// or above 255 before each pass clamps them (a checkerboard and noise
// overshoot more than a photo).
TEST(ResampleTest, BicubicMatchesPilOnRandomBoxes) {
  std::mt19937 rng(6);
  Pixels src = SyntheticPhoto(257, 191, 4);
  for (uint32_t y = 40; y < 80; ++y)
    for (uint32_t x = 0; x < src.width; ++x)
      for (uint32_t c = 0; c < 3; ++c) src.data[(size_t{y} * src.width + x) * 3 + c] = ((x / 3 + y / 3) % 2) ? 255 : 0;
  DecodeScratch scratch;
  for (int trial = 0; trial < 60; ++trial) {
    const RandomCase c = DrawCase(rng, src, 300);
    OutputSpec spec = Uint8Hwc(c.ow, c.oh);
    spec.interpolation = Interpolation::kBicubic;
    std::vector<uint8_t> out;
    ASSERT_OK(Resample(src, c.box(), spec, &scratch, &out));
    ExpectMatchesPil(Compare(FromHwc(out, c.ow, c.oh),
                             ReferenceResize(src, c.left, c.top, c.w, c.h, c.ow, c.oh, Interpolation::kBicubic)),
                     "trial " + std::to_string(trial));
  }
}

// The AVX2 + FMA loops (where this CPU has them) and the portable ones,
// each against PIL and against each other: the same products, summed in
// another order and unrounded before each addition, so only a near-tie may
// round the other way. Large shrinks (windows of more than 8 taps, and of
// more rows than are summed while writing) included.
TEST(ResampleTest, PortableAndAvx2LoopsAgree) {
  struct RestoreBest {
    ~RestoreBest() { UseResampleLoops(ResampleLoops::kBest); }
  } restore;
  std::mt19937 rng(8);
  const Pixels src = SyntheticPhoto(411, 333, 6);
  DecodeScratch scratch;
  for (int trial = 0; trial < 40; ++trial) {
    RandomCase c = DrawCase(rng, src, 240);
    if (trial % 4 == 0) c = RandomCase{0, 0, src.width, src.height, 1 + c.ow / 8, 1 + c.oh / 8};
    for (Interpolation filter : {Interpolation::kBilinear, Interpolation::kBicubic}) {
      OutputSpec spec = Uint8Hwc(c.ow, c.oh);
      spec.interpolation = filter;
      spec.flip = trial % 3 == 1;
      std::vector<uint8_t> best, portable;
      UseResampleLoops(ResampleLoops::kBest);
      ASSERT_OK(Resample(src, c.box(), spec, &scratch, &best));
      UseResampleLoops(ResampleLoops::kPortable);
      ASSERT_OK(Resample(src, c.box(), spec, &scratch, &portable));
      const std::string what = "trial " + std::to_string(trial) + (filter == Interpolation::kBicubic ? " bicubic" : "");
      Pixels want = ReferenceResize(src, c.left, c.top, c.w, c.h, c.ow, c.oh, filter);
      if (spec.flip) want = testing::Mirror(want);
      ExpectMatchesPil(Compare(FromHwc(best, c.ow, c.oh), want), what + " best");
      ExpectMatchesPil(Compare(FromHwc(portable, c.ow, c.oh), want), what + " portable");
      const Difference d = Compare(FromHwc(best, c.ow, c.oh), FromHwc(portable, c.ow, c.oh));
      EXPECT_LE(d.max, 2) << what;
      EXPECT_LE(d.mean, 0.01) << what << ": " << d.differing << " of " << d.values << " differ";
      // float32 CHW: the vertical pass's own AVX2 path.
      spec.layout = PixelLayout::kCHW;
      spec.type = PixelType::kFloat32;
      std::vector<uint8_t> fbest, fportable;
      UseResampleLoops(ResampleLoops::kBest);
      ASSERT_OK(Resample(src, c.box(), spec, &scratch, &fbest));
      UseResampleLoops(ResampleLoops::kPortable);
      ASSERT_OK(Resample(src, c.box(), spec, &scratch, &fportable));
      size_t far = 0;
      for (size_t i = 0; i + 4 <= fbest.size(); i += 4) {
        float a, b;
        std::memcpy(&a, &fbest[i], 4);
        std::memcpy(&b, &fportable[i], 4);
        far += std::fabs(a - b) > 2.5f / (255.0f * 0.224f);
      }
      EXPECT_EQ(far, 0u) << what;
    }
  }
}

// grayscale: PIL's convert("L") (its L24 integer luma), then the resize of
// that one channel; both filters.
TEST(ResampleTest, GrayscaleIsPilsLumaThenItsResize) {
  std::mt19937 rng(7);
  const Pixels src = SyntheticPhoto(203, 149, 5);
  Pixels luma = src;  // L in all three channels: the oracle resizes it as RGB
  for (size_t i = 0; i < luma.data.size(); i += 3) {
    const int l = (src.data[i] * 19595 + src.data[i + 1] * 38470 + src.data[i + 2] * 7471 + 0x8000) >> 16;
    luma.data[i] = luma.data[i + 1] = luma.data[i + 2] = static_cast<uint8_t>(l);
  }
  DecodeScratch scratch;
  for (int trial = 0; trial < 40; ++trial) {
    const RandomCase c = DrawCase(rng, src, 200);
    OutputSpec spec = Uint8Hwc(c.ow, c.oh);
    spec.grayscale = true;
    spec.interpolation = trial % 2 ? Interpolation::kBicubic : Interpolation::kBilinear;
    ASSERT_EQ(spec.bytes(), size_t{c.ow} * c.oh);
    std::vector<uint8_t> out;
    ASSERT_OK(Resample(src, c.box(), spec, &scratch, &out));
    std::vector<uint8_t> spread(size_t{c.ow} * c.oh * 3);
    for (size_t i = 0; i < out.size(); ++i) spread[3 * i] = spread[3 * i + 1] = spread[3 * i + 2] = out[i];
    ExpectMatchesPil(Compare(FromHwc(spread, c.ow, c.oh),
                             ReferenceResize(luma, c.left, c.top, c.w, c.h, c.ow, c.oh, spec.interpolation)),
                     "trial " + std::to_string(trial));
  }
}

TEST(ResampleTest, TheWholeImageAtItsOwnSizeIsACopy) {
  const Pixels src = SyntheticPhoto(61, 47, 3);
  DecodeScratch scratch;
  std::vector<uint8_t> out;
  ASSERT_OK(Resample(src, CropBox{0, 0, 61, 47}, Uint8Hwc(61, 47), &scratch, &out));
  EXPECT_EQ(Compare(FromHwc(out, 61, 47), src).max, 0);
}

TEST(ResampleTest, FlipMirrorsTheOutput) {
  const Pixels src = SyntheticPhoto(90, 70, 4);
  DecodeScratch scratch;
  for (uint32_t ow : {33u, 224u, 4u, 1u}) {
    OutputSpec spec = Uint8Hwc(ow, 19);
    std::vector<uint8_t> plain, flipped;
    ASSERT_OK(Resample(src, CropBox{3, 5, 80, 60}, spec, &scratch, &plain));
    spec.flip = true;
    ASSERT_OK(Resample(src, CropBox{3, 5, 80, 60}, spec, &scratch, &flipped));
    EXPECT_EQ(Compare(FromHwc(flipped, ow, 19), testing::Mirror(FromHwc(plain, ow, 19))).max, 0) << ow;
  }
}

// All four layouts and types hold the same values: CHW the HWC planes,
// float32 the levels as to_tensor then normalize make them.
TEST(ResampleTest, LayoutsAndTypesAgree) {
  const Pixels src = SyntheticPhoto(120, 80, 5);
  DecodeScratch scratch;
  const CropBox box{7, 9, 100, 64};
  for (bool flip : {false, true}) {
    for (uint32_t ow : {31u, 224u}) {
      const uint32_t oh = 27;
      OutputSpec spec = Uint8Hwc(ow, oh);
      spec.flip = flip;
      std::vector<uint8_t> hwc;
      ASSERT_OK(Resample(src, box, spec, &scratch, &hwc));
      spec.layout = PixelLayout::kCHW;
      std::vector<uint8_t> chw;
      ASSERT_OK(Resample(src, box, spec, &scratch, &chw));
      spec.type = PixelType::kFloat32;
      spec.mean[0] = 0.5f;
      spec.std[2] = 0.1f;
      std::vector<uint8_t> fchw;
      ASSERT_OK(Resample(src, box, spec, &scratch, &fchw));
      spec.layout = PixelLayout::kHWC;
      std::vector<uint8_t> fhwc;
      ASSERT_OK(Resample(src, box, spec, &scratch, &fhwc));
      int bad = 0;
      for (uint32_t y = 0; y < oh; ++y) {
        for (uint32_t x = 0; x < ow; ++x) {
          for (uint32_t c = 0; c < 3; ++c) {
            const uint8_t v = hwc[(size_t{y} * ow + x) * 3 + c];
            bad += chw[(size_t{c} * oh + y) * ow + x] != v;
            float a, b;
            std::memcpy(&a, &fchw[((size_t{c} * oh + y) * ow + x) * 4], 4);
            std::memcpy(&b, &fhwc[((size_t{y} * ow + x) * 3 + c) * 4], 4);
            const float want = (float(v) / 255.0f - spec.mean[c]) / spec.std[c];
            bad += std::fabs(a - want) > 1e-5f * std::max(1.0f, std::fabs(want));
            bad += a != b;
          }
        }
      }
      EXPECT_EQ(bad, 0) << "flip " << flip << " width " << ow;
    }
  }
}

TEST(ResampleTest, WritesOnlyItsOutputBytes) {
  const Pixels src = SyntheticPhoto(50, 40, 6);
  DecodeScratch scratch;
  for (PixelType type : {PixelType::kUint8, PixelType::kFloat32}) {
    for (PixelLayout layout : {PixelLayout::kCHW, PixelLayout::kHWC}) {
      for (bool flip : {false, true}) {
        OutputSpec spec = Uint8Hwc(13, 7);
        spec.type = type;
        spec.layout = layout;
        spec.flip = flip;
        // Guard bytes around an output that starts at an odd address.
        std::vector<uint8_t> buf(spec.bytes() + 64, 0xCD);
        ASSERT_OK(ResampleRgbInto(src.data.data(), 50, 40, 150, CropBox{1, 2, 30, 20}, spec, &scratch,
                                  buf.data() + 31));
        for (size_t i = 0; i < 31; ++i) EXPECT_EQ(buf[i], 0xCD);
        for (size_t i = 31 + spec.bytes(); i < buf.size(); ++i) EXPECT_EQ(buf[i], 0xCD);
      }
    }
  }
}

// Fractional boxes (what IDCT scaling makes of whole-pixel ones) resize the
// same picture: close to the whole-pixel box around them.
TEST(ResampleTest, FractionalBoxesAreCloseToTheirRoundedBox) {
  const Pixels src = SyntheticPhoto(200, 150, 7);
  DecodeScratch scratch;
  std::vector<uint8_t> a, b;
  ASSERT_OK(Resample(src, CropBox{10.25, 20.5, 150.5, 100.75}, Uint8Hwc(64, 48), &scratch, &a));
  ASSERT_OK(Resample(src, CropBox{10, 20, 151, 101}, Uint8Hwc(64, 48), &scratch, &b));
  const Difference d = Compare(FromHwc(a, 64, 48), FromHwc(b, 64, 48));
  EXPECT_LT(d.mean, 3.0);
}

TEST(ResampleTest, BadArgumentsAreInvalid) {
  const Pixels src = SyntheticPhoto(20, 10, 8);
  DecodeScratch scratch;
  std::vector<uint8_t> out(4096);
  const OutputSpec ok = Uint8Hwc(8, 8);
  auto run = [&](const CropBox& box, const OutputSpec& spec, size_t stride = 60, uint32_t w = 20) {
    return ResampleRgbInto(src.data.data(), w, 10, stride, box, spec, &scratch, out.data());
  };
  const double nan = std::nan("");
  for (const CropBox& box : {CropBox{0, 0, 21, 10}, CropBox{0, 0, 20, 11}, CropBox{-1, 0, 5, 5}, CropBox{0, 0, 0, 5},
                             CropBox{0, 0, 5, -1}, CropBox{nan, 0, 5, 5}, CropBox{0, 0, INFINITY, 5},
                             CropBox{19.5, 0, 1, 5}}) {
    EXPECT_EQ(run(box, ok).code(), Status::Code::kInvalidArgument)
        << box.left << " " << box.top << " " << box.width << " " << box.height;
  }
  OutputSpec spec = ok;
  spec.width = 0;
  EXPECT_EQ(run(CropBox{0, 0, 5, 5}, spec).code(), Status::Code::kInvalidArgument);
  spec = ok;
  spec.height = kMaxOutputSide + 1;
  EXPECT_EQ(run(CropBox{0, 0, 5, 5}, spec).code(), Status::Code::kInvalidArgument);
  spec = ok;
  spec.interpolation = static_cast<Interpolation>(7);  // a value from outside the enum
  EXPECT_EQ(run(CropBox{0, 0, 5, 5}, spec).code(), Status::Code::kInvalidArgument);
  Interpolation parsed;
  EXPECT_OK(ParseInterpolation("bicubic", &parsed));
  EXPECT_EQ(parsed, Interpolation::kBicubic);
  EXPECT_EQ(ParseInterpolation("lanczos", &parsed).code(), Status::Code::kInvalidArgument);
  spec = ok;
  spec.type = PixelType::kFloat32;
  spec.std[1] = 0;
  EXPECT_EQ(run(CropBox{0, 0, 5, 5}, spec).code(), Status::Code::kInvalidArgument);
  spec.std[1] = 1;
  spec.mean[2] = NAN;
  EXPECT_EQ(run(CropBox{0, 0, 5, 5}, spec).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(run(CropBox{0, 0, 5, 5}, ok, 59).code(), Status::Code::kInvalidArgument);  // stride < width * 3
  EXPECT_EQ(run(CropBox{0, 0, 5, 5}, ok, 60, 0).code(), Status::Code::kInvalidArgument);
  // The output's mean and std are not looked at for uint8.
  spec = ok;
  spec.std[0] = 0;
  EXPECT_OK(run(CropBox{0, 0, 5, 5}, spec));
}

TEST(ResampleTest, ScratchIsReusedCappedAndGivenBack) {
  const Pixels src = SyntheticPhoto(400, 300, 9);
  std::vector<uint8_t> out;
  DecodeScratch scratch;
  EXPECT_EQ(scratch.bytes(), 0u);
  ASSERT_OK(Resample(src, CropBox{0, 0, 400, 300}, Uint8Hwc(224, 224), &scratch, &out));
  const size_t held = scratch.bytes();
  EXPECT_GT(held, 0u);
  EXPECT_LT(held, size_t{256} << 10);
  ASSERT_OK(Resample(src, CropBox{10, 10, 300, 200}, Uint8Hwc(224, 224), &scratch, &out));
  EXPECT_LE(scratch.bytes(), held + (size_t{64} << 10));
  scratch.Release();
  EXPECT_EQ(scratch.bytes(), 0u);

  // A tall, narrow output from a wide box holds many wide rows at once.
  DecodeScratch small(size_t{64} << 10);
  Status s = Resample(src, CropBox{0, 0, 400, 300}, Uint8Hwc(4000, 2), &small, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("scratch"), std::string::npos) << s.message();
  EXPECT_OK(Resample(src, CropBox{0, 0, 400, 300}, Uint8Hwc(16, 16), &small, &out));

  // Above keep_bytes the memory goes back after the call.
  DecodeScratch thrifty(DecodeScratch::kDefaultMaxBytes, 1024);
  ASSERT_OK(Resample(src, CropBox{0, 0, 400, 300}, Uint8Hwc(224, 224), &thrifty, &out));
  EXPECT_EQ(thrifty.bytes(), 0u);
}

}  // namespace
}  // namespace lmdbloader
