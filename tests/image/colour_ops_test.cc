// The colour ops (ApplyColourOps, and through the decoders) against plain
// per-pixel formulas of Pillow's ImageEnhance and ImageOps.solarize; the
// Python tests compare them with Pillow itself on photographs.
#include "image/colour_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "image_test_util.h"
#include "lmdbloader/image_decode.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::SyntheticPhoto;

ColourOps Ops(std::initializer_list<ColourOp> list) {
  ColourOps ops;
  for (const ColourOp& op : list) ops.ops[ops.count++] = op;
  return ops;
}

int Luma(const uint8_t* p) { return (p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16; }

// Pillow's blend in double: within a level of its float arithmetic.
int BlendRef(double gray, double v, double f) {
  const double t = gray + f * (v - gray);
  return t <= 0 ? 0 : t >= 255 ? 255 : static_cast<int>(t);
}

std::vector<uint8_t> Noise(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng() & 255);
  return v;
}

TEST(ColourOpsTest, EachOpIsItsFormula) {
  const uint32_t w = 37, h = 11;
  const std::vector<uint8_t> src = Noise(size_t{w} * h * 3, 1);
  for (float f : {0.0f, 0.6f, 1.0f, 1.4f, 3.0f}) {
    std::vector<uint8_t> b = src, c = src, s = src;
    ASSERT_OK(ApplyColourOps(Ops({{ColourOpKind::kBrightness, f}}), b.data(), w, h, 3));
    ASSERT_OK(ApplyColourOps(Ops({{ColourOpKind::kContrast, f}}), c.data(), w, h, 3));
    ASSERT_OK(ApplyColourOps(Ops({{ColourOpKind::kSaturation, f}}), s.data(), w, h, 3));
    double sum = 0;
    for (size_t i = 0; i < size_t{w} * h; ++i) sum += Luma(&src[i * 3]);
    const int mean = static_cast<int>(sum / (w * h) + 0.5);
    for (size_t i = 0; i < src.size(); ++i) {
      EXPECT_NEAR(b[i], BlendRef(0, src[i], f), 1) << i;
      EXPECT_NEAR(c[i], BlendRef(mean, src[i], f), 1) << i;
      EXPECT_NEAR(s[i], BlendRef(Luma(&src[i / 3 * 3]), src[i], f), 1) << i;
    }
    if (f == 1.0f) {
      EXPECT_EQ(b, src);
    }
  }
  std::vector<uint8_t> g = src, z = src;
  ASSERT_OK(ApplyColourOps(Ops({{ColourOpKind::kGrayscale, 0}}), g.data(), w, h, 3));
  ASSERT_OK(ApplyColourOps(Ops({{ColourOpKind::kSolarize, 128}}), z.data(), w, h, 3));
  for (size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(g[i], Luma(&src[i / 3 * 3]));
    EXPECT_EQ(z[i], src[i] < 128 ? src[i] : 255 - src[i]);
  }
}

// Each op applied alone, over the whole image, in Pillow's float steps:
// what the composed tables and the blocked saturation must equal exactly.
uint8_t BlendFloat(int gray, int level, float f) {
  const float t = static_cast<float>(gray) + f * static_cast<float>(level - gray);
  return t <= 0.0f ? 0 : t >= 255.0f ? 255 : static_cast<uint8_t>(t);
}

void OneByOne(const ColourOps& ops, std::vector<uint8_t>* image, uint32_t channels) {
  std::vector<uint8_t>& p = *image;
  const size_t pixels = p.size() / channels;
  auto luma = [&](size_t i) { return channels == 1 ? p[i] : Luma(&p[i * 3]); };
  for (uint32_t k = 0; k < ops.count; ++k) {
    const ColourOp& op = ops.ops[k];
    if (op.kind == ColourOpKind::kContrast) {
      uint64_t sum = 0;
      for (size_t i = 0; i < pixels; ++i) sum += luma(i);
      const int mean = static_cast<int>(static_cast<double>(sum) / static_cast<double>(pixels) + 0.5);
      for (uint8_t& v : p) v = BlendFloat(mean, v, op.value);
    } else if (op.kind == ColourOpKind::kBrightness) {
      for (uint8_t& v : p) v = BlendFloat(0, v, op.value);
    } else if (op.kind == ColourOpKind::kSolarize) {
      for (uint8_t& v : p) v = static_cast<float>(v) < op.value ? v : 255 - v;
    } else if (channels == 3) {
      for (size_t i = 0; i < pixels; ++i) {
        const int l = luma(i);
        for (int c = 0; c < 3; ++c)
          p[i * 3 + c] = op.kind == ColourOpKind::kGrayscale ? l : BlendFloat(l, p[i * 3 + c], op.value);
      }
    }
  }
}

TEST(ColourOpsTest, ComposedTablesAreTheOpsOneByOne) {
  std::mt19937 rng(21);
  const ColourOpKind kinds[] = {ColourOpKind::kBrightness, ColourOpKind::kContrast, ColourOpKind::kSaturation,
                                ColourOpKind::kGrayscale, ColourOpKind::kSolarize};
  for (int round = 0; round < 400; ++round) {
    const uint32_t channels = round % 4 == 0 ? 1 : 3;
    const uint32_t w = 1 + rng() % 300, h = 1 + rng() % 9;
    std::vector<uint8_t> image = Noise(size_t{w} * h * channels, round);
    ColourOps ops;
    ops.count = 1 + rng() % kMaxColourOps;
    for (uint32_t k = 0; k < ops.count; ++k) {
      ColourOp& op = ops.ops[k];
      op.kind = kinds[rng() % 5];
      op.value = op.kind == ColourOpKind::kSolarize ? float(rng() % 2600) / 10.0f : float(rng() % 3000) / 1000.0f;
    }
    std::vector<uint8_t> want = image;
    OneByOne(ops, &want, channels);
    ASSERT_OK(ApplyColourOps(ops, image.data(), w, h, channels));
    ASSERT_EQ(image, want) << "round " << round;
  }
}

// Hue: a turn of a third takes the primaries round (red to green to blue),
// leaves grays alone, and one channel as it is.
TEST(ColourOpsTest, HueTurnsThePrimariesAndLeavesGrays) {
  uint8_t p[12] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 90, 90, 90};
  ASSERT_OK(ApplyColourOps(Ops({{ColourOpKind::kHue, 1.0f / 3}}), p, 4, 1, 3));
  const uint8_t want[12] = {0, 255, 0, 0, 0, 255, 255, 0, 0, 90, 90, 90};
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(p[i], want[i], 3) << i;
  uint8_t one[4] = {1, 50, 200, 255};
  ASSERT_OK(ApplyColourOps(Ops({{ColourOpKind::kHue, -0.2f}}), one, 4, 1, 1));
  EXPECT_EQ(one[1], 50);
}

size_t CountDiffering(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  size_t differ = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) differ += a[i] != b[i];
  return differ;
}

// ShiftHue (the AVX2 loop where this CPU has it, the portable one on the
// rest) against the portable loop alone: every one of the 2^24 colours for
// two turns, and random colours for every turn in runs of every length
// mod 8 (the tail the AVX2 loop leaves).
TEST(ColourOpsTest, HueAvx2IsThePortableLoop) {
  std::vector<uint8_t> every(size_t{3} << 24);
  for (uint32_t c = 0; c < (1u << 24); ++c) {
    every[size_t{c} * 3] = static_cast<uint8_t>(c >> 16);
    every[size_t{c} * 3 + 1] = static_cast<uint8_t>(c >> 8);
    every[size_t{c} * 3 + 2] = static_cast<uint8_t>(c);
  }
  for (int shift : {26, 229}) {
    std::vector<uint8_t> best = every, portable = every;
    ShiftHue(best.data(), size_t{1} << 24, shift);
    ShiftHuePortable(portable.data(), size_t{1} << 24, shift);
    // Compared whole (memcmp); the bytes that differ are counted only for
    // the message, as a loop over 50M bytes is slow in an unoptimised test.
    EXPECT_TRUE(best == portable) << "shift " << shift << ": " << CountDiffering(best, portable)
                                  << " bytes differ";
  }
  std::mt19937 rng(9);
  for (int shift = 0; shift < 256; ++shift) {
    const size_t n = 1 + rng() % 40;
    std::vector<uint8_t> best(n * 3);
    for (auto& v : best) v = static_cast<uint8_t>(rng());
    std::vector<uint8_t> portable = best;
    ShiftHue(best.data(), n, shift);
    ShiftHuePortable(portable.data(), n, shift);
    EXPECT_EQ(best, portable) << "shift " << shift << ", " << n << " pixels";
  }
}

TEST(ColourOpsTest, OneChannelIsItsOwnLuma) {
  const std::vector<uint8_t> src = Noise(64, 2);
  std::vector<uint8_t> v = src;
  ASSERT_OK(ApplyColourOps(Ops({{ColourOpKind::kSaturation, 0.2f}, {ColourOpKind::kGrayscale, 0}}), v.data(), 8, 8, 1));
  EXPECT_EQ(v, src);
  ASSERT_OK(ApplyColourOps(Ops({{ColourOpKind::kContrast, 0.0f}}), v.data(), 8, 8, 1));
  double sum = 0;
  for (uint8_t b : src) sum += b;
  for (uint8_t b : v) EXPECT_EQ(b, static_cast<int>(sum / 64 + 0.5));
}

TEST(ColourOpsTest, BadOpsAreRefused) {
  uint8_t p[3] = {1, 2, 3};
  EXPECT_EQ(ApplyColourOps(Ops({{ColourOpKind::kBrightness, -0.5f}}), p, 1, 1, 3).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(ApplyColourOps(Ops({{ColourOpKind::kSolarize, NAN}}), p, 1, 1, 3).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ApplyColourOps(Ops({}), p, 1, 1, 2).code(), Status::Code::kInvalidArgument);
  ColourOpKind kind;
  EXPECT_EQ(ParseColourOp("sharpness", &kind).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ApplyColourOps(Ops({{ColourOpKind::kHue, 0.6f}}), p, 1, 1, 3).code(), Status::Code::kInvalidArgument);
  ASSERT_OK(ParseColourOp("solarize", &kind));
  EXPECT_EQ(kind, ColourOpKind::kSolarize);
}

// The decoders' ops are ApplyColourOps on their uint8 HWC output, then the
// spec's type and layout.
TEST(ColourOpsTest, BlurIsTheTwoDimensionalGaussianWithMirroredEdges) {
  for (const int c : {1, 3}) {
    const std::vector<uint8_t> in = Noise(size_t{37} * 23 * c, 5 + c);
    for (const auto& [k, sigma] : std::vector<std::pair<int, float>>{{9, 0.1f}, {9, 2.0f}, {5, 1.3f}, {1, 1.0f}}) {
      std::vector<uint8_t> got = in;
      ColourOp op{ColourOpKind::kBlur, sigma, static_cast<uint32_t>(k)};
      ASSERT_OK(ApplyColourOps(Ops({op}), got.data(), 37, 23, c));
      const std::vector<uint8_t> want = testing::DirectBlur(in, 37, 23, c, k, sigma);
      int worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
      EXPECT_LE(worst, 1) << "kernel " << k << " sigma " << sigma << " channels " << c;
      if (k == 1) {
        EXPECT_EQ(got, in);
      }
    }
  }
  // Even, zero or too large kernels, and sigmas that are not positive, are refused.
  for (const ColourOp& bad : {ColourOp{ColourOpKind::kBlur, 1.0f, 4}, ColourOp{ColourOpKind::kBlur, 1.0f, 0},
                              ColourOp{ColourOpKind::kBlur, 1.0f, kMaxBlurKernel + 2},
                              ColourOp{ColourOpKind::kBlur, 0.0f, 9}, ColourOp{ColourOpKind::kBlur, NAN, 9}})
    EXPECT_EQ(CheckColourOps(Ops({bad})).code(), Status::Code::kInvalidArgument);
}

// torch's reflect padding (torchvision's GaussianBlur) needs kernel / 2
// below the height and the width: 15 blurs an 8-pixel side, 17 is refused
// naming the kernel and the size, whichever side is the short one.
TEST(ColourOpsTest, BlurKernelMustFitTheImageAsTorchsReflectPadding) {
  for (const auto& [w, h] : std::vector<std::pair<uint32_t, uint32_t>>{{8, 8}, {8, 30}, {30, 8}}) {
    std::vector<uint8_t> flat(size_t{w} * h * 3, 77);
    ASSERT_OK(ApplyColourOps(Ops({{ColourOpKind::kBlur, 2.0f, 15}}), flat.data(), w, h, 3));
    EXPECT_EQ(flat, std::vector<uint8_t>(size_t{w} * h * 3, 77));  // a flat image stays flat
    const Status s = ApplyColourOps(Ops({{ColourOpKind::kBlur, 2.0f, 17}}), flat.data(), w, h, 3);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    const std::string size = std::to_string(w) + "x" + std::to_string(h);
    EXPECT_NE(s.message().find("blur kernel 17 is too large for a " + size), std::string::npos) << s.message();
  }
  std::vector<uint8_t> one(3, 5);
  ASSERT_OK(ApplyColourOps(Ops({{ColourOpKind::kBlur, 2.0f, 1}}), one.data(), 1, 1, 3));
  EXPECT_FALSE(ApplyColourOps(Ops({{ColourOpKind::kBlur, 2.0f, 3}}), one.data(), 1, 1, 3).ok());
  // The decoders refuse it as the image is resized into its output.
  const testing::Pixels photo = SyntheticPhoto(64, 48, 3);
  DecodeScratch scratch;
  OutputSpec spec;
  spec.width = spec.height = 8;
  spec.colour = Ops({{ColourOpKind::kBlur, 1.0f, 17}});
  std::vector<float> out(8 * 8 * 3);
  const Status s = ResampleRgbInto(photo.data.data(), photo.width, photo.height, size_t{photo.width} * 3,
                                   CropBox{0, 0, 64, 48}, spec, &scratch, out.data());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("blur kernel 17"), std::string::npos) << s.message();
}

TEST(ColourOpsTest, ResampleWithOpsIsResampleThenOps) {
  const testing::Pixels photo = SyntheticPhoto(120, 90, 7);
  const CropBox box{10, 5, 100, 80};
  const ColourOps ops = Ops({{ColourOpKind::kContrast, 1.3f}, {ColourOpKind::kSaturation, 0.4f},
                             {ColourOpKind::kBrightness, 0.8f}, {ColourOpKind::kSolarize, 100}});
  DecodeScratch scratch;
  OutputSpec plain;
  plain.width = 48;
  plain.height = 40;
  plain.layout = PixelLayout::kHWC;
  plain.type = PixelType::kUint8;
  plain.flip = true;
  std::vector<uint8_t> want(plain.bytes());
  ASSERT_OK(ResampleRgbInto(photo.data.data(), photo.width, photo.height, size_t{photo.width} * 3, box, plain,
                            &scratch, want.data()));
  ASSERT_OK(ApplyColourOps(ops, want.data(), plain.width, plain.height, 3));
  for (PixelLayout layout : {PixelLayout::kHWC, PixelLayout::kCHW}) {
    for (PixelType type : {PixelType::kUint8, PixelType::kFloat32}) {
      OutputSpec spec = plain;
      spec.layout = layout;
      spec.type = type;
      spec.colour = ops;
      std::vector<uint8_t> got(spec.bytes());
      ASSERT_OK(ResampleRgbInto(photo.data.data(), photo.width, photo.height, size_t{photo.width} * 3, box, spec,
                                &scratch, got.data()));
      const size_t pixels = size_t{spec.width} * spec.height;
      for (size_t i = 0; i < pixels; ++i) {
        for (int c = 0; c < 3; ++c) {
          const size_t at = layout == PixelLayout::kHWC ? i * 3 + c : c * pixels + i;
          double v;
          if (type == PixelType::kUint8) {
            v = got[at];
          } else {
            float f;
            std::memcpy(&f, &got[at * 4], 4);
            v = (f * spec.std[c] + spec.mean[c]) * 255.0;
          }
          ASSERT_NEAR(v, want[i * 3 + c], 1e-3) << i << " " << c;
        }
      }
    }
  }
}

TEST(ColourOpsTest, ABatchTakesEachImagesOps) {
  const testing::Pixels photo = SyntheticPhoto(96, 64, 3);
  const std::string jpeg = testing::EncodeJpeg(photo);
  const std::string_view jpegs[2] = {jpeg, jpeg};
  const CropBox boxes[2] = {{0, 0, 96, 64}, {0, 0, 96, 64}};
  ColourOps colours[2];
  colours[1] = Ops({{ColourOpKind::kGrayscale, 0}});
  OutputSpec spec;
  spec.width = 32;
  spec.height = 24;
  spec.layout = PixelLayout::kHWC;
  spec.type = PixelType::kUint8;
  DecodeScratch scratch;
  std::vector<uint8_t> out(spec.bytes() * 2), plain(spec.bytes());
  size_t failed = 0;
  ASSERT_OK(DecodeJpegBatch(jpegs, boxes, nullptr, colours, 2, spec, &scratch, out.data(), &failed));
  ASSERT_OK(DecodeJpegInto(jpeg, boxes[0], spec, &scratch, plain.data()));
  EXPECT_EQ(0, std::memcmp(out.data(), plain.data(), spec.bytes()));
  ASSERT_OK(ApplyColourOps(colours[1], plain.data(), spec.width, spec.height, 3));
  EXPECT_EQ(0, std::memcmp(out.data() + spec.bytes(), plain.data(), spec.bytes()));
}

}  // namespace
}  // namespace lmdbloader
