// The public image API (lmdbloader/image_decode.h): checks the caller's
// arguments, picks the IDCT scale and the region to decode, and joins the
// JPEG decoder (jpeg_decoder.h) to the resampler (resample.h).
#include "lmdbloader/image_decode.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "base/enum_names.h"
#include "image/colour_ops.h"
#include "image/decode_plan.h"

namespace lmdbloader {

namespace {

std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

}  // namespace

Status CheckSpec(const OutputSpec& spec) {
  if (spec.width == 0 || spec.height == 0 || spec.width > kMaxOutputSide || spec.height > kMaxOutputSide ||
      uint64_t{spec.width} * spec.height > kMaxImagePixels) {
    return Status::InvalidArgument("output size " + std::to_string(spec.width) + "x" + std::to_string(spec.height) +
                                   " is not 1 to " + std::to_string(kMaxOutputSide) + " a side");
  }
  if (spec.layout != PixelLayout::kCHW && spec.layout != PixelLayout::kHWC) {
    return Status::InvalidArgument("output layout is neither CHW nor HWC");
  }
  if (spec.type == PixelType::kFloat32) {
    for (int c = 0; c < 3; ++c) {
      if (!std::isfinite(spec.mean[c]) || !std::isfinite(spec.std[c]) || spec.std[c] == 0.0f) {
        return Status::InvalidArgument("normalization of channel " + std::to_string(c) + ": mean " +
                                       Number(spec.mean[c]) + ", std " + Number(spec.std[c]) +
                                       " (both finite, std non-zero)");
      }
    }
  } else if (spec.type != PixelType::kUint8) {
    return Status::InvalidArgument("output type is neither float32 nor uint8");
  }
  if (spec.interpolation != Interpolation::kBilinear && spec.interpolation != Interpolation::kBicubic) {
    return Status::InvalidArgument("interpolation is neither bilinear nor bicubic");
  }
  return Status::OK();
}

Status CheckBox(const CropBox& b, uint32_t width, uint32_t height) {
  const bool finite = std::isfinite(b.left) && std::isfinite(b.top) && std::isfinite(b.width) &&
                      std::isfinite(b.height);
  if (!finite || b.width <= 0 || b.height <= 0 || b.left < 0 || b.top < 0 || b.left + b.width > width ||
      b.top + b.height > height) {
    return Status::InvalidArgument("crop box (left " + Number(b.left) + ", top " + Number(b.top) + ", width " +
                                   Number(b.width) + ", height " + Number(b.height) +
                                   ") is empty or not inside the " + std::to_string(width) + "x" +
                                   std::to_string(height) + " image");
  }
  return Status::OK();
}

// Only 1/8, 2/8 and 4/8: libjpeg-turbo has SIMD inverse DCTs for those and
// 8/8, and its C ones for 3/8 and 5/8 to 7/8 cost more than decoding at full
// size (measured on 350-500 px photos: 8/8 0.82 ms, 4/8 0.63, 5/8 1.00, 7/8
// 1.74). Why the box must stay 1.5 times the output: decode_plan.h.
uint32_t ChooseIdctScale(const CropBox& box, const OutputSpec& spec) {
  if (!spec.scale_in_idct) return 8;
  for (uint32_t n = 1; n < 8; n *= 2) {
    if (box.width * n / 8 >= kIdctMinShrink * spec.width && box.height * n / 8 >= kIdctMinShrink * spec.height) {
      return n;
    }
  }
  return 8;
}

namespace {

// Feeds the decoder's rows to the resampler from the crop's first column.
class ResampleSink : public RowSink {
 public:
  ResampleSink(Resampler* resampler, uint32_t x_begin, uint32_t x_end)
      : resampler_(resampler), x_begin_(x_begin), x_end_(x_end) {}

  bool Begin(uint32_t x0, uint32_t width, JpegPixels format) noexcept override {
    if (x0 > x_begin_ || x0 + width < x_end_) return false;
    offset_ = size_t{x_begin_ - x0} * JpegPixelBytes(format);
    format_ = SourcePixelsOf(format);
    return true;
  }
  void Row(const uint8_t* pixels) noexcept override { resampler_->PushRow(pixels + offset_, format_); }

 private:
  Resampler* resampler_;
  uint32_t x_begin_, x_end_;
  size_t offset_ = 0;
  SourcePixels format_ = SourcePixels::kRgbx;
};

Status DecodeOne(std::string_view jpeg, const CropBox& box, const OutputSpec& spec, DecodeScratch::Rep* rep,
                 void* out) {
  JpegHeader header;
  LMDBLOADER_RETURN_IF_ERROR(ReadDecodableHeader(jpeg, &header));
  LMDBLOADER_RETURN_IF_ERROR(CheckBox(box, header.width, header.height));
  JpegDecodePlan plan;
  PlanJpegDecode(header, box, spec, &plan);
  JpegRegionRequest& request = plan.request;
  OutputSpec inner;
  void* target = out;
  LMDBLOADER_RETURN_IF_ERROR(ColourTarget(spec, rep, &inner, &target));
  Resampler resampler(rep);
  LMDBLOADER_RETURN_IF_ERROR(resampler.Prepare(plan.geometry, inner, target));
  // Rows below the last one a window reads are not decoded, unless the
  // data below may hold what would make PIL refuse the image
  // (jpeg_decoder.h, read_to_end).
  request.y_end = request.y_begin + resampler.rows_needed();

  ResampleSink sink(&resampler, request.x_begin, request.x_end);
  bool refused = false;
  LMDBLOADER_RETURN_IF_ERROR(DecodeJpegRegion(jpeg, header, request, &sink, &refused));
  if (refused || !resampler.done()) {
    return Status::DecodeError("JPEG: the decoder delivered other columns or fewer rows than asked for");
  }
  if (spec.colour.count > 0) FinishColour(spec, rep, out);
  return Status::OK();
}

}  // namespace

Status ReadDecodableHeader(std::string_view jpeg, JpegHeader* header) {
  if (!LooksLikeJpeg(jpeg)) return Status::DecodeError("not a JPEG (no SOI marker)");
  LMDBLOADER_RETURN_IF_ERROR(ParseJpegHeader(jpeg, header));
  if (!header->decodable) {
    char what[96];
    std::snprintf(what, sizeof(what), "(%u-bit, %u components, frame marker 0xFF%02X)", header->precision,
                  header->components, header->sof_marker);
    return Status::DecodeError(std::string("a JPEG variant libjpeg-turbo 2.1 does not decode ") + what);
  }
  return Status::OK();
}

void PlanJpegDecode(const JpegHeader& header, const CropBox& box, const OutputSpec& spec, JpegDecodePlan* plan) {
  PlanJpegDecodeAt(header, box, ChooseIdctScale(box, spec), plan);
  plan->request.gray = spec.grayscale;  // the luma alone, where the JPEG has one (jpeg_decoder.h)
}

void PlanJpegDecodeAt(const JpegHeader& header, const CropBox& box, uint32_t n, JpegDecodePlan* plan) {
  const double f = n / 8.0;
  const uint32_t sw = JpegScaledSize(header.width, n), sh = JpegScaledSize(header.height, n);
  const double left = box.left * f, top = box.top * f, width = box.width * f, height = box.height * f;
  JpegRegionRequest& r = plan->request;
  r.scale_num = n;
  BoxPixels(left, left + width, sw, &r.x_begin, &r.x_end);
  BoxPixels(top, top + height, sh, &r.y_begin, &r.y_end);
  ResampleGeometry& g = plan->geometry;
  g.src_width = r.x_end - r.x_begin;
  g.src_rows = r.y_end - r.y_begin;
  g.box_left = left - r.x_begin;
  g.box_top = top - r.y_begin;
  g.box_width = width;
  g.box_height = height;
}

DecodeScratch::DecodeScratch(size_t max_bytes, size_t keep_bytes) : rep_(new Rep) {
  rep_->max_bytes = max_bytes;
  rep_->keep_bytes = keep_bytes;
}

DecodeScratch::~DecodeScratch() = default;

size_t DecodeScratch::bytes() const { return rep_->bytes(); }
size_t DecodeScratch::max_bytes() const { return rep_->max_bytes; }
void DecodeScratch::Release() { rep_->Release(); }

namespace {

constexpr EnumName<PixelLayout> kPixelLayouts[] = {{PixelLayout::kCHW, "CHW"}, {PixelLayout::kHWC, "HWC"}};
constexpr EnumName<PixelType> kPixelTypes[] = {{PixelType::kFloat32, "float32"}, {PixelType::kUint8, "uint8"}};
constexpr EnumName<Interpolation> kInterpolations[] = {{Interpolation::kBilinear, "bilinear"},
                                                       {Interpolation::kBicubic, "bicubic"}};

template <typename E, size_t N>
std::vector<std::string> NamesOf(const EnumName<E> (&table)[N]) {
  std::vector<std::string> out;
  for (const EnumName<E>& e : table) out.emplace_back(e.name);
  return out;
}

}  // namespace

std::vector<std::string> PixelLayoutNames() { return NamesOf(kPixelLayouts); }
std::vector<std::string> PixelTypeNames() { return NamesOf(kPixelTypes); }
std::vector<std::string> InterpolationNames() { return NamesOf(kInterpolations); }
Status ParseInterpolation(std::string_view name, Interpolation* interpolation) {
  return ParseName(kInterpolations, "interpolation", name, interpolation);
}
Status ParsePixelLayout(std::string_view name, PixelLayout* layout) {
  return ParseName(kPixelLayouts, "layout", name, layout);
}
Status ParsePixelType(std::string_view name, PixelType* type) { return ParseName(kPixelTypes, "dtype", name, type); }

Status ReadImageInfo(std::string_view encoded, ImageInfo* info) {
  *info = ImageInfo();
  if (!LooksLikeJpeg(encoded)) return Status::OK();
  JpegHeader header;
  LMDBLOADER_RETURN_IF_ERROR(ParseJpegHeader(encoded, &header));
  info->width = header.width;
  info->height = header.height;
  info->components = header.components;
  info->format = header.decodable ? ImageFormat::kJpeg : ImageFormat::kOther;
  return Status::OK();
}

Status DecodeJpegInto(std::string_view jpeg, const CropBox& box, const OutputSpec& spec, DecodeScratch* scratch,
                      void* out) {
  LMDBLOADER_RETURN_IF_ERROR(CheckSpec(spec));
  ScratchUse use(ScratchAccess::Get(scratch));
  return DecodeOne(jpeg, box, spec, ScratchAccess::Get(scratch), out);
}

Status ResampleRgbInto(const uint8_t* rgb, uint32_t width, uint32_t height, size_t row_stride, const CropBox& box,
                       const OutputSpec& spec, DecodeScratch* scratch, void* out) {
  LMDBLOADER_RETURN_IF_ERROR(CheckSpec(spec));
  if (rgb == nullptr || width == 0 || height == 0 || row_stride < size_t{width} * 3) {
    return Status::InvalidArgument("RGB pixels: " + std::to_string(width) + "x" + std::to_string(height) +
                                   " with rows of " + std::to_string(row_stride) + " bytes");
  }
  LMDBLOADER_RETURN_IF_ERROR(CheckBox(box, width, height));
  ScratchUse use(ScratchAccess::Get(scratch));
  uint32_t x_begin, x_end, y_begin, y_end;
  BoxPixels(box.left, box.left + box.width, width, &x_begin, &x_end);
  BoxPixels(box.top, box.top + box.height, height, &y_begin, &y_end);
  ResampleGeometry g;
  g.src_width = x_end - x_begin;
  g.src_rows = y_end - y_begin;
  g.box_left = box.left - x_begin;
  g.box_top = box.top - y_begin;
  g.box_width = box.width;
  g.box_height = box.height;
  return ResampleRows(rgb + y_begin * row_stride + size_t{x_begin} * 3, row_stride, SourcePixels::kRgb, g, spec,
                      ScratchAccess::Get(scratch), out);
}

Status ResampleRows(const uint8_t* first, size_t row_stride, SourcePixels format, const ResampleGeometry& geometry,
                    const OutputSpec& spec, DecodeScratch::Rep* rep, void* out) {
  OutputSpec inner;
  void* target = out;
  LMDBLOADER_RETURN_IF_ERROR(ColourTarget(spec, rep, &inner, &target));
  Resampler resampler(rep);
  LMDBLOADER_RETURN_IF_ERROR(resampler.Prepare(geometry, inner, target));
  for (uint32_t y = 0; y < resampler.rows_needed(); ++y) resampler.PushRow(first + y * row_stride, format);
  if (spec.colour.count > 0) FinishColour(spec, rep, out);
  return Status::OK();
}

Status DecodeJpegBatch(const std::string_view* jpegs, const CropBox* boxes, const bool* flips, size_t count,
                       const OutputSpec& spec, DecodeScratch* scratch, void* out, size_t* failed_index) {
  return DecodeJpegBatch(jpegs, boxes, flips, nullptr, count, spec, scratch, out, failed_index);
}

Status DecodeJpegBatch(const std::string_view* jpegs, const CropBox* boxes, const bool* flips,
                       const ColourOps* colours, size_t count, const OutputSpec& spec, DecodeScratch* scratch,
                       void* out, size_t* failed_index) {
  *failed_index = 0;
  LMDBLOADER_RETURN_IF_ERROR(CheckSpec(spec));
  ScratchUse use(ScratchAccess::Get(scratch));
  OutputSpec one = spec;
  const size_t stride = spec.bytes();
  for (size_t i = 0; i < count; ++i) {
    one.flip = flips != nullptr && flips[i];
    one.colour = colours != nullptr ? colours[i] : ColourOps();
    Status s = DecodeOne(jpegs[i], boxes[i], one, ScratchAccess::Get(scratch), static_cast<uint8_t*>(out) + i * stride);
    if (!s.ok()) {
      *failed_index = i;
      return s.WithPrefix("image " + std::to_string(i) + " of " + std::to_string(count) + ": ")
          .WithReason(Status::Reason::kBatchItem, static_cast<uint32_t>(i));
    }
  }
  return Status::OK();
}

}  // namespace lmdbloader
