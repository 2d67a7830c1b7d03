// UnpackRecord: msgpack records from untrusted bytes, with limits.
#include "lmdbloader/msgpack_record.h"

#include <gtest/gtest.h>

#include <string>

namespace lmdbloader {
namespace {

bool Unpack(const std::string& bytes, std::string* error) {
  msgpack::object_handle oh;
  return UnpackRecord(bytes.data(), bytes.size(), &oh, error);
}

std::string Packed(const msgpack::sbuffer& b) { return std::string(b.data(), b.size()); }

TEST(MsgpackRecordTest, ARecordOfFieldsUnpacks) {
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  pk.pack_map(3);
  pk.pack(std::string("image"));
  pk.pack_bin(3);
  pk.pack_bin_body("abc", 3);
  pk.pack(std::string("label"));
  pk.pack(7);
  pk.pack(std::string("frames"));
  pk.pack_array(2);
  pk.pack(1.5);
  pk.pack(std::string("x"));
  std::string error;
  EXPECT_TRUE(Unpack(Packed(b), &error)) << error;
}

TEST(MsgpackRecordTest, EveryLimitIsAnErrorSayingWhich) {
  std::string error;
  // Nesting deeper than the limit.
  std::string deep(kMaxRecordDepth + 1, '\x91');
  deep += '\xc0';
  EXPECT_FALSE(Unpack(deep, &error));
  EXPECT_NE(error.find("nested deeper than 512 levels"), std::string::npos) << error;
  // An array claiming more elements than the record has bytes.
  EXPECT_FALSE(Unpack(std::string("\xdd\x7f\xff\xff\xff", 5), &error));
  // A string that is not UTF-8.
  EXPECT_FALSE(Unpack(std::string("\xa2\xff\xfe", 3), &error));
  EXPECT_NE(error.find("UTF-8"), std::string::npos) << error;
  // A map key that is an array.
  EXPECT_FALSE(Unpack(std::string("\x81\x90\x01", 3), &error));
  // An extension type.
  EXPECT_FALSE(Unpack(std::string("\xd4\x01\x00", 3), &error));
  // Bytes after the value.
  EXPECT_FALSE(Unpack(std::string("\x01\x02", 2), &error));
  // Nothing at all.
  EXPECT_FALSE(Unpack("", &error));
}

}  // namespace
}  // namespace lmdbloader
