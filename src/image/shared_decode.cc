// Several crops of one image from one decode (lmdbloader/image_decode.h,
// DecodeJpegCrops): the region every crop's box lies in is decoded once into
// the scratch, at the largest IDCT scale any crop alone would get, then each
// crop is planned as the single-crop path plans it at that scale
// (decode_plan.h) and resized from the stored rows by the same code.
#include <algorithm>
#include <cstring>
#include <string>

#include "image/decode_plan.h"
#include "lmdbloader/image_decode.h"

namespace lmdbloader {

namespace {

Status CheckCount(size_t count) {
  if (count == 0 || count > kMaxCropsPerDecode) {
    return Status::InvalidArgument(std::to_string(count) + " crops of one image; 1 to " +
                                   std::to_string(kMaxCropsPerDecode) + " are taken");
  }
  return Status::OK();
}

std::string CropName(size_t k, size_t count) {
  return "crop " + std::to_string(k) + " of " + std::to_string(count) + ": ";
}

// Copies the decoder's rows (4 bytes a pixel) of columns [x_begin, x_end)
// into the scratch's region buffer.
class StoreSink : public RowSink {
 public:
  StoreSink(uint8_t* rows, uint32_t x_begin, uint32_t x_end, uint32_t pixel_bytes)
      : rows_(rows), x_begin_(x_begin), bytes_(size_t{x_end - x_begin} * pixel_bytes), x_end_(x_end),
        pixel_bytes_(pixel_bytes) {}

  bool Begin(uint32_t x0, uint32_t width, JpegPixels format) noexcept override {
    if (x0 > x_begin_ || x0 + width < x_end_ || JpegPixelBytes(format) != pixel_bytes_) return false;
    offset_ = size_t{x_begin_ - x0} * pixel_bytes_;
    format_ = SourcePixelsOf(format);
    return true;
  }
  void Row(const uint8_t* pixels) noexcept override {
    std::memcpy(rows_ + size_t{rows_seen_} * bytes_, pixels + offset_, bytes_);
    ++rows_seen_;
  }

  SourcePixels format() const { return format_; }
  uint32_t rows_seen() const { return rows_seen_; }

 private:
  uint8_t* rows_;
  uint32_t x_begin_;
  size_t bytes_;
  uint32_t x_end_;
  uint32_t pixel_bytes_;
  size_t offset_ = 0;
  uint32_t rows_seen_ = 0;
  SourcePixels format_ = SourcePixels::kRgbx;
};

}  // namespace

Status DecodeJpegCrops(std::string_view jpeg, const SharedCrop* crops, size_t count, DecodeScratch* scratch) {
  LMDBLOADER_RETURN_IF_ERROR(CheckCount(count));
  for (size_t k = 0; k < count; ++k) {
    Status s = CheckSpec(crops[k].spec);
    if (!s.ok()) return s.WithPrefix(CropName(k, count));
  }
  JpegHeader header;
  LMDBLOADER_RETURN_IF_ERROR(ReadDecodableHeader(jpeg, &header));
  uint32_t n = 1;
  for (size_t k = 0; k < count; ++k) {
    Status s = CheckBox(crops[k].box, header.width, header.height);
    if (!s.ok()) return s.WithPrefix(CropName(k, count));
    n = std::max(n, ChooseIdctScale(crops[k].box, crops[k].spec));
  }
  // Each crop's plan at scale n/8; the region decoded holds them all.
  JpegDecodePlan plans[kMaxCropsPerDecode];
  JpegRegionRequest request;
  for (size_t k = 0; k < count; ++k) {
    PlanJpegDecodeAt(header, crops[k].box, n, &plans[k]);
    const JpegRegionRequest& r = plans[k].request;
    if (k == 0) {
      request = r;
      continue;
    }
    request.x_begin = std::min(request.x_begin, r.x_begin);
    request.x_end = std::max(request.x_end, r.x_end);
    request.y_begin = std::min(request.y_begin, r.y_begin);
    request.y_end = std::max(request.y_end, r.y_end);
  }
  // Luma alone where every crop is gray and the JPEG not CMYK (jpeg_decoder.h).
  request.gray = header.components != 4;
  for (size_t k = 0; k < count; ++k) request.gray = request.gray && crops[k].spec.grayscale;
  const uint32_t pixel_bytes = request.gray ? 1 : 4;
  DecodeScratch::Rep* rep = ScratchAccess::Get(scratch);
  ScratchUse use(rep);
  const uint32_t width = request.x_end - request.x_begin, rows = request.y_end - request.y_begin;
  const size_t row_bytes = size_t{width} * pixel_bytes, need = row_bytes * rows;
  if (need > rep->max_bytes) {
    return Status::InvalidArgument("decoding " + std::to_string(width) + "x" + std::to_string(rows) +
                                   " pixels for " + std::to_string(count) + " crops needs " + std::to_string(need) +
                                   " bytes of scratch, more than its cap of " + std::to_string(rep->max_bytes));
  }
  try {
    rep->decoded.resize(need);
  } catch (const std::bad_alloc&) {
    return Status::InvalidArgument("out of memory for " + std::to_string(need) + " bytes of decoded pixels");
  }
  StoreSink sink(rep->decoded.data(), request.x_begin, request.x_end, pixel_bytes);
  bool refused = false;
  LMDBLOADER_RETURN_IF_ERROR(DecodeJpegRegion(jpeg, header, request, &sink, &refused));
  if (refused || sink.rows_seen() != rows) {
    return Status::DecodeError("JPEG: the decoder delivered other columns or fewer rows than asked for");
  }
  for (size_t k = 0; k < count; ++k) {
    const JpegRegionRequest& r = plans[k].request;
    const uint8_t* first = rep->decoded.data() + size_t{r.y_begin - request.y_begin} * row_bytes +
                           size_t{r.x_begin - request.x_begin} * pixel_bytes;
    Status s = ResampleRows(first, row_bytes, sink.format(), plans[k].geometry, crops[k].spec, rep, crops[k].out);
    if (!s.ok()) return s.WithPrefix(CropName(k, count));
  }
  return Status::OK();
}

Status ResampleRgbCrops(const uint8_t* rgb, uint32_t width, uint32_t height, size_t row_stride,
                        const SharedCrop* crops, size_t count, DecodeScratch* scratch) {
  LMDBLOADER_RETURN_IF_ERROR(CheckCount(count));
  for (size_t k = 0; k < count; ++k) {
    Status s = ResampleRgbInto(rgb, width, height, row_stride, crops[k].box, crops[k].spec, scratch, crops[k].out);
    if (!s.ok()) return s.WithPrefix(CropName(k, count));
  }
  return Status::OK();
}

}  // namespace lmdbloader
