// libFuzzer harness: a record's bytes split by every layout, as the image
// path and the converter ask (image_record.h). What is accepted must keep
// the header's promises: every view inside the record, a clip of at least
// one frame, raw pixels that fill their shape.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "lmdbloader/image_record.h"

namespace {

bool Inside(std::string_view part, std::string_view record) {
  return part.empty() || (part.data() >= record.data() && part.data() + part.size() <= record.data() + record.size());
}

void Check(const lmdbloader::ImageRecordSpec& spec, std::string_view record) {
  using lmdbloader::ImageRecord;
  ImageRecord r;
  if (!lmdbloader::SplitImageRecord(spec, record, &r).ok()) return;
  if (!Inside(r.image, record)) std::abort();
  for (std::string_view f : r.frames)
    if (!Inside(f, record)) std::abort();
  if (r.kind == ImageRecord::Kind::kFrames && r.frames.empty()) std::abort();
  if (r.kind == ImageRecord::Kind::kPixels) {
    const uint64_t want = static_cast<uint64_t>(r.channels) * static_cast<uint64_t>(r.height) *
                          static_cast<uint64_t>(r.width);
    if (r.height <= 0 || r.width <= 0 || want != r.image.size()) std::abort();
    std::vector<uint8_t> rgb(static_cast<size_t>(r.height) * static_cast<size_t>(r.width) * 3);
    (void)lmdbloader::PixelsToRgb(r, rgb.data());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view record(reinterpret_cast<const char*>(data), size);
  using lmdbloader::RecordLayout;
  lmdbloader::ImageRecordSpec spec;
  for (RecordLayout layout : {RecordLayout::kMsgpack, RecordLayout::kCaffe, RecordLayout::kRaw}) {
    spec.layout = layout;
    spec.field = "image";
    spec.target = "label";
    spec.frames = false;
    spec.target_required = true;
    Check(spec, record);  // ImageDecode
    spec.field = "frames";
    spec.frames = true;
    Check(spec, record);  // ClipDecode
    spec.field.clear();
    spec.target_required = false;
    Check(spec, record);  // the converter
  }
  return 0;
}
