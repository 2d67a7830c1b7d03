#include "image/jpeg_decoder.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "image_test_util.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::EncodeJpeg;
using testing::JpegOptions;
using testing::Pixels;
using testing::ReferenceDecode;
using testing::SyntheticPhoto;

// Keeps the rows the decoder delivers, as RGB.
class CollectSink : public RowSink {
 public:
  bool Begin(uint32_t x0, uint32_t width, JpegPixels format) noexcept override {
    x0_ = x0;
    width_ = width;
    format_ = format;
    began_ = true;
    return true;
  }
  void Row(const uint8_t* p) noexcept override {
    for (uint32_t x = 0; x < width_; ++x) {
      uint8_t rgb[3];
      if (format_ == JpegPixels::kCmykInverted) {
        testing::CmykToRgb(p + size_t{x} * 4, rgb);
      } else if (format_ == JpegPixels::kGray) {
        rgb[0] = rgb[1] = rgb[2] = p[x];
      } else {
        std::copy(p + size_t{x} * 4, p + size_t{x} * 4 + 3, rgb);
      }
      rows_.insert(rows_.end(), rgb, rgb + 3);
    }
    ++count_;
  }
  uint8_t at(uint32_t x, uint32_t y, uint32_t c) const { return rows_[(size_t{y} * width_ + x - x0_) * 3 + c]; }

  uint32_t x0_ = 0, width_ = 0, count_ = 0;
  JpegPixels format_ = JpegPixels::kRgbx;
  bool began_ = false;
  std::vector<uint8_t> rows_;
};

struct Encoding {
  const char* name;
  uint32_t channels;
  JpegOptions options;
};

std::vector<Encoding> Encodings() {
  std::vector<Encoding> e;
  for (const char* s : {"420", "422", "444", "440"}) {
    JpegOptions o;
    o.subsampling = s;
    e.push_back({s, 3, o});
  }
  JpegOptions o;
  o.progressive = true;
  e.push_back({"progressive", 3, o});
  o = JpegOptions();
  o.restart_rows = 1;
  e.push_back({"restart markers", 3, o});
  o = JpegOptions();
  o.arithmetic = true;
  o.progressive = true;
  e.push_back({"arithmetic progressive", 3, o});
  e.push_back({"gray", 1, JpegOptions()});
  o = JpegOptions();
  o.adobe_cmyk = true;
  e.push_back({"cmyk", 4, o});
  o = JpegOptions();
  o.ycck = true;
  e.push_back({"ycck", 4, o});
  return e;
}

Status Decode(const std::string& jpeg, const JpegRegionRequest& r, RowSink* sink) {
  JpegHeader h;
  LMDBLOADER_RETURN_IF_ERROR(ParseJpegHeader(jpeg, &h));
  bool refused = false;
  Status s = DecodeJpegRegion(jpeg, h, r, sink, &refused);
  EXPECT_FALSE(refused);
  return s;
}

// Any region, at any of the scales used, holds exactly the pixels of a full
// decode at that scale: the margins around jpeg_crop_scanline's region keep
// the fancy upsampler's edges out of it, and jpeg_skip_scanlines keeps its
// context rows.
TEST(JpegDecoderTest, RegionsEqualTheSameRegionOfAFullDecode) {
  std::mt19937 rng(7);
  for (const Encoding& e : Encodings()) {
    const std::string jpeg = EncodeJpeg(SyntheticPhoto(203, 157, 11, e.channels), e.options);
    ASSERT_FALSE(jpeg.empty()) << e.name;
    for (uint32_t num : {8u, 4u, 2u, 1u}) {
      const Pixels full = ReferenceDecode(jpeg, num);
      ASSERT_EQ(full.width, JpegScaledSize(203, num));
      for (int trial = 0; trial < 25; ++trial) {
        JpegRegionRequest r;
        r.scale_num = num;
        r.x_begin = rng() % full.width;
        r.x_end = r.x_begin + 1 + rng() % (full.width - r.x_begin);
        r.y_begin = rng() % full.height;
        r.y_end = r.y_begin + 1 + rng() % (full.height - r.y_begin);
        CollectSink sink;
        ASSERT_OK(Decode(jpeg, r, &sink));
        ASSERT_LE(sink.x0_, r.x_begin);
        ASSERT_GE(sink.x0_ + sink.width_, r.x_end);
        ASSERT_EQ(sink.count_, r.y_end - r.y_begin);
        EXPECT_EQ(sink.format_, e.channels == 4 ? JpegPixels::kCmykInverted : JpegPixels::kRgbx);
        int mismatches = 0;
        for (uint32_t y = r.y_begin; y < r.y_end; ++y) {
          for (uint32_t x = r.x_begin; x < r.x_end; ++x) {
            for (uint32_t c = 0; c < 3; ++c) mismatches += sink.at(x, y - r.y_begin, c) != full.at(x, y, c);
          }
        }
        EXPECT_EQ(mismatches, 0) << e.name << " scale " << num << "/8, columns [" << r.x_begin << ", " << r.x_end
                                 << "), rows [" << r.y_begin << ", " << r.y_end << ")";
      }
    }
  }
}

// gray: a gray JPEG's own samples, a colour JPEG's Y, within a level of
// PIL's convert("L") of the RGB it decodes to (L = 0.299 R + 0.587 G +
// 0.114 B, the luma the JPEG stores) but where the RGB was clipped; CMYK
// stays CMYK.
TEST(JpegDecoderTest, GrayDeliversTheLumaAlone) {
  for (const Encoding& e : Encodings()) {
    const std::string jpeg = EncodeJpeg(SyntheticPhoto(203, 157, 11, e.channels), e.options);
    for (uint32_t num : {8u, 2u}) {
      JpegRegionRequest r;
      r.scale_num = num;
      r.x_begin = 5;
      r.x_end = JpegScaledSize(203, num) - 3;
      r.y_begin = 4;
      r.y_end = JpegScaledSize(157, num) - 2;
      CollectSink rgb, gray;
      ASSERT_OK(Decode(jpeg, r, &rgb));
      r.gray = true;
      ASSERT_OK(Decode(jpeg, r, &gray));
      EXPECT_EQ(gray.format_, e.channels == 4 ? JpegPixels::kCmykInverted : JpegPixels::kGray) << e.name;
      ASSERT_EQ(gray.count_, rgb.count_);
      uint64_t off = 0, far = 0, pixels = 0;
      for (uint32_t y = 0; y < gray.count_; ++y) {
        for (uint32_t x = r.x_begin; x < r.x_end; ++x) {
          const int l = (rgb.at(x, y, 0) * 19595 + rgb.at(x, y, 1) * 38470 + rgb.at(x, y, 2) * 7471 + 0x8000) >> 16;
          const int d = std::abs(int(gray.at(x, y, 0)) - (e.channels == 4 ? int(rgb.at(x, y, 0)) : l));
          off += d != 0;
          far += d > 1;
          ++pixels;
        }
      }
      if (e.channels == 1) {
        EXPECT_EQ(off, 0u) << e.name;  // the samples themselves
      }
      EXPECT_LE(far * 200, pixels) << e.name << " " << num << "/8: " << far << " of " << pixels << " off by more than 1";
    }
  }
}

TEST(JpegDecoderTest, ARegionOutsideTheScaledImageIsInvalid) {
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(64, 48, 1));
  for (const JpegRegionRequest& r : {JpegRegionRequest{8, 0, 65, 0, 48}, JpegRegionRequest{8, 10, 10, 0, 48},
                                     JpegRegionRequest{4, 0, 33, 0, 24}, JpegRegionRequest{8, 0, 64, 47, 49},
                                     JpegRegionRequest{9, 0, 8, 0, 8}, JpegRegionRequest{0, 0, 8, 0, 8}}) {
    CollectSink sink;
    JpegHeader h;
    ASSERT_OK(ParseJpegHeader(jpeg, &h));
    bool refused;
    Status s = DecodeJpegRegion(jpeg, h, r, &sink, &refused);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
    EXPECT_FALSE(sink.began_);
  }
}

// Pillow raises "image file is truncated" when the data ends before the
// last row. A region above the cut finds it too: the rest of the data holds
// no marker ending the scan.
TEST(JpegDecoderTest, TruncatedDataIsAnErrorWhereverTheRegion) {
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(96, 160, 4));
  const std::string half = jpeg.substr(0, jpeg.size() / 2);
  for (const JpegRegionRequest& r : {JpegRegionRequest{8, 0, 96, 0, 16}, JpegRegionRequest{8, 0, 96, 0, 160},
                                     JpegRegionRequest{8, 0, 96, 0, 16, true}}) {
    CollectSink sink;
    Status s = Decode(half, r, &sink);
    EXPECT_EQ(s.code(), Status::Code::kDecodeError) << r.y_end;
    EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
  }
  // Without its end-of-image marker: the decoder reads ahead of the last
  // block, into the missing bytes, as Pillow's does.
  CollectSink top;
  EXPECT_NE(Decode(jpeg.substr(0, jpeg.size() - 2), JpegRegionRequest{8, 0, 96, 0, 16}, &top).message().find(
                "truncated"),
            std::string::npos);

  // A progressive JPEG holds every row in every scan: any truncation is fatal.
  JpegOptions p;
  p.progressive = true;
  const std::string prog = EncodeJpeg(SyntheticPhoto(96, 160, 4), p);
  CollectSink first;
  Status s = Decode(prog.substr(0, prog.size() - 40), JpegRegionRequest{8, 0, 96, 0, 8}, &first);
  EXPECT_EQ(s.code(), Status::Code::kDecodeError);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
}

// What Pillow (libjpeg with an error manager that ignores warnings, then
// jpeg_finish_decompress) makes of damage after the rows, checked against
// Pillow 13 by tests/python/test_image_decode_damaged.py. With a restart
// marker after every MCU row, a box ends where an interval ends and libjpeg
// has read that interval's marker before the decoder looks past the box.
class DamageAfterTheLastRow : public ::testing::TestWithParam<int> {};

TEST_P(DamageAfterTheLastRow, IsJudgedAsPillowJudgesIt) {
  JpegOptions options;
  options.restart_rows = GetParam();
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(96, 64, 8), options);
  ASSERT_EQ(jpeg.substr(jpeg.size() - 2), "\xFF\xD9");
  if (options.restart_rows > 0) {
    ASSERT_NE(jpeg.find("\xFF\xDD"), std::string::npos);  // DRI
  }
  const std::string body = jpeg.substr(0, jpeg.size() - 2);
  // One byte of the last MCU row's entropy data changed, neither made nor
  // unmade a marker: libjpeg warns at most.
  std::string flipped = body;
  size_t at = body.size() - 12;
  while (uint8_t(body[at - 1]) == 0xFF || uint8_t(body[at]) == 0xFF || uint8_t(body[at] ^ 0x5A) == 0xFF) --at;
  flipped[at] = char(body[at] ^ 0x5A);
  // A marker inside the scan: without restart intervals Pillow refuses it
  // after the scan; with them libjpeg resyncs at the next restart (warnings
  // only) and Pillow takes the image.
  const char* marker_in_scan = options.restart_rows > 0 ? nullptr : "Unsupported marker type 0x05";
  struct Case {
    std::string data;
    const char* error;  // nullptr: decodes
  };
  for (const Case& c : {
           Case{jpeg, nullptr},
           Case{body + "\x12\x34\x56\xFF\xD9", nullptr},  // extraneous bytes: a warning
           Case{jpeg + "trailing bytes", nullptr},           // after the end of the image
           Case{body + "\xFF\xC4", nullptr},  // a table marker whose length the data lacks: Pillow stops there
           Case{body + "\xFF\x05", "Unsupported marker type 0x05"},
           Case{body + "\xFF\xC0", "two SOF markers"},
           Case{body + "\xFF\xD8", "SOI"},
           Case{body.substr(0, body.size() / 2) + "\xFF\xD9", nullptr},  // the scan ends early: grey rows
           Case{body.substr(0, body.size() * 2 / 3) + "\xFF\x05" + body.substr(body.size() * 2 / 3 + 2) + "\xFF\xD9",
                marker_in_scan},
           Case{flipped + "\xFF\xD9", nullptr},
           Case{flipped + "\xFF\x05", "Unsupported marker type 0x05"},
       }) {
    CollectSink all;
    Status s = Decode(c.data, JpegRegionRequest{8, 0, 96, 0, 64, true}, &all);
    if (c.error == nullptr) {
      EXPECT_OK(s);
      EXPECT_EQ(all.count_, 64u);
    } else {
      EXPECT_EQ(s.code(), Status::Code::kDecodeError) << c.error;
      EXPECT_NE(s.message().find(c.error), std::string::npos) << s.message();
    }
    // A region that stops above the damage gives the same verdict, whether
    // it ends inside an MCU row or where one (and a restart interval) ends.
    for (uint32_t rows : {8u, 16u, 32u}) {
      CollectSink top;
      EXPECT_EQ(Decode(c.data, JpegRegionRequest{8, 0, 96, 0, rows}, &top).code(), s.code())
          << s.ToString() << " rows " << rows;
      EXPECT_EQ(top.count_, rows);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(JpegDecoderTest, DamageAfterTheLastRow, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return i.param == 0 ? std::string("NoRestarts") : std::string("RestartEveryRow");
                         });

// The rows read to the end are the rows: skipping below the region and
// reading on changes none delivered, at every scale.
TEST(JpegDecoderTest, ReadingToTheEndDeliversTheSameRows) {
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(80, 72, 2));
  for (uint32_t num : {1u, 2u, 4u, 8u}) {
    const uint32_t w = JpegScaledSize(80, num), h = JpegScaledSize(72, num);
    CollectSink stop, to_end;
    EXPECT_OK(Decode(jpeg, JpegRegionRequest{num, 0, w, 1, h / 2}, &stop));
    EXPECT_OK(Decode(jpeg, JpegRegionRequest{num, 0, w, 1, h / 2, true}, &to_end));
    EXPECT_EQ(stop.rows_, to_end.rows_) << num;
    EXPECT_EQ(to_end.count_, h / 2 - 1) << num;
  }
}

TEST(JpegDecoderTest, StoppingBeforeTheLastRowIsNotATruncation) {
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(64, 64, 5));
  CollectSink sink;
  EXPECT_OK(Decode(jpeg, JpegRegionRequest{8, 0, 64, 0, 1}, &sink));
  EXPECT_EQ(sink.count_, 1u);
}

// The scans of a progressive JPEG, each as its SOS segment and entropy data.
std::vector<std::string> Scans(const std::string& jpeg, size_t* first, size_t* end) {
  std::vector<std::string> scans;
  size_t at = 2;
  *first = *end = 0;
  while (at + 4 <= jpeg.size()) {
    const uint8_t m = uint8_t(jpeg[at + 1]);
    if (m == 0xD9) break;
    const size_t length = (size_t(uint8_t(jpeg[at + 2])) << 8) | uint8_t(jpeg[at + 3]);
    size_t next = at + 2 + length;
    if (m == 0xDA) {
      // Entropy data runs to the next marker that is neither a stuffed 0 nor a restart.
      while (next + 1 < jpeg.size() &&
             !(uint8_t(jpeg[next]) == 0xFF && jpeg[next + 1] != 0 && (uint8_t(jpeg[next + 1]) & 0xF8) != 0xD0)) {
        ++next;
      }
      if (scans.empty()) *first = at;
      scans.push_back(jpeg.substr(at, next - at));
      *end = next;
    }
    at = next;
  }
  return scans;
}

TEST(JpegDecoderTest, AProgressiveJpegWithTooManyScansIsRefused) {
  JpegOptions p;
  p.progressive = true;
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(32, 32, 6), p);
  size_t first, end;
  const std::vector<std::string> scans = Scans(jpeg, &first, &end);
  ASSERT_GT(scans.size(), 3u);
  // The first (DC) scan again and again: libjpeg only warns of a bogus
  // progression, and would walk the image once a scan.
  std::string many = jpeg.substr(0, end);
  for (uint32_t i = 0; i < kMaxJpegScans; ++i) many += scans[0];
  many += "\xFF\xD9";
  CollectSink sink;
  Status s = Decode(many, JpegRegionRequest{8, 0, 32, 0, 32}, &sink);
  EXPECT_EQ(s.code(), Status::Code::kDecodeError) << s.ToString();
  EXPECT_NE(s.message().find("scans"), std::string::npos) << s.message();

  // A few repeated scans are tolerated, as Pillow tolerates them.
  std::string some = jpeg.substr(0, end) + scans[0] + scans[0] + "\xFF\xD9";
  CollectSink ok;
  EXPECT_OK(Decode(some, JpegRegionRequest{8, 0, 32, 0, 32}, &ok));
}

// Damage anywhere gives a Status, never a crash (see also the fuzz harness).
TEST(JpegDecoderTest, DamagedBytesNeverCrash) {
  std::mt19937 rng(3);
  for (const Encoding& e : Encodings()) {
    const std::string jpeg = EncodeJpeg(SyntheticPhoto(48, 40, 9, e.channels), e.options);
    for (int trial = 0; trial < 60; ++trial) {
      std::string bad = jpeg;
      for (int k = 0; k < 1 + trial % 4; ++k) bad[2 + rng() % (bad.size() - 2)] = char(rng());
      JpegHeader h;
      if (!ParseJpegHeader(bad, &h).ok() || !h.decodable) continue;
      const uint32_t num = 1u << (rng() % 4);
      const uint32_t w = JpegScaledSize(h.width, num), ht = JpegScaledSize(h.height, num);
      CollectSink sink;
      bool refused;
      Status s = DecodeJpegRegion(bad, h, JpegRegionRequest{num, 0, w, ht / 3, ht}, &sink, &refused);
      if (!s.ok()) {
        EXPECT_TRUE(s.code() == Status::Code::kDecodeError || s.code() == Status::Code::kInvalidArgument)
            << s.ToString();
      }
    }
  }
}

}  // namespace
}  // namespace lmdbloader
