// SplitImageRecord: every record layout split into its image and target, as
// the image path and the converter read them.
#include "lmdbloader/image_record.h"

#include <gtest/gtest.h>

#include <msgpack.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace lmdbloader {
namespace {

// A record packed with msgpack-cxx: `str_bytes` packs byte strings as str,
// as msgpack-python before 1.0 did.
class Packer {
 public:
  explicit Packer(bool str_bytes = false) : pk_(buf_), str_bytes_(str_bytes) {}
  Packer& Map(uint32_t n) { return pk_.pack_map(n), *this; }
  Packer& Array(uint32_t n) { return pk_.pack_array(n), *this; }
  Packer& Text(const std::string& s) { return pk_.pack(s), *this; }
  Packer& Bytes(const std::string& b) {
    if (str_bytes_) return pk_.pack(msgpack::type::raw_ref(b.data(), static_cast<uint32_t>(b.size()))), *this;
    return pk_.pack(std::vector<char>(b.begin(), b.end())), *this;  // bin
  }
  template <typename T>
  Packer& Value(const T& v) {
    return pk_.pack(v), *this;
  }
  std::string str() const { return std::string(buf_.data(), buf_.size()); }

 private:
  msgpack::sbuffer buf_;
  msgpack::packer<msgpack::sbuffer> pk_;
  bool str_bytes_;
};

const std::string kJpeg("\xff\xd8\xff\xe0 not really a jpeg \xff\xd9", 24);

ImageRecordSpec Spec(RecordLayout layout, std::string field = "image", std::string target = "label",
                     bool frames = false) {
  ImageRecordSpec spec;
  spec.layout = layout;
  spec.field = std::move(field);
  spec.target = std::move(target);
  spec.frames = frames;
  return spec;
}

void ExpectRefused(const ImageRecordSpec& spec, const std::string& record, const std::string& words) {
  ImageRecord r;
  const Status s = SplitImageRecord(spec, record, &r);
  ASSERT_FALSE(s.ok()) << "accepted; expected an error saying '" << words << "'";
  EXPECT_EQ(s.code(), Status::Code::kDecodeError) << s.ToString();
  EXPECT_NE(s.message().find(words), std::string::npos) << "expected '" << words << "' in: " << s.message();
}

TEST(ImageRecordTest, AMsgpackMapGivesItsImageAndLabelAsViews) {
  const std::string record = Packer().Map(3).Text("name").Text("a.jpg").Text("image").Bytes(kJpeg).Text("label")
                                 .Value(7).str();
  ImageRecord r;
  ASSERT_TRUE(SplitImageRecord(Spec(RecordLayout::kMsgpack), record, &r).ok());
  EXPECT_EQ(r.kind, ImageRecord::Kind::kEncoded);
  EXPECT_EQ(r.image, kJpeg);
  EXPECT_GE(r.image.data(), record.data());  // a view into the record, not a copy
  EXPECT_LT(r.image.data(), record.data() + record.size());
  EXPECT_EQ(r.target, ImageRecord::Target::kInteger);
  EXPECT_EQ(r.label, 7);
}

TEST(ImageRecordTest, BytesPackedAsStrByOldMsgpackAreBytes) {
  // CoCLR's published LMDBs: msgpack-python 0.6 wrote the JPEG as str.
  const std::string record = Packer(true).Map(2).Text("image").Bytes(kJpeg).Text("label").Value(-3).str();
  ImageRecord r;
  ASSERT_TRUE(SplitImageRecord(Spec(RecordLayout::kMsgpack), record, &r).ok());
  EXPECT_EQ(r.image, kJpeg);
  EXPECT_EQ(r.label, -3);
  const std::string frames = Packer(true).Array(2).Bytes(kJpeg).Bytes(kJpeg + "x").str();
  ASSERT_TRUE(SplitImageRecord(Spec(RecordLayout::kMsgpack, "frames", "", true), frames, &r).ok());
  ASSERT_EQ(r.kind, ImageRecord::Kind::kFrames);
  ASSERT_EQ(r.frames.size(), 2u);
  EXPECT_EQ(r.frames[1], kJpeg + "x");
  EXPECT_EQ(r.target, ImageRecord::Target::kNone);
}

TEST(ImageRecordTest, AClipsFramesInAFieldOrAsTheRecord) {
  const std::string record = Packer().Map(2).Text("frames").Array(3).Bytes("a").Bytes("b").Bytes("c").Text("label")
                                 .Text("run").str();
  ImageRecord r;
  ASSERT_TRUE(SplitImageRecord(Spec(RecordLayout::kMsgpack, "frames", "label", true), record, &r).ok());
  ASSERT_EQ(r.frames.size(), 3u);
  EXPECT_EQ(r.target, ImageRecord::Target::kValue);  // a class name, not an integer
  EXPECT_EQ(r.value.bytes(), "run");
  ExpectRefused(Spec(RecordLayout::kMsgpack, "frames", "label", true), Packer().Array(0).str(), "no frames");
  ExpectRefused(Spec(RecordLayout::kMsgpack, "frames", "", true), Packer().Array(2).Bytes("a").Value(1).str(),
                "not of byte strings");
  ExpectRefused(Spec(RecordLayout::kMsgpack, "frames", "", true), Packer().Map(1).Text("frames").Bytes("a").str(),
                "holds no list of encoded frames");
}

TEST(ImageRecordTest, WhatIsMissingOrMisplacedIsNamed) {
  const ImageRecordSpec spec = Spec(RecordLayout::kMsgpack);
  ExpectRefused(spec, Packer().Map(2).Text("label").Value(1).Text("jpeg").Bytes(kJpeg).str(),
                "no field 'image' (fields: 'jpeg', 'label')");
  ExpectRefused(spec, Packer().Map(1).Text("image").Bytes(kJpeg).str(), "no field 'label' (fields: 'image')");
  ExpectRefused(spec, Packer().Map(2).Text("image").Value(5).Text("label").Value(1).str(),
                "field 'image' holds an integer, not the image's bytes");
  ExpectRefused(spec, Packer().Array(1).Bytes(kJpeg).str(), "not a msgpack map");
  ExpectRefused(spec, kJpeg, "not msgpack");
  ExpectRefused(spec, kJpeg, "layout 'raw'");
  // A map holding a value lmdbloader does not read (an extension type, as
  // fixext 1), or cut short: the reason, without the 'raw' hint.
  const std::string ext = Packer().Map(2).Text("image").Bytes(kJpeg).Text("label").str() + std::string("\xd4\x01\x00", 3);
  ExpectRefused(spec, ext, "not msgpack (msgpack extension types are not supported)");
  const std::string cut = Packer().Map(2).Text("image").Bytes(kJpeg).str();
  ExpectRefused(spec, cut, "not msgpack");
  for (const std::string& record : {ext, cut}) {
    ImageRecord r;
    EXPECT_EQ(SplitImageRecord(spec, record, &r).message().find("raw"), std::string::npos);
  }
  // A target that may be missing (the converter) is none.
  ImageRecordSpec optional = spec;
  optional.target_required = false;
  ImageRecord r;
  ASSERT_TRUE(SplitImageRecord(optional, Packer().Map(1).Text("image").Bytes(kJpeg).str(), &r).ok());
  EXPECT_EQ(r.target, ImageRecord::Target::kNone);
}

TEST(ImageRecordTest, ARawRecordIsTheImage) {
  ImageRecord r;
  ASSERT_TRUE(SplitImageRecord(Spec(RecordLayout::kRaw), kJpeg, &r).ok());
  EXPECT_EQ(r.kind, ImageRecord::Kind::kEncoded);
  EXPECT_EQ(r.image.data(), kJpeg.data());
  EXPECT_EQ(r.target, ImageRecord::Target::kNone);
  ExpectRefused(Spec(RecordLayout::kRaw), "", "empty");
  // With neither field nor target a msgpack record is not even unpacked.
  ASSERT_TRUE(SplitImageRecord(Spec(RecordLayout::kMsgpack, "", ""), kJpeg, &r).ok());
  EXPECT_EQ(r.kind, ImageRecord::Kind::kWhole);
  EXPECT_EQ(r.unpacked.root().type(), RecordValue::Type::kNil);
}

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>(v | 0x80);
    v >>= 7;
  }
  return out + static_cast<char>(v);
}

std::string Field(uint32_t number, uint32_t wire) { return Varint(uint64_t{number} << 3 | wire); }
std::string BytesField(uint32_t number, const std::string& b) { return Field(number, 2) + Varint(b.size()) + b; }

TEST(ImageRecordTest, CaffeDatumsEncodedRawAndWithoutALabel) {
  ImageRecord r;
  const std::string encoded = BytesField(4, kJpeg) + Field(5, 0) + Varint(9) + Field(7, 0) + Varint(1);
  ASSERT_TRUE(SplitImageRecord(Spec(RecordLayout::kCaffe), encoded, &r).ok());
  EXPECT_EQ(r.kind, ImageRecord::Kind::kEncoded);
  EXPECT_EQ(r.image, kJpeg);
  EXPECT_EQ(r.label, 9);
  // No label: 0, as protobuf and Caffe's data layer read it.
  ASSERT_TRUE(SplitImageRecord(Spec(RecordLayout::kCaffe), BytesField(4, kJpeg) + Field(7, 0) + Varint(1), &r).ok());
  EXPECT_EQ(r.target, ImageRecord::Target::kInteger);
  EXPECT_EQ(r.label, 0);
  // Raw BGR planes, 2 x 1 pixels.
  const std::string planes = "\x01\x02\x03\x04\x05\x06";  // B B G G R R
  const std::string raw = Field(1, 0) + Varint(3) + Field(2, 0) + Varint(1) + Field(3, 0) + Varint(2) +
                          BytesField(4, planes) + Field(5, 0) + Varint(4);
  ASSERT_TRUE(SplitImageRecord(Spec(RecordLayout::kCaffe), raw, &r).ok());
  ASSERT_EQ(r.kind, ImageRecord::Kind::kPixels);
  EXPECT_EQ(r.channels, 3);
  EXPECT_EQ(r.height, 1);
  EXPECT_EQ(r.width, 2);
  std::vector<uint8_t> rgb(6);
  ASSERT_TRUE(PixelsToRgb(r, rgb.data()).ok());
  EXPECT_EQ(rgb, (std::vector<uint8_t>{5, 3, 1, 6, 4, 2}));
  const std::string features = Field(1, 0) + Varint(1) + Field(2, 0) + Varint(1) + Field(3, 0) + Varint(1) +
                               Field(6, 5) + std::string(4, '\0');
  ExpectRefused(Spec(RecordLayout::kCaffe), features, "features, not an image");
  ExpectRefused(Spec(RecordLayout::kCaffe), kJpeg, "Caffe Datum");
}

TEST(ImageRecordTest, ConvertedPixelsReadAsTheirDatum) {
  // What the converter writes for a raw-pixel Datum: {pixels, channels, height, width, label}.
  const std::string gray = Packer().Map(5).Text("pixels").Bytes("\x07\x08").Text("channels").Value(1)
                               .Text("height").Value(2).Text("width").Value(1).Text("label").Value(0).str();
  ImageRecord r;
  ASSERT_TRUE(SplitImageRecord(Spec(RecordLayout::kMsgpack), gray, &r).ok());
  ASSERT_EQ(r.kind, ImageRecord::Kind::kPixels);
  std::vector<uint8_t> rgb(6);
  ASSERT_TRUE(PixelsToRgb(r, rgb.data()).ok());
  EXPECT_EQ(rgb, (std::vector<uint8_t>{7, 7, 7, 8, 8, 8}));
  ExpectRefused(Spec(RecordLayout::kMsgpack),
                Packer().Map(4).Text("pixels").Bytes("\x07").Text("channels").Value(1).Text("height").Value(2)
                    .Text("width").Value(1).str(),
                "1 bytes of raw pixels for 1 x 2 x 1");
  const std::string four = Packer().Map(5).Text("pixels").Bytes("abcd").Text("channels").Value(4)
                               .Text("height").Value(1).Text("width").Value(1).Text("label").Value(0).str();
  ASSERT_TRUE(SplitImageRecord(Spec(RecordLayout::kMsgpack), four, &r).ok());  // the converter keeps them
  EXPECT_FALSE(PixelsToRgb(r, rgb.data()).ok());                                   // the image path cannot show them
}

TEST(ImageRecordTest, AsIsHasNothingToSplit) {
  ImageRecord r;
  EXPECT_EQ(SplitImageRecord(Spec(RecordLayout::kAsIs), kJpeg, &r).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace lmdbloader
