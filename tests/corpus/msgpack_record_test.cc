// UnpackRecord: msgpack records from untrusted bytes, with limits, read back
// through RecordValue without msgpack-cxx's types.
#include "lmdbloader/msgpack_record.h"

#include <gtest/gtest.h>

#include <msgpack.hpp>

#include <string>

namespace lmdbloader {
namespace {

// The rule broken ("" when the bytes unpack).
std::string Broken(const std::string& bytes) {
  UnpackedRecord record;
  const Status s = UnpackRecord(bytes, &record);
  if (s.ok()) return "";
  EXPECT_EQ(s.code(), Status::Code::kDecodeError) << s.ToString();
  EXPECT_EQ(record.root().type(), RecordValue::Type::kNil) << "a refused record leaves a value behind";
  return s.message().empty() ? "(no message)" : s.message();
}

std::string Packed(const msgpack::sbuffer& b) { return std::string(b.data(), b.size()); }

TEST(MsgpackRecordTest, ARecordOfFieldsUnpacksAndReadsBack) {
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  pk.pack_map(5);
  pk.pack(std::string("image"));
  pk.pack_bin(3);
  pk.pack_bin_body("abc", 3);
  pk.pack(std::string("label"));
  pk.pack(7);
  pk.pack(std::string("frames"));
  pk.pack_array(4);
  pk.pack(1.5);
  pk.pack(std::string("x"));
  pk.pack(-3);
  pk.pack(true);
  pk.pack(std::string("none"));
  pk.pack_nil();
  pk.pack(std::string("big"));
  pk.pack(uint64_t{18446744073709551615u});
  const std::string bytes = Packed(b);
  UnpackedRecord record;
  ASSERT_TRUE(UnpackRecord(bytes, &record).ok());
  const RecordValue root = record.root();
  ASSERT_EQ(root.type(), RecordValue::Type::kMap);
  ASSERT_EQ(root.size(), 5u);
  EXPECT_EQ(root.key(0).type(), RecordValue::Type::kString);
  EXPECT_EQ(root.key(0).bytes(), "image");
  EXPECT_EQ(root.value(0).type(), RecordValue::Type::kBytes);
  EXPECT_EQ(root.value(0).bytes(), "abc");
  // Strings and bytes are views into the record's bytes, not copies.
  EXPECT_GE(root.value(0).bytes().data(), bytes.data());
  EXPECT_LT(root.value(0).bytes().data(), bytes.data() + bytes.size());
  EXPECT_EQ(root.value(1).type(), RecordValue::Type::kUnsigned);
  EXPECT_EQ(root.value(1).unsigned_value(), 7u);
  const RecordValue frames = root.value(2);
  ASSERT_EQ(frames.type(), RecordValue::Type::kArray);
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames.element(0).type(), RecordValue::Type::kFloat);
  EXPECT_EQ(frames.element(0).float_value(), 1.5);
  EXPECT_EQ(frames.element(1).bytes(), "x");
  EXPECT_EQ(frames.element(2).type(), RecordValue::Type::kSigned);
  EXPECT_EQ(frames.element(2).signed_value(), -3);
  EXPECT_EQ(frames.element(3).type(), RecordValue::Type::kBool);
  EXPECT_TRUE(frames.element(3).boolean());
  EXPECT_EQ(root.value(3).type(), RecordValue::Type::kNil);
  EXPECT_EQ(root.value(4).unsigned_value(), 18446744073709551615u);
}

TEST(MsgpackRecordTest, AccessorsOfAnotherTypeOrPastTheEndAnswerEmpty) {
  UnpackedRecord record;
  EXPECT_EQ(record.root().type(), RecordValue::Type::kNil);  // nothing unpacked yet
  const std::string bytes("\x92\x05\xa1y", 4);  // [5, "y"]; outlives the record's views
  ASSERT_TRUE(UnpackRecord(bytes, &record).ok());
  const RecordValue root = record.root();
  EXPECT_EQ(root.element(2).type(), RecordValue::Type::kNil);
  EXPECT_EQ(root.key(0).type(), RecordValue::Type::kNil);  // not a map
  EXPECT_EQ(root.bytes(), "");
  EXPECT_EQ(root.element(0).bytes(), "");
  EXPECT_EQ(root.element(0).size(), 0u);
  EXPECT_EQ(root.element(1).unsigned_value(), 0u);
  EXPECT_FALSE(root.element(1).boolean());
  // A moved-from record answers nil too.
  UnpackedRecord moved = std::move(record);
  EXPECT_EQ(moved.root().element(1).bytes(), "y");
  EXPECT_EQ(record.root().type(), RecordValue::Type::kNil);  // NOLINT(bugprone-use-after-move)
}

TEST(MsgpackRecordTest, AStrThatIsNotUtf8IsTheBytesMsgpackBefore1Packed) {
  // {"image": <str ff d8 ff>, "name": <str "a">}: msgpack-python 0.6 packed
  // a JPEG's bytes as str; text stays text.
  const std::string packed("\x82\xa5image\xa3\xff\xd8\xff\xa4name\xa1\x61", 18);
  UnpackedRecord record;
  ASSERT_TRUE(UnpackRecord(packed, &record).ok());
  const RecordValue root = record.root();
  ASSERT_EQ(root.size(), 2u);
  EXPECT_EQ(root.value(0).type(), RecordValue::Type::kBytes);
  EXPECT_EQ(root.value(0).bytes(), std::string("\xff\xd8\xff", 3));
  EXPECT_EQ(root.value(1).type(), RecordValue::Type::kString);
  EXPECT_EQ(root.value(1).bytes(), "a");
}

TEST(MsgpackRecordTest, EveryLimitIsADecodeErrorSayingWhich) {
  // Nesting deeper than the limit.
  std::string deep(kMaxRecordDepth + 1, '\x91');
  deep += '\xc0';
  EXPECT_NE(Broken(deep).find("nested deeper than 512 levels"), std::string::npos) << Broken(deep);
  // An array claiming more elements than the record has bytes.
  EXPECT_NE(Broken(std::string("\xdd\x7f\xff\xff\xff", 5)), "");
  // A map key that is an array.
  EXPECT_NE(Broken(std::string("\x81\x90\x01", 3)).find("map key"), std::string::npos);
  // An extension type.
  EXPECT_NE(Broken(std::string("\xd4\x01\x00", 3)).find("extension"), std::string::npos);
  // Bytes after the value.
  EXPECT_NE(Broken(std::string("\x01\x02", 2)).find("1 bytes follow"), std::string::npos);
  // Nothing at all.
  EXPECT_NE(Broken(""), "");
}

TEST(MsgpackRecordTest, ARefusedRecordReplacesWhatWasUnpackedBefore) {
  UnpackedRecord record;
  ASSERT_TRUE(UnpackRecord(std::string("\x91\x05", 2), &record).ok());
  EXPECT_FALSE(UnpackRecord(std::string("\x01\x02", 2), &record).ok());
  EXPECT_EQ(record.root().type(), RecordValue::Type::kNil);
}

}  // namespace
}  // namespace lmdbloader
