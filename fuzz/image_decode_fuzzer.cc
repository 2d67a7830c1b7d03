// libFuzzer harness: image bytes through the header reader, then the fused
// decode (or the resize of raw RGB pixels), with a crop box, an output size
// and the options taken from the input's first 8 bytes:
//   [0] flags: 1 HWC, 2 uint8, 4 flip, 8 IDCT scaling, 16 fractional box,
//       32 treat the rest as RGB pixels (ResampleRgbInto) instead of a JPEG,
//       64 the box reaches the last row (the JPEG is then read to its end
//       marker, as PIL reads it; otherwise only the rest of the scan is
//       searched for the marker that ends it), 128 one gray channel (a JPEG's
//       luma decoded alone)
//   [1] [2] output width and height - 1
//   [3..6] the box's left, top, width and height as fractions of the image
//   [7] the RGB image's width - 1 (with flag 32)
// Images claiming more than 4 megapixels are only parsed, not decoded:
// decoding time grows with the pixels a header claims, not the bytes given.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "lmdbloader/image_decode.h"

namespace {

constexpr uint64_t kMaxDecodedPixels = uint64_t{4} << 20;

lmdbloader::CropBox Box(const uint8_t* p, uint32_t width, uint32_t height, bool fractional, bool to_bottom) {
  const double fl = p[0] / 255.0, ft = p[1] / 255.0, fw = p[2] / 255.0, fh = p[3] / 255.0;
  lmdbloader::CropBox box;
  box.left = fl * (width - 1);
  box.top = ft * (height - 1);
  box.width = (width - box.left) * fw;
  box.height = (height - box.top) * fh;
  if (!fractional) {
    box.left = static_cast<uint32_t>(box.left);
    box.top = static_cast<uint32_t>(box.top);
    box.width = static_cast<uint32_t>(box.width);
    box.height = static_cast<uint32_t>(box.height);
  }
  if (box.width <= 0) box.width = fractional ? 0.25 : 1;
  if (box.height <= 0) box.height = fractional ? 0.25 : 1;
  if (to_bottom) box.height = height - box.top;
  return box;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  const uint8_t flags = data[0];
  lmdbloader::OutputSpec spec;
  spec.layout = (flags & 1) ? lmdbloader::PixelLayout::kHWC : lmdbloader::PixelLayout::kCHW;
  spec.type = (flags & 2) ? lmdbloader::PixelType::kUint8 : lmdbloader::PixelType::kFloat32;
  spec.flip = flags & 4;
  spec.scale_in_idct = flags & 8;
  spec.grayscale = flags & 128;
  spec.width = data[1] + 1u;
  spec.height = data[2] + 1u;
  const std::string_view rest(reinterpret_cast<const char*>(data + 8), size - 8);
  static lmdbloader::DecodeScratch scratch;
  std::vector<uint8_t> out(spec.bytes());

  if (flags & 32) {
    const uint32_t width = data[7] + 1u;
    const uint32_t height = static_cast<uint32_t>(rest.size() / (size_t{width} * 3));
    if (height == 0) return 0;
    lmdbloader::ResampleRgbInto(reinterpret_cast<const uint8_t*>(rest.data()), width, height, size_t{width} * 3,
                                Box(data + 3, width, height, flags & 16, flags & 64), spec, &scratch, out.data())
        .IgnoreError();
    return 0;
  }
  lmdbloader::ImageInfo info;
  if (!lmdbloader::ReadImageInfo(rest, &info).ok() || info.format != lmdbloader::ImageFormat::kJpeg) return 0;
  if (uint64_t{info.width} * info.height > kMaxDecodedPixels) return 0;
  const lmdbloader::CropBox box = Box(data + 3, info.width, info.height, flags & 16, flags & 64);
  lmdbloader::DecodeJpegInto(rest, box, spec, &scratch, out.data()).IgnoreError();
  return 0;
}
