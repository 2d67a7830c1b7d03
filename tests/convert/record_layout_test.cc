// SplitRecord: values laid out by other tools become a corpus record's
// fields; values that do not fit their layout are refused saying why.
#include "convert/record_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace lmdbloader {
namespace {

// A Caffe Datum's bytes, field by field (protobuf's wire format; the parser's
// own test checks this encoding against protobuf's).
std::string Varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out += static_cast<char>(v | 0x80);
  return out + static_cast<char>(v);
}
std::string IntField(uint32_t n, int64_t v) { return Varint(n << 3) + Varint(static_cast<uint64_t>(v)); }
std::string BytesField(uint32_t n, const std::string& b) { return Varint(n << 3 | 2) + Varint(b.size()) + b; }

msgpack::object_handle Unpacked(const msgpack::sbuffer& b) { return msgpack::unpack(b.data(), b.size()); }

std::string Packed(const msgpack::sbuffer& b) { return std::string(b.data(), b.size()); }

// field -> the object of a map record.
std::map<std::string, msgpack::object> Fields(const msgpack::object_handle& oh) {
  std::map<std::string, msgpack::object> out;
  EXPECT_EQ(oh.get().type, msgpack::type::MAP);
  for (uint32_t i = 0; i < oh.get().via.map.size; ++i) {
    const auto& kv = oh.get().via.map.ptr[i];
    out[kv.key.as<std::string>()] = kv.val;
  }
  return out;
}

std::string Bin(const msgpack::object& o) {
  EXPECT_EQ(o.type, msgpack::type::BIN);
  return std::string(o.via.bin.ptr, o.via.bin.size);
}

TEST(RecordLayoutTest, MetadataKeysAreDoubleUnderscoredNames) {
  for (const char* key : {"__keys__", "__len__", "__order__", "__vlen__", "___x___"})
    EXPECT_TRUE(IsMetadataKey(key)) << key;
  for (const char* key : {"____", "__keys", "keys__", "00000001_a.jpg", "_keys_", "12", ""})
    EXPECT_FALSE(IsMetadataKey(key)) << key;
}

TEST(RecordLayoutTest, AnEncodedCaffeDatumBecomesImageAndLabel) {
  const std::string jpeg = "\xff\xd8 jpeg bytes";
  msgpack::sbuffer out;
  SplitValue split;
  std::set<std::string> fields;
  ASSERT_OK(SplitRecord(RecordLayout::kCaffe, BytesField(4, jpeg) + IntField(5, 42) + IntField(7, 1), &out, &split,
                        &fields));
  auto oh = Unpacked(out);
  auto f = Fields(oh);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_EQ(Bin(f["image"]), jpeg);
  EXPECT_EQ(f["label"].as<int64_t>(), 42);
  EXPECT_TRUE(split.has_label);
  EXPECT_EQ(split.label, 42);
  EXPECT_EQ(fields, (std::set<std::string>{"image", "label"}));
}

TEST(RecordLayoutTest, ADatumWithoutALabelHasLabelZero) {
  // protobuf reads an absent int32 as 0, and so do Caffe's data layer and
  // ImageDecode(record="caffe"): the converted copy says the same.
  msgpack::sbuffer out;
  SplitValue split;
  std::set<std::string> fields;
  ASSERT_OK(SplitRecord(RecordLayout::kCaffe, BytesField(4, "\xff\xd8 jpeg") + IntField(7, 1), &out, &split, &fields));
  auto oh = Unpacked(out);
  auto f = Fields(oh);
  EXPECT_EQ(f["label"].as<int64_t>(), 0);
  EXPECT_TRUE(split.has_label);
  EXPECT_EQ(split.label, 0);
  EXPECT_EQ(fields, (std::set<std::string>{"image", "label"}));
}

TEST(RecordLayoutTest, RawPixelDatumsKeepTheirPixelsAndDimensions) {
  const std::string pixels = "bgrBGRbgrBGRbgrBGR";  // 3 x 2 x 3
  msgpack::sbuffer out;
  SplitValue split;
  std::set<std::string> fields;
  ASSERT_OK(SplitRecord(RecordLayout::kCaffe,
                        IntField(1, 3) + IntField(2, 2) + IntField(3, 3) + BytesField(4, pixels) + IntField(5, -3) +
                            IntField(7, 0),
                        &out, &split, &fields));
  auto oh = Unpacked(out);
  auto f = Fields(oh);
  EXPECT_EQ(Bin(f["pixels"]), pixels);
  EXPECT_EQ(f["channels"].as<int>(), 3);
  EXPECT_EQ(f["height"].as<int>(), 2);
  EXPECT_EQ(f["width"].as<int>(), 3);
  EXPECT_EQ(f["label"].as<int>(), -3);
  EXPECT_EQ(split.label, -3);
}

TEST(RecordLayoutTest, CaffeValuesThatAreNoImageAreRefused) {
  msgpack::sbuffer out;
  SplitValue split;
  std::set<std::string> fields;
  Status s = SplitRecord(RecordLayout::kCaffe, "\x82\xa5image", &out, &split, &fields);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("not a valid Caffe Datum"), std::string::npos) << s.message();
  // float_data only: features.
  const std::string floats = IntField(1, 1) + IntField(2, 1) + IntField(3, 1) + Varint(6 << 3 | 5) + "abcd";
  s = SplitRecord(RecordLayout::kCaffe, floats, &out, &split, &fields);
  EXPECT_NE(s.message().find("features, not an image"), std::string::npos) << s.message();
}

TEST(RecordLayoutTest, AMsgpackListOfBytesBecomesFrames) {
  for (bool legacy : {false, true}) {  // bin, or str as msgpack-python < 1.0 wrote bytes
    msgpack::sbuffer in;
    msgpack::packer<msgpack::sbuffer> pk(in);
    const std::vector<std::string> frames = {"frame-one", std::string(300, 'b'), std::string(70000, 'c')};
    pk.pack_array(3);
    for (const std::string& f : frames) {
      if (legacy) {
        pk.pack_str(static_cast<uint32_t>(f.size()));
        pk.pack_str_body(f.data(), static_cast<uint32_t>(f.size()));
      } else {
        pk.pack_bin(static_cast<uint32_t>(f.size()));
        pk.pack_bin_body(f.data(), static_cast<uint32_t>(f.size()));
      }
    }
    msgpack::sbuffer out;
    SplitValue split;
    std::set<std::string> fields;
    ASSERT_OK(SplitRecord(RecordLayout::kMsgpack, Packed(in), &out, &split, &fields));
    auto oh = Unpacked(out);
    auto f = Fields(oh);
    ASSERT_EQ(f["frames"].type, msgpack::type::ARRAY);
    ASSERT_EQ(f["frames"].via.array.size, 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(Bin(f["frames"].via.array.ptr[i]), frames[i]);
    EXPECT_FALSE(split.has_label);
  }
}

TEST(RecordLayoutTest, AMsgpackMapIsKeptWithItsIntegerLabel) {
  msgpack::sbuffer in;
  msgpack::packer<msgpack::sbuffer> pk(in);
  pk.pack_map(2).pack(std::string("image")).pack(std::vector<char>{'a', 'b'});  // bin
  pk.pack(std::string("label")).pack(-7);
  msgpack::sbuffer out;
  SplitValue split;
  std::set<std::string> fields;
  ASSERT_OK(SplitRecord(RecordLayout::kMsgpack, Packed(in), &out, &split, &fields));
  EXPECT_EQ(Packed(out), Packed(in));
  EXPECT_TRUE(split.has_label);
  EXPECT_EQ(split.label, -7);
}

TEST(RecordLayoutTest, OtherMsgpackValuesAreRefused) {
  msgpack::sbuffer out;
  SplitValue split;
  std::set<std::string> fields;
  struct Case {
    std::string value, words;
  };
  for (const Case& c : std::vector<Case>{
           {"\x90", "no frames"},
           {"\x92\xc4\x01x\x01", "not of byte strings"},  // a number among the frames
           {"\x07", "neither a msgpack list"},
           {"\xdd\x7f\xff\xff\xff\xc4", "not msgpack"},  // an array claiming 2^31 elements
           {"\x91\xc4\x05" "ab", "not msgpack"},            // a frame cut off
           {"\x91\xc4\x01xx", "not msgpack"},            // bytes after the value
           {std::string("\x81\xa5label\xcf\x00\x40\x00\x00\x00\x00\x00\x01", 16), "beyond 2^53"},
           {"\xff\xd8\xff", "not msgpack"}}) {
    Status s = SplitRecord(RecordLayout::kMsgpack, c.value, &out, &split, &fields);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.words;
    EXPECT_NE(s.message().find(c.words), std::string::npos) << "expected '" << c.words << "' in: " << s.message();
  }
}

TEST(RecordLayoutTest, ARawValueIsTheImage) {
  msgpack::sbuffer out;
  SplitValue split;
  std::set<std::string> fields;
  ASSERT_OK(SplitRecord(RecordLayout::kRaw, "\x89PNG...", &out, &split, &fields));
  auto oh = Unpacked(out);
  EXPECT_EQ(Bin(Fields(oh)["image"]), "\x89PNG...");
  EXPECT_EQ(SplitRecord(RecordLayout::kRaw, "", &out, &split, &fields).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace lmdbloader
