#include "image/jpeg_header.h"

#include <gtest/gtest.h>

#include "image_test_util.h"
#include "lmdbloader/image_decode.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::EncodeJpeg;
using testing::JpegOptions;
using testing::SyntheticPhoto;

// SOI, an APP0-like segment, then a baseline frame header of the given size.
std::string FrameHeader(uint32_t width, uint32_t height, uint8_t marker = 0xC0, uint8_t precision = 8,
                        uint8_t components = 3) {
  std::string s = "\xFF\xD8\xFF\xE0";
  s += std::string("\x00\x06" "abcd", 6);
  s += "\xFF";
  s += char(marker);
  const uint32_t length = 8 + 3 * components;
  s += char(length >> 8);
  s += char(length & 0xFF);
  s += char(precision);
  s += char(height >> 8);
  s += char(height & 0xFF);
  s += char(width >> 8);
  s += char(width & 0xFF);
  s += char(components);
  for (uint8_t c = 0; c < components; ++c) s += std::string{char(c + 1), char(0x11), char(0)};
  return s;
}

TEST(JpegHeaderTest, ReadsTheSizeOfEveryKindOfJpeg) {
  struct Case {
    uint32_t channels;
    JpegOptions options;
    uint8_t marker;
  };
  JpegOptions progressive;
  progressive.progressive = true;
  JpegOptions arithmetic;
  arithmetic.arithmetic = true;
  JpegOptions cmyk;
  cmyk.adobe_cmyk = true;
  for (const Case& c : {Case{3, JpegOptions(), 0xC0}, Case{3, progressive, 0xC2}, Case{3, arithmetic, 0xC9},
                        Case{1, JpegOptions(), 0xC0}, Case{4, cmyk, 0xC0}}) {
    const std::string jpeg = EncodeJpeg(SyntheticPhoto(37, 21, 1, c.channels), c.options);
    ASSERT_FALSE(jpeg.empty());
    JpegHeader h;
    ASSERT_OK(ParseJpegHeader(jpeg, &h));
    EXPECT_EQ(h.width, 37u);
    EXPECT_EQ(h.height, 21u);
    EXPECT_EQ(h.components, c.channels);
    EXPECT_EQ(h.precision, 8u);
    EXPECT_EQ(h.sof_marker, c.marker);
    EXPECT_TRUE(h.decodable);
  }
}

TEST(JpegHeaderTest, ImageInfoOfOtherDataIsOtherAndOk) {
  ImageInfo info;
  ASSERT_OK(ReadImageInfo("\x89PNG\r\n\x1a\n....", &info));
  EXPECT_EQ(info.format, ImageFormat::kOther);
  EXPECT_EQ(info.width, 0u);
  ASSERT_OK(ReadImageInfo("", &info));
  EXPECT_EQ(info.format, ImageFormat::kOther);
  ASSERT_OK(ReadImageInfo(EncodeJpeg(SyntheticPhoto(9, 7, 2)), &info));
  EXPECT_EQ(info.format, ImageFormat::kJpeg);
  EXPECT_EQ(info.width, 9u);
  EXPECT_EQ(info.height, 7u);
  EXPECT_EQ(info.components, 3u);
}

TEST(JpegHeaderTest, VariantsLibjpegTurboDoesNotDecodeAreOther) {
  for (const auto& [marker, precision, components] :
       {std::tuple<uint8_t, uint8_t, uint8_t>{0xC0, 12, 3}, {0xC3, 8, 3}, {0xC5, 8, 3}, {0xCB, 8, 3}, {0xC0, 8, 2}}) {
    ImageInfo info;
    ASSERT_OK(ReadImageInfo(FrameHeader(100, 50, marker, precision, components), &info));
    EXPECT_EQ(info.format, ImageFormat::kOther) << int(marker) << " " << int(precision) << " " << int(components);
    EXPECT_EQ(info.width, 100u);
  }
}

TEST(JpegHeaderTest, SkipsFillBytesAndStandaloneMarkers) {
  std::string s = "\xFF\xD8\xFF\xFF\xFF\x01\xFF\xD0";  // fill bytes, TEM, RST0
  s += FrameHeader(12, 34).substr(2);
  JpegHeader h;
  ASSERT_OK(ParseJpegHeader(s, &h));
  EXPECT_EQ(h.width, 12u);
  EXPECT_EQ(h.height, 34u);
}

TEST(JpegHeaderTest, RefusesAHeaderClaimingMorePixelsThanPilsBombLimit) {
  // 65535 x 2731 = 178,976,085 > 178,956,970; 65535 x 2730 is below.
  ImageInfo info;
  Status s = ReadImageInfo(FrameHeader(65535, 2731), &info);
  EXPECT_EQ(s.code(), Status::Code::kDecodeError) << s.ToString();
  EXPECT_NE(s.message().find("more than the limit"), std::string::npos) << s.message();
  EXPECT_OK(ReadImageInfo(FrameHeader(65535, 2730), &info));
  EXPECT_EQ(info.width, 65535u);
}

TEST(JpegHeaderTest, DamagedHeadersAreDecodeErrors) {
  const std::string good = FrameHeader(10, 10);
  std::vector<std::string> bad = {
      "\xFF\xD8\xFF",                                     // ends at a marker
      FrameHeader(0, 10),                                 // zero width
      FrameHeader(10, 0),                                 // height from a DNL marker
      std::string("\xFF\xD8\xFF\xE0\x00\x01", 6),         // length below 2
      std::string("\xFF\xD8\xFF\xE0\x10\x00xx", 8),       // segment past the end
      std::string("\xFF\xD8\xFF\xDA\x00\x02", 6),         // scan before the frame
      std::string("\xFF\xD8\xFF\xD9", 4),                 // end before the frame
      std::string("\xFF\xD8\xFF\xD8", 4),                 // second SOI
      std::string("\xFF\xD8\xFF\xE0\x00\x02" "A", 7),     // no marker after a segment
      std::string("\xFF\xD8\xFF\xC0\x00\x08\x08\x00\x01\x00\x01\x00", 12),  // no components
      std::string("\xFF\xD8\xFF\xC0\x00\x09\x08\x00\x01\x00\x01\x03\x01", 13),  // too short for 3
  };
  for (size_t n = 0; n < good.size(); ++n) bad.push_back(good.substr(0, n));  // every truncation
  for (const std::string& b : bad) {
    JpegHeader h;
    Status s = ParseJpegHeader(b, &h);
    EXPECT_EQ(s.code(), Status::Code::kDecodeError) << "accepted " << ::testing::PrintToString(b);
  }
}

TEST(JpegHeaderTest, EveryTruncationOfARealJpegIsRefusedOrReadsTheSameSize) {
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(40, 30, 3));
  for (size_t n = 0; n < jpeg.size(); ++n) {
    ImageInfo info;
    Status s = ReadImageInfo(jpeg.substr(0, n), &info);
    if (s.ok() && info.format == ImageFormat::kJpeg) {
      EXPECT_EQ(info.width, 40u);
      EXPECT_EQ(info.height, 30u);
    } else if (!s.ok()) {
      EXPECT_EQ(s.code(), Status::Code::kDecodeError);
    }
  }
}

}  // namespace
}  // namespace lmdbloader
