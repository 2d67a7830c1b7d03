// Opens a database with the installed library and prints its records' sizes:
// proof that the installed headers and the exported target link and run.
#include <cstdio>
#include <memory>

#include "lmdbloader/reader.h"

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
  std::printf("%llu records, %llu bytes\n", static_cast<unsigned long long>(reader->size()),
              static_cast<unsigned long long>(total));
  return 0;
}
