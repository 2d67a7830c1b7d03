// DecodeJpegInto and DecodeJpegBatch, against a full decode (libjpeg, as
// Pillow decodes) resized by the oracle of PIL's resize.
#include "lmdbloader/image_decode.h"

#include <gtest/gtest.h>

#include <random>

#include "image/decode_plan.h"
#include "image_test_util.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::Compare;
using testing::Difference;
using testing::EncodeJpeg;
using testing::FromHwc;
using testing::JpegOptions;
using testing::Pixels;
using testing::ReferenceDecode;
using testing::ReferenceResize;
using testing::SyntheticPhoto;

OutputSpec Uint8Hwc(uint32_t w, uint32_t h, bool scale) {
  OutputSpec spec;
  spec.width = w;
  spec.height = h;
  spec.layout = PixelLayout::kHWC;
  spec.type = PixelType::kUint8;
  spec.scale_in_idct = scale;
  return spec;
}

std::vector<JpegOptions> Kinds() {
  std::vector<JpegOptions> kinds(6);
  kinds[1].subsampling = "444";
  kinds[2].progressive = true;
  kinds[3].restart_rows = 2;
  kinds[4].subsampling = "422";
  kinds[5].quality = 50;
  return kinds;
}

TEST(PixelNames, EveryNameParsesToItsValueAndOthersAreRefusedWithTheList) {
  ASSERT_EQ(PixelLayoutNames(), (std::vector<std::string>{"CHW", "HWC"}));
  ASSERT_EQ(PixelTypeNames(), (std::vector<std::string>{"float32", "uint8"}));
  PixelLayout layout = PixelLayout::kCHW;
  EXPECT_TRUE(ParsePixelLayout("HWC", &layout).ok());
  EXPECT_EQ(layout, PixelLayout::kHWC);
  PixelType type = PixelType::kFloat32;
  EXPECT_TRUE(ParsePixelType("uint8", &type).ok());
  EXPECT_EQ(type, PixelType::kUint8);
  const Status bad = ParsePixelLayout("chw", &layout);
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument) << bad.ToString();
  EXPECT_NE(bad.ToString().find("layout must be one of CHW, HWC; got 'chw'"), std::string::npos) << bad.ToString();
  EXPECT_FALSE(ParsePixelType("float16", &type).ok());
  // OutputSpec's defaults are the table's ImageNet figures.
  const OutputSpec spec;
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(spec.mean[c], static_cast<float>(kImageNetMean[c]));
    EXPECT_EQ(spec.std[c], static_cast<float>(kImageNetStd[c]));
  }
}

// Whole-pixel boxes at full scale: what torchvision computes, bar rounding
// ties (see resample.h): a level here and there.
TEST(ImageDecodeTest, FullScaleDecodingMatchesPilDecodeThenResize) {
  std::mt19937 rng(1);
  DecodeScratch scratch;
  for (uint32_t channels : {3u, 1u, 4u}) {
    for (const JpegOptions& kind : Kinds()) {
      JpegOptions o = kind;
      o.adobe_cmyk = channels == 4;
      const std::string jpeg = EncodeJpeg(SyntheticPhoto(331, 253, rng() % 100, channels), o);
      const Pixels full = ReferenceDecode(jpeg);
      for (int trial = 0; trial < 6; ++trial) {
        const uint32_t w = 8 + rng() % 324, h = 8 + rng() % 246;
        const uint32_t left = rng() % (332 - w), top = rng() % (254 - h);
        const uint32_t ow = trial % 2 ? 224 : 17 + rng() % 200, oh = trial % 2 ? 224 : 17 + rng() % 200;
        std::vector<uint8_t> out(size_t{ow} * oh * 3);
        ASSERT_OK(DecodeJpegInto(jpeg, CropBox{double(left), double(top), double(w), double(h)},
                                 Uint8Hwc(ow, oh, false), &scratch, out.data()));
        const Difference d = Compare(FromHwc(out, ow, oh), ReferenceResize(full, left, top, w, h, ow, oh));
        // Rounding ties only, as resample_test.cc explains.
        EXPECT_LE(d.max, 2);
        EXPECT_LE(d.mean, 0.06) << channels << " channels, box " << w << "x" << h << " to " << ow << "x" << oh
                                << ": " << d.differing << " of " << d.values << " values differ";
      }
    }
  }
}

TEST(ImageDecodeTest, TheWholeImageAtItsSizeIsTheFullDecode) {
  DecodeScratch scratch;
  for (uint32_t channels : {3u, 1u, 4u}) {
    JpegOptions o;
    o.adobe_cmyk = channels == 4;
    const std::string jpeg = EncodeJpeg(SyntheticPhoto(97, 83, 2, channels), o);
    for (bool scale : {false, true}) {
      std::vector<uint8_t> out(97 * 83 * 3);
      ASSERT_OK(DecodeJpegInto(jpeg, CropBox{0, 0, 97, 83}, Uint8Hwc(97, 83, scale), &scratch, out.data()));
      EXPECT_EQ(Compare(FromHwc(out, 97, 83), ReferenceDecode(jpeg)).max, 0) << channels;
    }
  }
}

// With IDCT scaling the resize starts from the image shrunk by n/8: not
// PIL's pixels, but the same picture.
TEST(ImageDecodeTest, ScaledDecodingIsCloseToFullScale) {
  std::mt19937 rng(2);
  DecodeScratch scratch;
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(900, 700, 3));
  const Pixels full = ReferenceDecode(jpeg);
  for (int trial = 0; trial < 12; ++trial) {
    const uint32_t w = 100 + rng() % 800, h = 100 + rng() % 600;
    const uint32_t left = rng() % (901 - w), top = rng() % (701 - h);
    const uint32_t ow = 56 + rng() % 200, oh = 56 + rng() % 200;
    std::vector<uint8_t> out(size_t{ow} * oh * 3);
    ASSERT_OK(DecodeJpegInto(jpeg, CropBox{double(left), double(top), double(w), double(h)}, Uint8Hwc(ow, oh, true),
                             &scratch, out.data()));
    const Difference d = Compare(FromHwc(out, ow, oh), ReferenceResize(full, left, top, w, h, ow, oh));
    EXPECT_LT(d.mean, 2.0) << "box " << w << "x" << h << " to " << ow << "x" << oh;
  }
}

// The IDCT shrinks a box by 2, 4 or 8 only while it stays 1.5 times the
// output on both axes (decode_plan.h: nearer 1, the IDCT's low-pass, not
// PIL's antialiasing, makes most of the shrink and the result strays 1.3-4
// levels from PIL's); never with scale_in_idct false.
TEST(ImageDecodeTest, TheIdctScaleKeepsTheBoxOneAndAHalfTimesTheOutput) {
  const auto scale = [](double w, double h, uint32_t ow, uint32_t oh, bool on = true) {
    return ChooseIdctScale(CropBox{3, 5, w, h}, Uint8Hwc(ow, oh, on));
  };
  // 224 px: 1/2 from 672 (336 = 1.5 x 224), 1/4 from 1344, 1/8 from 2688.
  EXPECT_EQ(scale(224, 224, 224, 224), 8u);
  EXPECT_EQ(scale(448, 448, 224, 224), 8u);  // 1/2 would leave the resize nothing to shrink
  EXPECT_EQ(scale(671.9, 700, 224, 224), 8u);
  EXPECT_EQ(scale(672, 672, 224, 224), 4u);
  EXPECT_EQ(scale(1343, 2000, 224, 224), 4u);
  EXPECT_EQ(scale(1344, 1344, 224, 224), 2u);
  EXPECT_EQ(scale(2688, 2688, 224, 224), 1u);
  EXPECT_EQ(scale(2688, 700, 224, 224), 4u);  // the shorter axis decides
  EXPECT_EQ(scale(4000, 4000, 224, 224, false), 8u);
  // A non-square output, each axis against its own side: 32 x 128 text lines.
  EXPECT_EQ(scale(384, 96, 128, 32), 4u);
  EXPECT_EQ(scale(384, 95, 128, 32), 8u);
  // Any box and output: the scale leaves 1.5 times the output, and is the
  // smallest that does.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const double w = 1 + rng() % 4000, h = 1 + rng() % 4000;
    const uint32_t ow = 1 + rng() % 400, oh = 1 + rng() % 400;
    const uint32_t n = scale(w, h, ow, oh);
    ASSERT_TRUE(n == 1 || n == 2 || n == 4 || n == 8) << n;
    const auto fits = [&](uint32_t m) { return w * m / 8 >= 1.5 * ow && h * m / 8 >= 1.5 * oh; };
    EXPECT_TRUE(n == 8 || fits(n)) << w << "x" << h << " -> " << ow << "x" << oh << ": " << n;
    EXPECT_TRUE(n == 1 || !fits(n / 2)) << w << "x" << h << " -> " << ow << "x" << oh << ": " << n;
  }
  // The plan decodes at that scale: the region is the box shrunk by n/8.
  JpegHeader header;
  header.width = 3000;
  header.height = 2000;
  JpegDecodePlan plan;
  PlanJpegDecode(header, CropBox{800, 400, 1400, 1500}, Uint8Hwc(224, 224, true), &plan);
  EXPECT_EQ(plan.request.scale_num, 2u);
  EXPECT_EQ(plan.request.x_begin, 200u);
  EXPECT_EQ(plan.request.x_end, 550u);
  EXPECT_DOUBLE_EQ(plan.geometry.box_width, 350);
  EXPECT_DOUBLE_EQ(plan.geometry.box_height, 375);
}

TEST(ImageDecodeTest, FlipAndFloatOutput) {
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(200, 150, 4));
  DecodeScratch scratch;
  const CropBox box{20, 10, 150, 120};
  std::vector<uint8_t> plain(64 * 48 * 3);
  ASSERT_OK(DecodeJpegInto(jpeg, box, Uint8Hwc(64, 48, true), &scratch, plain.data()));
  OutputSpec spec = Uint8Hwc(64, 48, true);
  spec.flip = true;
  spec.type = PixelType::kFloat32;
  spec.layout = PixelLayout::kCHW;
  std::vector<float> f(64 * 48 * 3);
  ASSERT_OK(DecodeJpegInto(jpeg, box, spec, &scratch, f.data()));
  int bad = 0;
  for (uint32_t y = 0; y < 48; ++y) {
    for (uint32_t x = 0; x < 64; ++x) {
      for (uint32_t c = 0; c < 3; ++c) {
        const float want = (plain[(y * 64 + (63 - x)) * 3 + c] / 255.0f - spec.mean[c]) / spec.std[c];
        bad += std::fabs(f[(c * 48 + y) * 64 + x] - want) > 1e-5f;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(ImageDecodeTest, ErrorsAreStatusesThatSayWhat) {
  DecodeScratch scratch;
  std::vector<uint8_t> out(64 * 64 * 3);
  const OutputSpec spec = Uint8Hwc(32, 32, true);
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(64, 64, 5));
  struct Case {
    std::string data;
    CropBox box;
    Status::Code code;
    const char* says;
  };
  std::string bomb = "\xFF\xD8\xFF\xC0";
  bomb += std::string("\x00\x11\x08\x35\x00\x35\x00\x03\x01\x11\x00\x02\x11\x00\x03\x11\x00", 17);  // 13568 x 13568
  std::string twelve = jpeg;
  twelve[twelve.find("\xFF\xC0") + 4] = 12;  // 12-bit samples
  for (const Case& c : {
           Case{"not a jpeg", CropBox{0, 0, 8, 8}, Status::Code::kDecodeError, "not a JPEG"},
           Case{jpeg.substr(0, jpeg.size() / 2), CropBox{0, 0, 64, 64}, Status::Code::kDecodeError, "truncated"},
           Case{bomb, CropBox{0, 0, 8, 8}, Status::Code::kDecodeError, "more than the limit"},
           Case{twelve, CropBox{0, 0, 8, 8}, Status::Code::kDecodeError, "12-bit"},
           Case{jpeg, CropBox{0, 0, 65, 64}, Status::Code::kInvalidArgument, "not inside the 64x64 image"},
           Case{jpeg, CropBox{10, 10, 0, 5}, Status::Code::kInvalidArgument, "crop box"},
       }) {
    Status s = DecodeJpegInto(c.data, c.box, spec, &scratch, out.data());
    EXPECT_EQ(s.code(), c.code) << s.ToString();
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
  }
  OutputSpec zero = spec;
  zero.width = 0;
  EXPECT_EQ(DecodeJpegInto(jpeg, CropBox{0, 0, 8, 8}, zero, &scratch, out.data()).code(),
            Status::Code::kInvalidArgument);
}

// Damage below the box (here a marker libjpeg does not know in place of
// the end-of-image marker) is refused as PIL, which decodes every row,
// refuses it; a cut below the box is a truncation.
TEST(ImageDecodeTest, DamageBelowTheBoxIsRefusedAsPilRefusesIt) {
  DecodeScratch scratch;
  std::vector<uint8_t> out(32 * 32 * 3);
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(64, 64, 5));
  const std::string damaged = jpeg.substr(0, jpeg.size() - 2) + "\xFF\x05";
  const std::string cut = jpeg.substr(0, jpeg.size() - 40);
  for (bool scale : {false, true}) {
    const OutputSpec spec = Uint8Hwc(16, 16, scale);
    for (const CropBox& box : {CropBox{0, 0, 64, 64}, CropBox{20, 40, 30, 24}, CropBox{0, 0, 64, 63.5},
                               CropBox{0, 0, 64, 16}, CropBox{5, 1, 3, 2}}) {
      EXPECT_OK(DecodeJpegInto(jpeg, box, spec, &scratch, out.data()));
      Status s = DecodeJpegInto(damaged, box, spec, &scratch, out.data());
      EXPECT_EQ(s.code(), Status::Code::kDecodeError) << box.top + box.height;
      EXPECT_NE(s.message().find("Unsupported marker"), std::string::npos) << s.message();
      s = DecodeJpegInto(cut, box, spec, &scratch, out.data());
      EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
    }
  }
}

TEST(ImageDecodeTest, EveryTruncationIsAStatusNeverACrash) {
  JpegOptions p;
  p.progressive = true;
  for (const std::string& jpeg : {EncodeJpeg(SyntheticPhoto(40, 24, 6)), EncodeJpeg(SyntheticPhoto(40, 24, 6), p)}) {
    DecodeScratch scratch;
    std::vector<uint8_t> out(16 * 16 * 3);
    for (size_t n = 0; n < jpeg.size(); ++n) {
      Status s = DecodeJpegInto(jpeg.substr(0, n), CropBox{0, 0, 40, 24}, Uint8Hwc(16, 16, true), &scratch,
                                out.data());
      if (!s.ok()) {
        EXPECT_EQ(s.code(), Status::Code::kDecodeError) << n << ": " << s.ToString();
      }
    }
  }
}

TEST(ImageDecodeTest, ABatchFillsConsecutiveOutputsAndNamesItsFailure) {
  std::vector<std::string> jpegs;
  std::vector<CropBox> boxes;
  for (uint32_t i = 0; i < 5; ++i) {
    jpegs.push_back(EncodeJpeg(SyntheticPhoto(80 + 10 * i, 60 + 7 * i, i)));
    boxes.push_back(CropBox{double(i), double(2 * i), 50, 40});
  }
  const bool flips[5] = {false, true, false, true, true};
  OutputSpec spec;
  spec.width = 24;
  spec.height = 20;
  DecodeScratch scratch;
  std::vector<std::string_view> views(jpegs.begin(), jpegs.end());
  std::vector<uint8_t> batch(5 * spec.bytes());
  size_t failed = 99;
  ASSERT_OK(DecodeJpegBatch(views.data(), boxes.data(), flips, 5, spec, &scratch, batch.data(), &failed));
  for (size_t i = 0; i < 5; ++i) {
    OutputSpec one = spec;
    one.flip = flips[i];
    std::vector<uint8_t> single(spec.bytes());
    ASSERT_OK(DecodeJpegInto(jpegs[i], boxes[i], one, &scratch, single.data()));
    EXPECT_TRUE(std::equal(single.begin(), single.end(), batch.begin() + i * spec.bytes())) << i;
  }

  const std::string broken = jpegs[3].substr(0, jpegs[3].size() / 3);
  views[3] = broken;
  Status s = DecodeJpegBatch(views.data(), boxes.data(), flips, 5, spec, &scratch, batch.data(), &failed);
  EXPECT_EQ(s.code(), Status::Code::kDecodeError);
  EXPECT_EQ(failed, 3u);
  EXPECT_EQ(s.reason(), Status::Reason::kBatchItem);
  EXPECT_EQ(s.reason_detail(), 3u);
  EXPECT_EQ(s.message().rfind("image 3 of 5: ", 0), 0u) << s.message();
}

}  // namespace
}  // namespace lmdbloader
