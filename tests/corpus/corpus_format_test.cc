// The corpus format's rules on keys and names: metadata keys never take a
// record's place, names are UTF-8 as Unicode defines it, and messages show a
// name as text only when it is printable.
#include "corpus/corpus_format.h"

#include <cstdint>
#include <string>
#include <vector>

#include "test_util.h"

namespace lmdbloader {
namespace {

// UTF-8 of one code point, written from the encoding's definition (RFC 3629,
// section 3), independently of the validator under test.
std::string Encode(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return out;
}

bool IsScalarValue(uint32_t cp) { return cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff); }

TEST(CorpusFormatTest, MetadataKeysSortAfterEveryRecordKeyBelowTwoToThe56) {
  // The reason records keep their positions: position i is record i as long
  // as every metadata key sorts after every record key.
  for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{255}, uint64_t{1} << 32, (uint64_t{1} << 56) - 1}) {
    EXPECT_LT(RecordKey(i), std::string(kMetaPrefix)) << i;
    EXPECT_LT(RecordKey(i), std::string(kManifestKey)) << i;
    EXPECT_FALSE(IsMetaKey(RecordKey(i))) << i;
  }
  // The bound is real: from 0x5f << 56 on, a record key begins with '_'
  // itself and sorts among the metadata keys.
  EXPECT_EQ(RecordKey(uint64_t{0x5f} << 56)[0], kMetaPrefix[0]);
}

TEST(CorpusFormatTest, EveryMetadataKeyHasThePrefixAndNothingShorterDoes) {
  for (std::string_view key : {kManifestKey, kManifestChecksumKey, kChecksumsKey, kNamesBlobKey,
                               kNamesOffsetsKey, kColumnPrefix}) {
    EXPECT_TRUE(IsMetaKey(key)) << key;
  }
  EXPECT_TRUE(IsMetaKey(std::string(kColumnPrefix) + "label"));
  EXPECT_FALSE(IsMetaKey(kMetaPrefix.substr(0, kMetaPrefix.size() - 1)));
  EXPECT_FALSE(IsMetaKey(""));
  EXPECT_FALSE(IsMetaKey("__LMDBLOADER__/manifest"));
}

TEST(CorpusFormatTest, EveryScalarValueEncodedIsUtf8AndNoSurrogateOrLargerValueIs) {
  for (uint32_t cp = 0; cp <= 0x10ffff; ++cp) {
    ASSERT_EQ(IsUtf8(Encode(cp)), IsScalarValue(cp)) << std::hex << cp;
  }
  // Four-byte forms past U+10FFFF up to the largest the lead byte can carry.
  for (uint32_t cp = 0x110000; cp < 0x200000; cp += 0x1001) {
    ASSERT_FALSE(IsUtf8(Encode(cp))) << std::hex << cp;
  }
}

TEST(CorpusFormatTest, EveryStringOfUpToThreeBytesIsUtf8ExactlyWhenItIsScalarValuesEncoded) {
  // The definition, enumerated: a string is UTF-8 when it splits into the
  // encodings of scalar values. Every string of 1, 2 and 3 bytes is checked
  // against the concatenations of such encodings, which covers overlong
  // forms, stray continuation bytes, truncated sequences and bytes 0xf8-0xff.
  // Strings are numbers here (big-endian bytes), so the tables are bit sets.
  std::vector<uint8_t> one(1u << 8), two(1u << 16), three(1u << 24);
  for (uint32_t cp = 0; cp < 0x10000; ++cp) {
    if (!IsScalarValue(cp)) continue;
    uint32_t n = 0;
    const std::string e = Encode(cp);
    for (char c : e) n = (n << 8) | static_cast<unsigned char>(c);
    (e.size() == 1 ? one : e.size() == 2 ? two : three)[n] = 1;
  }
  auto split2 = [&](uint32_t n) -> bool { return two[n] || (one[n >> 8] && one[n & 0xff]); };
  auto split3 = [&](uint32_t n) -> bool {
    return three[n] || (one[n >> 16] && split2(n & 0xffff)) || (split2(n >> 8) && one[n & 0xff]);
  };
  char b[3];
  for (uint32_t n = 0; n < (1u << 8); ++n) {
    b[0] = static_cast<char>(n);
    ASSERT_EQ(IsUtf8(std::string_view(b, 1)), one[n] != 0) << n;
  }
  for (uint32_t n = 0; n < (1u << 16); ++n) {
    b[0] = static_cast<char>(n >> 8), b[1] = static_cast<char>(n);
    ASSERT_EQ(IsUtf8(std::string_view(b, 2)), split2(n)) << std::hex << n;
  }
  uint64_t accepted = 0;
  for (uint32_t n = 0; n < (1u << 24); ++n) {
    b[0] = static_cast<char>(n >> 16), b[1] = static_cast<char>(n >> 8), b[2] = static_cast<char>(n);
    const bool ok = IsUtf8(std::string_view(b, 3));
    if (ok != split3(n)) FAIL() << std::hex << n;
    accepted += ok;
  }
  // 128^3 ASCII triples, 2 x 128 x 1920 mixes of one and two bytes, and
  // 61,440 three-byte forms (U+0800..U+FFFF less the 2,048 surrogates).
  EXPECT_EQ(accepted, 128ull * 128 * 128 + 2ull * 128 * 1920 + 61440);
}

TEST(CorpusFormatTest, PrintableNamesAreQuotedAndOthersShownInHex) {
  EXPECT_EQ(PrintableName("cat/0001.jpg"), "'cat/0001.jpg'");
  EXPECT_EQ(PrintableName("\xc3\xa9t\xc3\xa9"), "'\xc3\xa9t\xc3\xa9'");  // UTF-8 text stays text
  EXPECT_EQ(PrintableName(""), "''");
  EXPECT_EQ(PrintableName(std::string("\x00\x00\x00\x07", 4)), "0x00000007");  // a packed integer
  EXPECT_EQ(PrintableName("a\nb"), "0x610a62");                                 // a control character
  EXPECT_EQ(PrintableName("a\x7f"), "0x617f");
  EXPECT_EQ(PrintableName("\xff\xfe"), "0xfffe");          // not UTF-8
  EXPECT_EQ(PrintableName("\xed\xa0\x80"), "0xeda080");    // a surrogate
}

TEST(CorpusFormatTest, LongNamesAreCutAfter64Bytes) {
  const std::string text(100, 'x');
  EXPECT_EQ(PrintableName(text), "'" + std::string(64, 'x') + "'...");
  EXPECT_EQ(PrintableName(std::string(64, 'x')), "'" + std::string(64, 'x') + "'");
  const std::string binary(100, '\x01');
  std::string hex = "0x";
  for (int i = 0; i < 64; ++i) hex += "01";
  EXPECT_EQ(PrintableName(binary), hex + "...");
  // A name whose 65th byte is not UTF-8 is binary, even if its first 64 are text.
  EXPECT_EQ(PrintableName(std::string(64, 'x') + "\xff").substr(0, 2), "0x");
}

}  // namespace
}  // namespace lmdbloader
