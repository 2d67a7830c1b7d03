// Opens a database with the installed library and prints its records' sizes,
// read one by one and again by a scan: proof that the installed headers and
// the exported target link and run. It also calls the image decoder, whose
// object files need libjpeg on the link line, counts the database with
// InspectDatabase, verifies it, and unpacks a msgpack record, which needs no
// msgpack headers of the user's own.
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "lmdbloader/database_info.h"
#include "lmdbloader/image_decode.h"
#include "lmdbloader/msgpack_record.h"
#include "lmdbloader/reader.h"
#include "lmdbloader/scan.h"
#include "lmdbloader/verify.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer PATH\n");
    return 2;
  }
  std::unique_ptr<lmdbloader::Reader> reader;
  lmdbloader::Status s = lmdbloader::Reader::Open(argv[1], lmdbloader::ReaderOptions(), &reader);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  uint64_t total = 0;
  std::string value;
  for (uint64_t i = 0; i < reader->size(); ++i) {
    s = reader->Read(i, &value);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    total += value.size();
  }
  std::vector<uint64_t> order(reader->size());
  std::iota(order.begin(), order.end(), 0);
  uint64_t scanned = 0;
  s = lmdbloader::ScanRecords(*reader, order.data(), order.size(), 64, [&](const lmdbloader::ScanSlice& slice) {
    scanned += slice.bytes;
    return lmdbloader::Status::OK();
  });
  if (!s.ok() || scanned != total) {
    std::fprintf(stderr, "scan: %s, %llu bytes\n", s.ToString().c_str(), static_cast<unsigned long long>(scanned));
    return 1;
  }
  lmdbloader::DecodeScratch scratch;
  std::vector<float> pixels(lmdbloader::OutputSpec().bytes() / sizeof(float));
  s = lmdbloader::DecodeJpegInto("not a jpeg", lmdbloader::CropBox{0, 0, 1, 1}, lmdbloader::OutputSpec(), &scratch,
                                 pixels.data());
  if (s.code() != lmdbloader::Status::Code::kDecodeError) {
    std::fprintf(stderr, "DecodeJpegInto: %s\n", s.ToString().c_str());
    return 1;
  }
  lmdbloader::DatabaseInfo info;
  s = lmdbloader::InspectDatabase(argv[1], "", &info);
  if (!s.ok() || info.entries != reader->size()) {
    std::fprintf(stderr, "InspectDatabase: %s, %llu entries\n", s.ToString().c_str(),
                 static_cast<unsigned long long>(info.entries));
    return 1;
  }
  lmdbloader::VerifyReport report;
  s = lmdbloader::VerifyDatabase(argv[1], lmdbloader::ReaderOptions(), &report);
  if (!s.ok() || !report.opened || !report.problems.empty()) {
    std::fprintf(stderr, "VerifyDatabase: %s, %zu problems\n", s.ToString().c_str(), report.problems.size());
    return 1;
  }
  const std::string packed("\x81\xa5label\x07", 8);  // {"label": 7}; outlives the record's views
  lmdbloader::UnpackedRecord record;
  s = lmdbloader::UnpackRecord(packed, &record);
  if (!s.ok() || record.root().size() != 1 || record.root().key(0).bytes() != "label" ||
      record.root().value(0).unsigned_value() != 7) {
    std::fprintf(stderr, "UnpackRecord: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("%llu records, %llu bytes\n", static_cast<unsigned long long>(reader->size()),
              static_cast<unsigned long long>(total));
  return 0;
}
