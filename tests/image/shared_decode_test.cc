// DecodeJpegCrops and ResampleRgbCrops: several crops of one decode, each
// against the single-crop path (DecodeJpegInto, ResampleRgbInto) with the
// same box and spec.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "image_test_util.h"
#include "lmdbloader/image_decode.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::EncodeJpeg;
using testing::JpegOptions;
using testing::SyntheticPhoto;

// A random multi-crop recipe's crops of a width x height image: two large
// ones to 64 px and six small ones to 24 px, some flipped, some with colour
// ops, float32 CHW or uint8 HWC.
std::vector<SharedCrop> Crops(uint32_t width, uint32_t height, bool scale, bool uint8, std::mt19937* rng) {
  std::vector<SharedCrop> crops(8);
  for (size_t k = 0; k < crops.size(); ++k) {
    SharedCrop& c = crops[k];
    const double part = k < 2 ? 0.4 + 0.6 * ((*rng)() % 100) / 100.0 : 0.05 + 0.3 * ((*rng)() % 100) / 100.0;
    c.box.width = std::max(1.0, std::floor(width * std::sqrt(part)));
    c.box.height = std::max(1.0, std::floor(height * std::sqrt(part)));
    c.box.left = (*rng)() % (width - uint32_t(c.box.width) + 1);
    c.box.top = (*rng)() % (height - uint32_t(c.box.height) + 1);
    c.spec.width = c.spec.height = k < 2 ? 64 : 24;
    c.spec.scale_in_idct = scale;
    c.spec.interpolation = k % 3 ? Interpolation::kBicubic : Interpolation::kBilinear;
    c.spec.flip = (*rng)() % 2;
    if (uint8) {
      c.spec.type = PixelType::kUint8;
      c.spec.layout = PixelLayout::kHWC;
    }
    if (k % 2) {
      c.spec.colour.count = 3;
      c.spec.colour.ops[0] = {ColourOpKind::kBrightness, 1.3f, 0};
      c.spec.colour.ops[1] = {ColourOpKind::kHue, -0.1f, 0};
      c.spec.colour.ops[2] = {ColourOpKind::kBlur, 0.8f, 5};
    }
  }
  return crops;
}

// Each crop's output, decoded together, then alone.
// `close`: uint8 crops that may be decoded at another scale than alone,
// within that many levels on average.
void ExpectEachCropAlone(const std::string& jpeg, std::vector<SharedCrop> crops, double close = 0) {
  std::vector<std::vector<uint8_t>> together(crops.size());
  for (size_t k = 0; k < crops.size(); ++k) {
    together[k].assign(crops[k].spec.bytes(), 0xAB);
    crops[k].out = together[k].data();
  }
  DecodeScratch scratch;
  ASSERT_OK(DecodeJpegCrops(jpeg, crops.data(), crops.size(), &scratch));
  for (size_t k = 0; k < crops.size(); ++k) {
    std::vector<uint8_t> alone(crops[k].spec.bytes(), 0xCD);
    ASSERT_OK(DecodeJpegInto(jpeg, crops[k].box, crops[k].spec, &scratch, alone.data()));
    if (close > 0) {
      double sum = 0;
      for (size_t i = 0; i < alone.size(); ++i) sum += std::abs(int(alone[i]) - int(together[k][i]));
      EXPECT_LT(sum / alone.size(), close) << "crop " << k;
      continue;
    }
    EXPECT_EQ(alone, together[k]) << "crop " << k;
  }
}

TEST(SharedDecodeTest, EachCropIsTheSingleCropPathAtFullScale) {
  std::mt19937 rng(3);
  for (uint32_t channels : {3u, 1u, 4u}) {
    JpegOptions o;
    o.adobe_cmyk = channels == 4;
    o.progressive = channels == 3;
    const std::string jpeg = EncodeJpeg(SyntheticPhoto(301, 227, 5, channels), o);
    for (bool uint8 : {false, true}) ExpectEachCropAlone(jpeg, Crops(301, 227, false, uint8, &rng));
  }
}

// With IDCT scaling the image is decoded once at the largest scale a crop
// needs: a crop whose own scale is that one is the single-crop path's.
TEST(SharedDecodeTest, ScaledCropsAgreeWhereTheirScaleIsTheDecodesOne) {
  std::mt19937 rng(4);
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(900, 640, 6));
  // Every box 384-767 px to 64: each alone is decoded at 2/8 (kIdctMinShrink
  // times the output at 2/8, not at 1/8).
  std::vector<SharedCrop> crops(4);
  for (size_t k = 0; k < crops.size(); ++k) {
    crops[k].box = CropBox{double(10 + 30 * k), double(5 + 20 * k), double(400 + 50 * k), double(400 + 40 * k)};
    crops[k].spec.width = crops[k].spec.height = 64;
    crops[k].spec.flip = k % 2;
  }
  ExpectEachCropAlone(jpeg, crops);
  // Mixed scales decode; the crops stay close to a full-scale decode.
  crops = Crops(900, 640, true, true, &rng);
  ExpectEachCropAlone(jpeg, crops, 3.0);
}

TEST(SharedDecodeTest, RgbPixelsAreEachCropOfResampleRgbInto) {
  std::mt19937 rng(5);
  const testing::Pixels photo = SyntheticPhoto(173, 211, 7);
  std::vector<SharedCrop> crops = Crops(173, 211, false, false, &rng);
  std::vector<std::vector<uint8_t>> together(crops.size());
  for (size_t k = 0; k < crops.size(); ++k) {
    together[k].resize(crops[k].spec.bytes());
    crops[k].out = together[k].data();
  }
  DecodeScratch scratch;
  ASSERT_OK(ResampleRgbCrops(photo.data.data(), 173, 211, 173 * 3, crops.data(), crops.size(), &scratch));
  for (size_t k = 0; k < crops.size(); ++k) {
    std::vector<uint8_t> alone(crops[k].spec.bytes());
    ASSERT_OK(ResampleRgbInto(photo.data.data(), 173, 211, 173 * 3, crops[k].box, crops[k].spec, &scratch,
                              alone.data()));
    EXPECT_EQ(alone, together[k]) << "crop " << k;
  }
}

TEST(SharedDecodeTest, AOnePixelImageGivesEveryCropItsPixel) {
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(1, 1, 8));
  std::vector<SharedCrop> crops(10);
  for (SharedCrop& c : crops) {
    c.box = CropBox{0, 0, 1, 1};
    c.spec.width = c.spec.height = 5;
    c.spec.colour.count = 1;
    c.spec.colour.ops[0] = {ColourOpKind::kBlur, 1.0f, 9};
  }
  ExpectEachCropAlone(jpeg, crops);
}

TEST(SharedDecodeTest, BadCallsAreRefusedNamingTheCrop) {
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(64, 48, 9));
  DecodeScratch scratch;
  std::vector<uint8_t> out(224 * 224 * 3 * 4);
  std::vector<SharedCrop> crops(kMaxCropsPerDecode + 1);
  for (SharedCrop& c : crops) {
    c.box = CropBox{0, 0, 10, 10};
    c.out = out.data();
  }
  Status s = DecodeJpegCrops(jpeg, crops.data(), 0, &scratch);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  s = DecodeJpegCrops(jpeg, crops.data(), crops.size(), &scratch);
  EXPECT_NE(s.ToString().find("65 crops of one image; 1 to 64"), std::string::npos) << s.ToString();
  crops[2].box = CropBox{60, 0, 10, 10};
  s = DecodeJpegCrops(jpeg, crops.data(), 3, &scratch);
  EXPECT_NE(s.ToString().find("crop 2 of 3: crop box"), std::string::npos) << s.ToString();
  crops[1].spec.width = 0;
  s = DecodeJpegCrops(jpeg, crops.data(), 3, &scratch);
  EXPECT_NE(s.ToString().find("crop 1 of 3: output size"), std::string::npos) << s.ToString();
  EXPECT_EQ(DecodeJpegCrops("not a jpeg", crops.data(), 1, &scratch).code(), Status::Code::kDecodeError);
  EXPECT_EQ(DecodeJpegCrops(jpeg.substr(0, jpeg.size() / 2), crops.data(), 1, &scratch).code(),
            Status::Code::kDecodeError);
  // A region larger than the scratch's cap.
  DecodeScratch small(1 << 12);
  crops[0].box = CropBox{0, 0, 64, 48};
  s = DecodeJpegCrops(jpeg, crops.data(), 1, &small);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
}

}  // namespace
}  // namespace lmdbloader
