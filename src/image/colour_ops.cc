#include "image/colour_ops.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "base/enum_names.h"
#include "image/blur.h"

namespace lmdbloader {

namespace {

constexpr EnumName<ColourOpKind> kColourOps[] = {{ColourOpKind::kBrightness, "brightness"},
                                                 {ColourOpKind::kContrast, "contrast"},
                                                 {ColourOpKind::kSaturation, "saturation"},
                                                 {ColourOpKind::kHue, "hue"},
                                                 {ColourOpKind::kGrayscale, "grayscale"},
                                                 {ColourOpKind::kSolarize, "solarize"},
                                                 {ColourOpKind::kBlur, "blur"}};

// PIL's L of an RGB pixel.
inline int Luma(const uint8_t* p) { return (p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16; }

// Pillow's ImagingBlend of one level: gray + f * (level - gray) in float,
// truncated, clamped to 0..255.
inline uint8_t Blend(int gray, int level, float f) {
  const float t = static_cast<float>(gray) + f * static_cast<float>(level - gray);
  if (t <= 0.0f) return 0;
  if (t >= 255.0f) return 255;
  return static_cast<uint8_t>(t);
}

// Pillow's rgb2hsv of one pixel (its Convert.c, after colorsys): float
// ratios, the hue's offset and wrap in double, both scaled by 255 and
// truncated. Written with Pillow's types so each step rounds where its does.
inline void RgbToHsv(const uint8_t* p, int* h, int* s, int* v) {
  const int r = p[0], g = p[1], b = p[2];
  const int maxc = std::max(r, std::max(g, b)), minc = std::min(r, std::min(g, b));
  *v = maxc;
  if (maxc == minc) {
    *h = *s = 0;
    return;
  }
  const float range = static_cast<float>(maxc - minc);
  const float sat = range / static_cast<float>(maxc);
  const float rc = static_cast<float>(maxc - r) / range;
  const float gc = static_cast<float>(maxc - g) / range;
  const float bc = static_cast<float>(maxc - b) / range;
  float hue;
  if (r == maxc) {
    hue = bc - gc;
  } else if (g == maxc) {
    hue = static_cast<float>(2.0 + rc - bc);
  } else {
    hue = static_cast<float>(4.0 + gc - rc);
  }
  // Pillow's fmod(hue / 6 + 1, 1) of a value in [5/6, 11/6]: subtracting
  // 1 is exact there, and a libm call less.
  const double turn = hue / 6.0 + 1.0;
  hue = static_cast<float>(turn >= 1.0 ? turn - 1.0 : turn);
  *h = std::min(static_cast<int>(hue * 255.0), 255);  // both >= 0
  *s = std::min(static_cast<int>(sat * 255.0), 255);
}

// round() of a value >= 0, half away from zero, without a libm call: x - k
// is exact for k = trunc(x) (Sterbenz).
inline int RoundUp(double x) {
  const int k = static_cast<int>(x);
  return k + (x - k >= 0.5 ? 1 : 0);
}

}  // namespace

HsvTables::HsvTables() {
  for (int i = 0; i < 256; ++i) {
    sector[i] = static_cast<int>(std::floor(static_cast<float>(i) * 6.0 / 255.0)) % 6;
    remainder[i] = static_cast<float>(static_cast<float>(i) * 6.0 / 255.0 -
                                      static_cast<float>(std::floor(static_cast<float>(i) * 6.0 / 255.0)));
    saturation[i] = static_cast<float>(static_cast<float>(i) / 255.0);
  }
}

const HsvTables& Hsv() {
  static const HsvTables tables;
  return tables;
}

namespace {

// Pillow's hsv2rgb of one pixel: the sector and remainder in double, the
// remainder and saturation kept in float, each level rounded half away
// from zero (the values are >= 0 and at most v: no clamp needed).
inline void HsvToRgb(const HsvTables& t, int h, int s, int v, uint8_t* p) {
  if (s == 0) {
    p[0] = p[1] = p[2] = static_cast<uint8_t>(v);
    return;
  }
  const float f = t.remainder[h], fs = t.saturation[s];
  const float fv = static_cast<float>(v);
  const float fsf = fs * f;  // a float product, as Pillow's
  const int lo = RoundUp(fv * (1.0 - fs));
  const int down = RoundUp(fv * (1.0 - fsf));
  const int up = RoundUp(fv * (1.0 - fs * (1.0 - f)));
  int rgb[3];
  switch (t.sector[h]) {
    case 0: rgb[0] = v, rgb[1] = up, rgb[2] = lo; break;
    case 1: rgb[0] = down, rgb[1] = v, rgb[2] = lo; break;
    case 2: rgb[0] = lo, rgb[1] = v, rgb[2] = up; break;
    case 3: rgb[0] = lo, rgb[1] = down, rgb[2] = v; break;
    case 4: rgb[0] = up, rgb[1] = lo, rgb[2] = v; break;
    default: rgb[0] = v, rgb[1] = lo, rgb[2] = down; break;
  }
  for (int c = 0; c < 3; ++c) p[c] = static_cast<uint8_t>(rgb[c]);
}

// out[i] = table[in[i]] (in may be out): eight levels a load and a store.
void Lookup(const uint8_t (&table)[256], const uint8_t* in, size_t n, uint8_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, in + i, 8);
    uint64_t v = 0;
    for (int b = 0; b < 8; ++b) v |= uint64_t{table[(w >> (8 * b)) & 255]} << (8 * b);
    std::memcpy(out + i, &v, 8);
  }
  for (; i < n; ++i) out[i] = table[in[i]];
}

// int(mean of L + 0.5), as ImageEnhance.Contrast takes it (ImageStat's mean
// is the sum over the count in double), of the levels through `table`.
int MeanGray(const uint8_t* p, size_t pixels, uint32_t channels, const uint8_t* table) {
  uint64_t sum = 0;
  if (table == nullptr) {
    if (channels == 1) {
      for (size_t i = 0; i < pixels; ++i) sum += p[i];
    } else {
      for (size_t i = 0; i < pixels; ++i) sum += static_cast<uint64_t>(Luma(p + i * 3));
    }
  } else if (channels == 1) {
    for (size_t i = 0; i < pixels; ++i) sum += table[p[i]];
  } else {
    for (size_t i = 0; i < pixels; ++i, p += 3) {
      const uint8_t rgb[3] = {table[p[0]], table[p[1]], table[p[2]]};
      sum += static_cast<uint64_t>(Luma(rgb));
    }
  }
  return static_cast<int>(static_cast<double>(sum) / static_cast<double>(pixels) + 0.5);
}

// ImageEnhance.Color: each level blended with its pixel's L. A block of
// pixels at a time: their L spread to a level each, then one loop over the
// levels that the compiler vectorizes (Blend's float steps, min and max).
void Saturate(uint8_t* p, size_t pixels, float f) {
  constexpr size_t kBlock = 256;
  alignas(64) int32_t gray[kBlock * 3];
  for (size_t at = 0; at < pixels; at += kBlock) {
    const size_t n = std::min(kBlock, pixels - at);
    uint8_t* q = p + at * 3;
    for (size_t i = 0; i < n; ++i) gray[i * 3] = gray[i * 3 + 1] = gray[i * 3 + 2] = Luma(q + i * 3);
    for (size_t j = 0; j < n * 3; ++j) {
      const float t = static_cast<float>(gray[j]) + f * static_cast<float>(q[j] - gray[j]);
      q[j] = static_cast<uint8_t>(static_cast<int>(std::min(std::max(t, 0.0f), 255.0f)));
    }
  }
}

// The ops that change a level whatever its pixel (brightness, contrast,
// solarize) become a table of 256 levels; consecutive ones are composed and
// applied in one pass, or by the caller as the image is written out.
// Contrast's mean is taken through the table so far.
bool TableOf(const ColourOp& op, const uint8_t* p, size_t pixels, uint32_t channels, bool pending,
             uint8_t (&table)[256]) {
  uint8_t next[256];
  switch (op.kind) {
    case ColourOpKind::kBrightness:
      for (int v = 0; v < 256; ++v) next[v] = Blend(0, v, op.value);
      break;
    case ColourOpKind::kContrast: {
      const int gray = MeanGray(p, pixels, channels, pending ? table : nullptr);
      for (int v = 0; v < 256; ++v) next[v] = Blend(gray, v, op.value);
      break;
    }
    case ColourOpKind::kSolarize:
      for (int v = 0; v < 256; ++v) next[v] = static_cast<float>(v) < op.value ? v : 255 - v;
      break;
    default:
      return false;
  }
  for (int v = 0; v < 256; ++v) table[v] = next[pending ? table[v] : v];
  return true;
}

// The ops that need each pixel whole; on one channel (its own L) saturation,
// hue and grayscale change nothing.
void ApplyPixelOp(const ColourOp& op, uint8_t* p, uint32_t width, uint32_t height, uint32_t channels,
                  float* work) {
  const size_t pixels = size_t{width} * height;
  if (op.kind == ColourOpKind::kBlur) {
    Blur(op.kernel, op.value, p, width, height, channels, work);
    return;
  }
  if (channels == 1) return;
  switch (op.kind) {
    case ColourOpKind::kSaturation:
      Saturate(p, pixels, op.value);
      return;
    case ColourOpKind::kHue:
      // torchvision's adjust_hue of a PIL image: to HSV, the hue plus
      // uint8(int32(factor * 255)) modulo 256, back to RGB.
      ShiftHue(p, pixels, static_cast<int>(static_cast<double>(op.value) * 255.0) & 255);
      return;
    case ColourOpKind::kGrayscale:
      for (size_t i = 0; i < pixels; ++i, p += 3) p[0] = p[1] = p[2] = static_cast<uint8_t>(Luma(p));
      return;
    default:
      return;
  }
}

}  // namespace

void ShiftHuePortable(uint8_t* p, size_t pixels, int shift) {
  const HsvTables& tables = Hsv();
  for (size_t i = 0; i < pixels; ++i, p += 3) {
    int h, s, v;
    RgbToHsv(p, &h, &s, &v);
    HsvToRgb(tables, (h + shift) & 255, s, v, p);
  }
}

void ShiftHue(uint8_t* p, size_t pixels, int shift) {
  size_t done = 0;
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) done = ShiftHueAvx2(p, pixels, shift, Hsv());
#endif
  ShiftHuePortable(p + done * 3, pixels - done, shift);
}

namespace {

bool HasBlur(const ColourOps& ops) {
  for (uint32_t i = 0; i < ops.count; ++i)
    if (ops.ops[i].kind == ColourOpKind::kBlur) return true;
  return false;
}

// Applies ops but for the last table ops, which it leaves in `table`: the
// levels the image's levels still become; false when there are none (the
// identity). `work`: BlurWorkFloats floats where ops blur, else unused.
bool ApplyAll(const ColourOps& ops, uint8_t* p, uint32_t width, uint32_t height, uint32_t channels, float* work,
              uint8_t (&table)[256]) {
  const size_t pixels = size_t{width} * height;
  for (int v = 0; v < 256; ++v) table[v] = static_cast<uint8_t>(v);
  bool pending = false;
  for (uint32_t i = 0; i < ops.count; ++i) {
    const ColourOp& op = ops.ops[i];
    if (TableOf(op, p, pixels, channels, pending, table)) {
      pending = true;
      continue;
    }
    const bool changes = op.kind == ColourOpKind::kBlur || channels == 3;
    if (!changes) continue;
    if (pending) {
      Lookup(table, p, pixels * channels, p);
      for (int v = 0; v < 256; ++v) table[v] = static_cast<uint8_t>(v);
      pending = false;
    }
    ApplyPixelOp(op, p, width, height, channels, work);
  }
  return pending;
}

}  // namespace

std::vector<std::string> ColourOpNames() {
  std::vector<std::string> out;
  for (const EnumName<ColourOpKind>& e : kColourOps) out.emplace_back(e.name);
  return out;
}

Status ParseColourOp(std::string_view name, ColourOpKind* kind) {
  return ParseName(kColourOps, "colour op", name, kind);
}

Status CheckColourOps(const ColourOps& ops) {
  if (ops.count > kMaxColourOps) {
    return Status::InvalidArgument(std::to_string(ops.count) + " colour ops; at most " +
                                   std::to_string(kMaxColourOps));
  }
  for (uint32_t i = 0; i < ops.count; ++i) {
    const ColourOp& op = ops.ops[i];
    const char* name = NameOf(kColourOps, op.kind);
    if (name == nullptr) return Status::InvalidArgument("colour op " + std::to_string(i) + " has no known kind");
    if (op.kind == ColourOpKind::kBlur) {
      if (!(std::isfinite(op.value) && op.value > 0.0f) || op.kernel % 2 == 0 || op.kernel > kMaxBlurKernel) {
        char v[64];
        std::snprintf(v, sizeof(v), "%g, kernel %u", double(op.value), op.kernel);
        return Status::InvalidArgument(std::string("blur sigma ") + v + " (sigma finite, > 0; kernel odd, 1 to " +
                                       std::to_string(kMaxBlurKernel) + ")");
      }
      continue;
    }
    const bool factor = op.kind != ColourOpKind::kGrayscale && op.kind != ColourOpKind::kSolarize;
    const bool hue = op.kind == ColourOpKind::kHue;
    if ((op.kind != ColourOpKind::kGrayscale && !std::isfinite(op.value)) ||
        (factor && !hue && op.value < 0.0f) || (hue && std::fabs(op.value) > 0.5f)) {
      char v[32];
      std::snprintf(v, sizeof(v), "%g", double(op.value));
      return Status::InvalidArgument(std::string(name) + (factor ? " factor " : " threshold ") + v +
                                     (hue ? " (-0.5 to 0.5)" : factor ? " (finite, >= 0)" : " (finite)"));
    }
  }
  return Status::OK();
}

namespace {

// torch pads a blurred image by reflection, kernel / 2 pixels a side, and
// refuses a pad that is not below the side it pads: so does the blur here
// (Reflect could mirror again, but that is no image torchvision makes).
Status CheckBlurFits(const ColourOps& ops, uint32_t width, uint32_t height) {
  for (uint32_t i = 0; i < ops.count; ++i) {
    const ColourOp& op = ops.ops[i];
    if (op.kind != ColourOpKind::kBlur || op.kernel / 2 < std::min(width, height)) continue;
    return Status::InvalidArgument("blur kernel " + std::to_string(op.kernel) + " is too large for a " +
                                   std::to_string(width) + "x" + std::to_string(height) +
                                   " image: torch's reflect padding of kernel / 2 = " + std::to_string(op.kernel / 2) +
                                   " pixels needs it below each side (a kernel of at most " +
                                   std::to_string(2 * std::min(width, height) - 1) + ")");
  }
  return Status::OK();
}

}  // namespace

Status ApplyColourOps(const ColourOps& ops, uint8_t* pixels, uint32_t width, uint32_t height, uint32_t channels) {
  LMDBLOADER_RETURN_IF_ERROR(CheckColourOps(ops));
  if (pixels == nullptr || width == 0 || height == 0 || (channels != 1 && channels != 3)) {
    return Status::InvalidArgument("colour ops need 1 or 3 channels of a non-empty image; got " +
                                   std::to_string(width) + "x" + std::to_string(height) + "x" +
                                   std::to_string(channels));
  }
  LMDBLOADER_RETURN_IF_ERROR(CheckBlurFits(ops, width, height));
  std::vector<float> work;
  try {
    if (HasBlur(ops)) work.resize(BlurWorkFloats(width, height, channels));
  } catch (const std::bad_alloc&) {
    return Status::IOError("out of memory for a blur of " + std::to_string(width) + "x" + std::to_string(height),
                           ENOMEM);
  }
  uint8_t table[256];
  if (ApplyAll(ops, pixels, width, height, channels, work.data(), table))
    Lookup(table, pixels, size_t{width} * height * channels, pixels);
  return Status::OK();
}

Status ColourTarget(const OutputSpec& spec, DecodeScratch::Rep* scratch, OutputSpec* inner, void** target) {
  *inner = spec;
  if (spec.colour.count == 0) return Status::OK();
  LMDBLOADER_RETURN_IF_ERROR(CheckColourOps(spec.colour));
  LMDBLOADER_RETURN_IF_ERROR(CheckBlurFits(spec.colour, spec.width, spec.height));
  inner->type = PixelType::kUint8;
  inner->layout = PixelLayout::kHWC;
  inner->colour.count = 0;
  const size_t blurred = HasBlur(spec.colour) ? BlurWorkFloats(spec.width, spec.height, spec.channels()) : 0;
  const size_t need = inner->bytes() + blurred * sizeof(float);
  if (need > scratch->max_bytes) {
    return Status::InvalidArgument("colour ops on a " + std::to_string(spec.width) + "x" +
                                   std::to_string(spec.height) + " output need " + std::to_string(need) +
                                   " bytes of scratch, more than its cap of " + std::to_string(scratch->max_bytes));
  }
  try {
    scratch->colour.resize(inner->bytes());
    scratch->blur.resize(blurred);
  } catch (const std::bad_alloc&) {
    scratch->Release();
    return Status::IOError("out of memory for " + std::to_string(need) + " bytes of image scratch", ENOMEM);
  }
  *target = scratch->colour.data();
  return Status::OK();
}

void FinishColour(const OutputSpec& spec, DecodeScratch::Rep* scratch, void* out) noexcept {
  uint8_t* p = scratch->colour.data();
  const uint32_t c = spec.channels();
  const size_t pixels = size_t{spec.width} * spec.height;
  uint8_t table[256];  // the last table ops, applied as the image is written
  const bool pending = ApplyAll(spec.colour, p, spec.width, spec.height, c, scratch->blur.data(), table);
  uint8_t* d = static_cast<uint8_t*>(out);
  if (spec.type == PixelType::kUint8) {
    if (spec.layout == PixelLayout::kHWC || c == 1) {
      if (!pending) {
        std::memcpy(d, p, pixels * c);
        return;
      }
      Lookup(table, p, pixels * c, d);
      return;
    }
    for (size_t i = 0; i < pixels; ++i)
      for (uint32_t ch = 0; ch < 3; ++ch) d[ch * pixels + i] = table[p[i * 3 + ch]];
    return;
  }
  // The resampler's normalization, level * scale + offset in float, of
  // each of the 256 levels through the table.
  float levels[3][256];
  for (uint32_t ch = 0; ch < c; ++ch) {
    const float scale = static_cast<float>(1.0 / (255.0 * double(spec.std[ch])));
    const float offset = static_cast<float>(-double(spec.mean[ch]) / double(spec.std[ch]));
    for (int v = 0; v < 256; ++v) levels[ch][v] = static_cast<float>(table[v]) * scale + offset;
  }
  const bool planes = spec.layout == PixelLayout::kCHW && c == 3;
  for (size_t i = 0; i < pixels; ++i)
    for (uint32_t ch = 0; ch < c; ++ch)
      std::memcpy(d + (planes ? ch * pixels + i : i * c + ch) * 4, &levels[ch][p[i * c + ch]], 4);
}

}  // namespace lmdbloader
