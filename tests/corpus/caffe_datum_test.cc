// ParseCaffeDatum: Caffe Datum records from untrusted bytes. The records are
// written by a small protobuf encoder here, which is itself checked against
// bytes that protobuf's own runtime (Python, 7.x) serialized.
#include "lmdbloader/caffe_datum.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace lmdbloader {
namespace {

// protobuf's wire format, field by field.
class Encoder {
 public:
  Encoder& Varint(uint32_t field, uint64_t v) { return Tag(field, 0).Raw(v); }
  Encoder& Int32(uint32_t field, int32_t v) { return Varint(field, static_cast<uint64_t>(static_cast<int64_t>(v))); }
  Encoder& Bytes(uint32_t field, const std::string& b) {
    Tag(field, 2).Raw(b.size());
    out_ += b;
    return *this;
  }
  Encoder& Float(uint32_t field, float f) {
    Tag(field, 5);
    char b[4];
    std::memcpy(b, &f, 4);
    out_.append(b, 4);
    return *this;
  }
  Encoder& Tag(uint64_t field, uint32_t wire) { return Raw(field << 3 | wire); }
  Encoder& Raw(uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>(v | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
    return *this;
  }
  Encoder& Append(const std::string& b) {
    out_ += b;
    return *this;
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// What Caffe's ReadImageToDatum writes: data, label, encoded.
std::string EncodedDatum(const std::string& image, int32_t label) {
  return Encoder().Bytes(4, image).Int32(5, label).Varint(7, 1).str();
}

// What CVMatToDatum (and convert_imageset's caller) write: dimensions, data,
// label, encoded false.
std::string RawDatum(int32_t c, int32_t h, int32_t w, const std::string& pixels, int32_t label) {
  return Encoder().Int32(1, c).Int32(2, h).Int32(3, w).Bytes(4, pixels).Int32(5, label).Varint(7, 0).str();
}

std::string Hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

Status Parse(const std::string& record, CaffeDatum* d) { return ParseCaffeDatum(record, d); }

// Expects a DecodeError whose message holds `words`.
void ExpectRefused(const std::string& record, const std::string& words) {
  CaffeDatum d;
  Status s = Parse(record, &d);
  ASSERT_FALSE(s.ok()) << "accepted; expected an error saying '" << words << "'";
  EXPECT_EQ(s.code(), Status::Code::kDecodeError) << s.ToString();
  EXPECT_NE(s.message().find(words), std::string::npos) << "expected '" << words << "' in: " << s.message();
  EXPECT_NE(s.message().find("Caffe Datum"), std::string::npos) << s.message();
}

TEST(CaffeDatumTest, TheEncoderWritesWhatProtobufWrites) {
  // Datum(data=b"\xff\xd8jpeg", label=7, encoded=True).SerializeToString()
  EXPECT_EQ(EncodedDatum("\xff\xd8jpeg", 7), Hex("2206ffd86a70656728073801"));
  // Datum(channels=3, height=2, width=1, data=bytes(range(6)), label=-1, encoded=False)
  EXPECT_EQ(RawDatum(3, 2, 1, std::string("\0\1\2\3\4\5", 6), -1),
            Hex("080310021801220600010203040528ffffffffffffffffff013800"));
  // Datum(channels=1, height=1, width=2, float_data=[1.5, -2.0]): proto2 does not pack.
  EXPECT_EQ(Encoder().Int32(1, 1).Int32(2, 1).Int32(3, 2).Float(6, 1.5f).Float(6, -2.0f).str(),
            Hex("080110011802350000c03f35000000c0"));
}

TEST(CaffeDatumTest, AnEncodedImageIsAViewIntoTheRecord) {
  const std::string record = Hex("2206ffd86a70656728073801");  // protobuf's bytes
  CaffeDatum d;
  ASSERT_TRUE(Parse(record, &d).ok());
  EXPECT_TRUE(d.encoded);
  EXPECT_EQ(d.data, "\xff\xd8jpeg");
  EXPECT_EQ(d.data.data(), record.data() + 2) << "data must point into the record, not a copy";
  EXPECT_TRUE(d.has_label);
  EXPECT_EQ(d.label, 7);
  EXPECT_EQ(d.channels, 0);
  EXPECT_EQ(d.unknown_fields, 0u);
}

TEST(CaffeDatumTest, RawPixelsCarryTheirDimensionsAndANegativeLabel) {
  std::string pixels(3 * 4 * 5, '\0');
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<char>(i);
  const std::string record = RawDatum(3, 4, 5, pixels, -1);
  CaffeDatum d;
  Status s = Parse(record, &d);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(d.encoded);
  EXPECT_EQ(d.channels, 3);
  EXPECT_EQ(d.height, 4);
  EXPECT_EQ(d.width, 5);
  EXPECT_EQ(d.data, pixels);
  EXPECT_EQ(d.label, -1);
  // The most negative and the largest int32 labels.
  ASSERT_TRUE(Parse(EncodedDatum("j", INT32_MIN), &d).ok());
  EXPECT_EQ(d.label, INT32_MIN);
  ASSERT_TRUE(Parse(EncodedDatum("j", INT32_MAX), &d).ok());
  EXPECT_EQ(d.label, INT32_MAX);
}

TEST(CaffeDatumTest, ADatumWithoutALabelSaysSo) {
  CaffeDatum d;
  ASSERT_TRUE(Parse(Encoder().Bytes(4, "img").Varint(7, 1).str(), &d).ok());
  EXPECT_FALSE(d.has_label);
}

TEST(CaffeDatumTest, FloatDataIsCountedPackedOrNot) {
  CaffeDatum d;
  const std::string packed = Encoder().Int32(1, 2).Int32(2, 1).Int32(3, 2).Bytes(6, std::string(16, '\0')).str();
  ASSERT_TRUE(Parse(packed, &d).ok());
  EXPECT_EQ(d.float_data_count, 4u);
  EXPECT_TRUE(d.data.empty());
  // Packed and one-a-tag runs add up, as protobuf merges them.
  const std::string mixed = Encoder().Int32(1, 3).Int32(2, 1).Int32(3, 1).Float(6, 1).Bytes(6, std::string(8, 'a')).str();
  ASSERT_TRUE(Parse(mixed, &d).ok());
  EXPECT_EQ(d.float_data_count, 3u);
  ExpectRefused(Encoder().Int32(1, 3).Int32(2, 1).Int32(3, 1).Float(6, 1).str(), "float_data holds 1 floats");
  ExpectRefused(Encoder().Int32(1, 1).Int32(2, 1).Int32(3, 1).Bytes(6, "abc").str(), "not a whole number of floats");
}

TEST(CaffeDatumTest, TheLastOfARepeatedScalarWins) {
  // As protobuf parses it: label 1 then 2 reads 2; data "a" then "bc" reads "bc".
  const std::string record = Encoder().Int32(5, 1).Bytes(4, "a").Int32(5, 2).Bytes(4, "bc").Varint(7, 1).str();
  CaffeDatum d;
  ASSERT_TRUE(Parse(record, &d).ok());
  EXPECT_EQ(d.label, 2);
  EXPECT_EQ(d.data, "bc");
  // Any non-zero varint is true for a bool.
  ASSERT_TRUE(Parse(Encoder().Bytes(4, "a").Varint(7, 300).str(), &d).ok());
  EXPECT_TRUE(d.encoded);
}

TEST(CaffeDatumTest, UnknownFieldsAreSkippedAndCounted) {
  // Fields 8 and up of each wire type, around the declared ones.
  const std::string record = Encoder()
                                 .Varint(8, 12345)
                                 .Bytes(4, "img")
                                 .Tag(9, 1)
                                 .Append(std::string(8, 'x'))
                                 .Bytes(100, "nested bytes")
                                 .Float(536870911, 1)  // the largest field number
                                 .Varint(7, 1)
                                 .str();
  CaffeDatum d;
  Status s = Parse(record, &d);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(d.unknown_fields, 4u);
  EXPECT_EQ(d.data, "img");
}

TEST(CaffeDatumTest, BrokenWireFormatIsRefusedSayingWhere) {
  const std::string good = EncodedDatum("abcdef", 3);
  // Cut anywhere inside: the tag, the length, the bytes or the label.
  for (size_t n = 1; n < good.size() - 2; ++n) {
    CaffeDatum d;
    Status s = Parse(good.substr(0, n), &d);
    EXPECT_FALSE(s.ok()) << "a record cut to " << n << " bytes was accepted";
    EXPECT_EQ(s.code(), Status::Code::kDecodeError);
  }
  ExpectRefused(good.substr(0, 5), "data: 6 bytes, but the record has 3 left (byte 2 of 5)");
  ExpectRefused(Encoder().Bytes(4, "a").Tag(5, 0).str(), "cut off by the end of the record");
  ExpectRefused(Encoder().Bytes(4, "a").Tag(5, 0).Append(std::string(10, '\xff')).Append("\x01").str(),
                "overflows 64 bits");
  ExpectRefused(Encoder().Bytes(4, "a").Tag(5, 0).Append(std::string(9, '\xff')).Append("\x02").str(),
                "overflows 64 bits");
  // A length above protobuf's 2 GiB limit.
  ExpectRefused(Encoder().Tag(4, 2).Raw(uint64_t{1} << 31).str(), "at most 2^31-1");
  ExpectRefused(Encoder().Tag(0, 0).Raw(1).str(), "field number 0");
  ExpectRefused(Encoder().Tag(uint64_t{1} << 29, 0).Raw(1).str(), "field number 536870912");
  ExpectRefused(Encoder().Bytes(4, "a").Tag(8, 3).str(), "a group");
  ExpectRefused(Encoder().Bytes(4, "a").Tag(5, 4).str(), "a group");
  ExpectRefused(Encoder().Bytes(4, "a").Tag(8, 6).str(), "no such type");
  ExpectRefused(Encoder().Bytes(4, "a").Tag(8, 7).str(), "no such type");
  ExpectRefused(Encoder().Tag(8, 1).Append("1234567").str(), "field 8: 8 bytes");
  // The byte offset of the failing field is in the message.
  ExpectRefused(Encoder().Bytes(4, "abc").Tag(0, 0).Raw(1).str(), "(byte 5 of 7)");
}

TEST(CaffeDatumTest, ADeclaredFieldWithAnotherWireTypeIsRefused) {
  ExpectRefused(Encoder().Bytes(1, "3").Bytes(4, "a").str(), "field 1 (channels) has wire type 2");
  ExpectRefused(Encoder().Varint(4, 3).str(), "field 4 (data) has wire type 0");
  ExpectRefused(Encoder().Bytes(4, "a").Float(5, 1).str(), "field 5 (label) has wire type 5");
  ExpectRefused(Encoder().Bytes(4, "a").Varint(6, 1).str(), "field 6 (float_data) has wire type 0");
  ExpectRefused(Encoder().Bytes(4, "a").Bytes(7, "\x01").str(), "field 7 (encoded) has wire type 2");
}

TEST(CaffeDatumTest, ValuesOutsideInt32AreRefused) {
  // protobuf's own parser would truncate these to 32 bits.
  ExpectRefused(Encoder().Bytes(4, "a").Varint(5, uint64_t{1} << 31).str(), "label is 2147483648, outside int32");
  ExpectRefused(Encoder().Bytes(4, "a").Varint(5, uint64_t{1} << 32).str(), "outside int32");
  // Below INT32_MIN as a 64-bit two's complement.
  ExpectRefused(Encoder().Bytes(4, "a").Varint(5, static_cast<uint64_t>(int64_t{INT32_MIN} - 1)).str(),
                "outside int32");
  ExpectRefused(Encoder().Varint(2, uint64_t{1} << 40).Bytes(4, "a").str(), "height is 1099511627776");
  ExpectRefused(Encoder().Int32(3, -4).Bytes(4, "a").str(), "width is negative (-4)");
}

TEST(CaffeDatumTest, RawPixelsMustFillChannelsTimesHeightTimesWidth) {
  ExpectRefused(RawDatum(3, 4, 5, std::string(59, 'p'), 0), "data holds 59 bytes, not channels x height x width = 3 x 4 x 5");
  ExpectRefused(RawDatum(3, 4, 5, std::string(61, 'p'), 0), "data holds 61 bytes");
  // No dimensions at all, as a raw Datum.
  ExpectRefused(Encoder().Bytes(4, "abc").Int32(5, 1).str(), "data holds 3 bytes, not channels x height x width = 0 x 0 x 0");
  // Dimensions whose product passes 64 bits must not wrap to the size held.
  ExpectRefused(RawDatum(INT32_MAX, INT32_MAX, INT32_MAX, "p", 0), "data holds 1 bytes");
  ExpectRefused(RawDatum(1, 1, 1, "", 0), "raw, but its data is empty");
}

TEST(CaffeDatumTest, ARecordWithoutAnImageIsRefused) {
  ExpectRefused("", "neither data nor float_data");
  ExpectRefused(Encoder().Int32(5, 3).str(), "neither data nor float_data");
  ExpectRefused(Encoder().Bytes(4, "").Varint(7, 1).str(), "encoded, but its data is empty");
}

TEST(CaffeDatumTest, OtherRecordsAreNotTakenForADatum) {
  // A JPEG, a msgpack map and a pickle are not Datums.
  ExpectRefused(std::string("\xff\xd8\xff\xe0\x00\x10JFIF\x00", 11), "Caffe Datum");
  ExpectRefused(std::string("\x82\xa5image\xc4\x01x\xa5label\x01", 17), "Caffe Datum");
  ExpectRefused(std::string("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00", 11), "Caffe Datum");
}

}  // namespace
}  // namespace lmdbloader
