// Image decoding into a batch: a JPEG record (or pixels another decoder
// produced) cropped, resized, flipped and normalized in one pass, written
// straight into a caller's buffer (a batch's shared-memory slot).
//
// Why: torchvision's ImageNet recipe (PIL decode, RandomResizedCrop,
// ToTensor, Normalize) decodes every pixel of a photo, copies the crop,
// resizes it, converts it to float and normalizes it, each step a pass over
// memory of its own. Here the JPEG decoder decodes only the rows and columns
// the box covers (libjpeg-turbo's jpeg_skip_scanlines and jpeg_crop_scanline),
// shrinks in the inverse DCT when the box is larger than the output
// (scale_num/8), and the resampler writes the normalized result directly.
//
// Fidelity: the resampler is PIL's antialiased bilinear resize
// (Image.resize(size, BILINEAR) of the crop, which is what torchvision's
// resized_crop does with a PIL image): the same triangle filter widened by the
// downscale factor, the same window bounds, the same 22-bit fixed-point
// weights, the same rounding to 8 bits between the passes, in Pillow 13's
// order. A JPEG decoded at full size (no IDCT scaling) gives the same pixels
// as Pillow with libjpeg-turbo (islow IDCT, fancy upsampling), so the output
// then equals torchvision's but for sums within 1e-5 of a rounding tie, which
// the float sums here round either way (1-3% of values off by one level).
// With IDCT scaling the resize starts from a smaller image: the output
// differs from torchvision's by about a level of 255 on average
// (tests/python/test_image_decode.py reports the distribution).
//
// Limits (all refused with a Status, never a crash):
//   - an image whose header claims more than kMaxImagePixels pixels (PIL's
//     decompression-bomb limit) is refused before anything is allocated;
//   - an output larger than kMaxOutputSide a side or kMaxImagePixels in all;
//   - a progressive JPEG with more than kMaxJpegScans scans;
//   - libjpeg's own memory for one image is capped at kMaxJpegDecoderBytes
//     (a progressive JPEG keeps every coefficient of the image until the
//     last scan: 2 bytes a sample);
//   - a DecodeScratch refuses a decode that needs more than its cap.
//
// Damaged data is judged as PIL judges it (Image.open(...).convert("RGB");
// Pillow's JpegDecode.c ignores libjpeg's warnings), whatever the box:
// decoding around corrupt entropy data, extraneous bytes or a scan that
// ends early (grey rows) is not an error; libjpeg's errors are (a marker
// that makes no sense, a bad table), and so is data that ends before the
// last row ("truncated"), below the box included. Below the box the rows
// are decoded only when the data there is not a scan running into its
// end-of-image marker (a search of 1.2 us a photo, 0.2% of a decode;
// decoding them always would cost 7-8%: bench/image_bench.cc).
// tests/python/test_image_decode_damaged.py checks the verdicts against
// Pillow 13 on 350 damaged photos, for the whole image and for crop boxes.
//
// Caveats:
//   - Pillow's wheels carry libjpeg-turbo 3; this decoder uses the system's
//     (2.1 on Debian 12). The one difference in verdict found (a frame
//     header's marker where the end-of-image marker was: 3 refuses it, 2.1
//     would not) is made up for; others may hide in damage not tried.
//   - Decoding time grows with the pixels the header claims (the entropy
//     decoder walks every block above the box's last row, and below it in
//     data cut or damaged there), not with the size of the file.
//
// Thread-safety: the free functions are reentrant; calls from distinct
// threads need distinct DecodeScratch objects.
#ifndef LMDBLOADER_IMAGE_DECODE_H_
#define LMDBLOADER_IMAGE_DECODE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

// PIL's default Image.MAX_IMAGE_PIXELS (89,478,485) times two: above that
// PIL raises DecompressionBombError, below it only warns.
constexpr uint64_t kMaxImagePixels = 178956970;
// The longest output side accepted.
constexpr uint32_t kMaxOutputSide = 16384;
// Scans a progressive JPEG may have (libjpeg-turbo's own limit when asked to
// limit them; a photo has about 10). Each scan walks the whole image.
constexpr uint32_t kMaxJpegScans = 500;
// Memory libjpeg may allocate for one image.
constexpr uint64_t kMaxJpegDecoderBytes = uint64_t{1} << 30;

enum class ImageFormat {
  kJpeg,   // a JPEG that DecodeJpegInto decodes (8-bit, 1, 3 or 4 components)
  kOther,  // anything else, a JPEG variant libjpeg-turbo 2.1 cannot decode
           // (12-bit, lossless, hierarchical) included: decode it elsewhere
};

struct ImageInfo {
  uint32_t width = 0;       // pixels; 0 for kOther
  uint32_t height = 0;
  uint32_t components = 0;  // 1 (gray), 3 (YCbCr or RGB), 4 (CMYK or YCCK)
  ImageFormat format = ImageFormat::kOther;
};

// Reads a JPEG's frame header (SOF) without decoding anything: the size a
// crop box is drawn from. Data that does not start with a JPEG's SOI marker
// is format kOther and OK (decode it with another library). DecodeError for
// a JPEG whose markers up to the frame header are damaged or truncated, or
// whose header claims zero or more than kMaxImagePixels pixels.
Status ReadImageInfo(std::string_view encoded, ImageInfo* info);

// A region of the source image in its pixels: columns [left, left + width),
// rows [top, top + height). Fractions are allowed; torchvision draws whole
// pixels (RandomResizedCrop.get_params gives top i, left j, height h, width w).
// It must lie inside the image and be non-empty (else InvalidArgument).
struct CropBox {
  double left = 0;
  double top = 0;
  double width = 0;
  double height = 0;
};

enum class PixelLayout {
  kCHW,  // planes: out[c][y][x], as torchvision's to_tensor gives
  kHWC,  // interleaved: out[y][x][c], as PIL and numpy give
};

enum class PixelType {
  kFloat32,  // (v / 255 - mean[c]) / std[c], to_tensor then normalize
  kUint8,    // v, the resized value rounded and clamped (mean and std ignored)
};

// The resize's filter, PIL's antialiased ones (Image.resize(size, filter),
// what torchvision applies to PIL images): the filter widens by the factor
// an axis shrinks by.
enum class Interpolation {
  kBilinear,  // a triangle of support 1 (PIL's BILINEAR)
  kBicubic,   // Keys' cubic with a = -0.5, support 2 (PIL's BICUBIC); its
              // negative lobes can overshoot, clamped to 0..255 per pass
};

// The names every front spells layouts, types and filters with ("CHW",
// "HWC"; "float32", "uint8"; "bilinear", "bicubic"), from one table each
// (image_decode.cc), in the table's order. Parse* give InvalidArgument
// "layout must be one of CHW, HWC; got 'x'" for any other name.
std::vector<std::string> PixelLayoutNames();
std::vector<std::string> PixelTypeNames();
std::vector<std::string> InterpolationNames();
Status ParsePixelLayout(std::string_view name, PixelLayout* layout);
Status ParsePixelType(std::string_view name, PixelType* type);
Status ParseInterpolation(std::string_view name, Interpolation* interpolation);

// ImageNet's per-channel (R, G, B) mean and standard deviation on the 0-1
// scale, torchvision's Normalize for ImageNet: OutputSpec's defaults.
constexpr double kImageNetMean[3] = {0.485, 0.456, 0.406};
constexpr double kImageNetStd[3] = {0.229, 0.224, 0.225};

// Colour changes made to the resized crop as 8-bit levels, before the
// normalization (torchvision's transforms on PIL images after the crop and
// flip), each as Pillow 13 makes it:
//   brightness f: ImageEnhance.Brightness, Image.blend of black and the image;
//   contrast f: ImageEnhance.Contrast, a blend with the gray level
//     int(mean of the image's L + 0.5);
//   saturation f: ImageEnhance.Color, a blend with the image's L;
//   hue f (-0.5 to 0.5): torchvision's adjust_hue, PIL's convert("HSV"),
//     the hue plus uint8(int(f * 255)) modulo 256, and back to RGB;
//   grayscale: convert("L") back to three equal channels;
//   solarize t: ImageOps.solarize, every level >= t becomes 255 - level;
//   blur sigma, kernel k: torchvision's GaussianBlur (k odd), which blurs a
//     PIL image as a tensor: a k x k Gaussian of sigma (torch's float32
//     kernel), the image padded by reflection (mirrored without repeating
//     the edge), each level rounded half to even. torch's reflect padding
//     needs k / 2 below the image's width and height: a smaller image is
//     refused (InvalidArgument naming the kernel and the size), as torch
//     refuses it.
// A blend is Pillow's ImagingBlend: in float, gray + f * (level - gray),
// truncated toward zero and clamped to 0..255. L is PIL's luma,
// (19595 R + 38470 G + 7471 B + 2^15) >> 16. On one channel (grayscale
// output) a level is its own L: saturation, hue and grayscale change nothing.
enum class ColourOpKind : uint8_t { kBrightness, kContrast, kSaturation, kHue, kGrayscale, kSolarize, kBlur };

struct ColourOp {
  ColourOpKind kind = ColourOpKind::kBrightness;
  // The factor (brightness, contrast, saturation: finite, >= 0; hue: -0.5
  // to 0.5), the threshold (solarize: finite) or sigma (blur: finite, > 0);
  // grayscale ignores it.
  float value = 1.0f;
  uint32_t kernel = 0;  // blur: the kernel's size, odd, 1 to kMaxBlurKernel
};

constexpr uint32_t kMaxColourOps = 8;
constexpr uint32_t kMaxBlurKernel = 255;

// The changes made to one image, ops[0] first.
struct ColourOps {
  uint32_t count = 0;
  ColourOp ops[kMaxColourOps];
};

// "brightness", "contrast", "saturation", "hue", "grayscale", "solarize", "blur": the names
// every front spells the ops with. ParseColourOp: InvalidArgument "colour op
// must be one of ...; got 'x'" for another name.
std::vector<std::string> ColourOpNames();
Status ParseColourOp(std::string_view name, ColourOpKind* kind);

// InvalidArgument for more than kMaxColourOps ops, an unknown kind, a
// factor out of its range or not finite, a threshold that is not finite, a
// blur's sigma not finite and above 0 or its kernel not odd from 1 to
// kMaxBlurKernel. The image's size is not checked (ApplyColourOps does).
Status CheckColourOps(const ColourOps& ops);

// Applies ops to `height` rows of `width` pixels of `channels` (1 or 3)
// interleaved 8-bit levels, in place (what the decoders do to each image
// whose spec has ops). InvalidArgument for a bad op or size, and for a
// blur whose kernel / 2 is not below both width and height.
Status ApplyColourOps(const ColourOps& ops, uint8_t* pixels, uint32_t width, uint32_t height, uint32_t channels);

// What each image becomes.
struct OutputSpec {
  uint32_t width = 224;
  uint32_t height = 224;
  PixelLayout layout = PixelLayout::kCHW;
  PixelType type = PixelType::kFloat32;
  // Per channel (R, G, B); float32 only. std must be finite and non-zero.
  // Default: ImageNet's.
  float mean[3] = {float(kImageNetMean[0]), float(kImageNetMean[1]), float(kImageNetMean[2])};
  float std[3] = {float(kImageNetStd[0]), float(kImageNetStd[1]), float(kImageNetStd[2])};
  // Mirror left to right after resizing (RandomHorizontalFlip).
  bool flip = false;
  // The resize's filter. Default: bilinear.
  Interpolation interpolation = Interpolation::kBilinear;
  // One channel: each pixel's luma before the resize, as torchvision's
  // Grayscale on a PIL image; normalized with mean[0] and std[0]. From RGB
  // pixels (and CMYK JPEGs) PIL's convert("L"): (19595 R + 38470 G +
  // 7471 B + 2^15) >> 16; from a JPEG of 1 or 3 components its Y plane,
  // decoded without the chroma, which is that L of its RGB but where the
  // RGB clips (under a level on average). Default: false (R, G, B).
  bool grayscale = false;
  // Colour changes after the resize and flip, before the normalization.
  // With any, the image is resized into the scratch first, then changed
  // and written out: a second pass over the output.
  ColourOps colour;

  uint32_t channels() const { return grayscale ? 1 : 3; }
  // Let the JPEG decoder shrink by n/8 in the inverse DCT, choosing the
  // smallest n that keeps the box at least 1.5 times the output on both
  // axes: the antialiased resize then still shrinks it 1.5 times or more,
  // and the result stays within about 1.4 levels of 255 of torchvision's on
  // average (src/image/decode_plan.h has the figures; n is 1, 2 or 4: libjpeg-turbo's other scaled IDCTs are slower
  // than a full-size one). Default: true. False decodes at full size,
  // torchvision's pixels.
  bool scale_in_idct = true;

  // Bytes one image takes in the output: width * height * channels * (4 or 1).
  size_t bytes() const {
    return size_t{width} * height * channels() * (type == PixelType::kFloat32 ? 4 : 1);
  }
};

// Reaches a DecodeScratch's buffers; defined only inside the library.
struct ScratchAccess;

// Reusable working memory of one decoding thread: the decoded rows and the
// resampler's coefficients and intermediate rows, kept between images so a
// batch allocates once. A decode that would need more than max_bytes is
// refused (InvalidArgument) before anything is decoded; after a decode that
// grew it past keep_bytes, it gives the memory back.
//
// Not thread-safe: one per thread. libjpeg's own memory (per image, at most
// kMaxJpegDecoderBytes) is not counted here.
class DecodeScratch {
 public:
  // Defaults: refuse above 64 MiB (an absurd aspect ratio between box and
  // output), keep up to 4 MiB. A 224x224 output from a box of up to 2,000
  // px a side needs about 200 KiB.
  static constexpr size_t kDefaultMaxBytes = size_t{64} << 20;
  static constexpr size_t kDefaultKeepBytes = size_t{4} << 20;

  explicit DecodeScratch(size_t max_bytes = kDefaultMaxBytes, size_t keep_bytes = kDefaultKeepBytes);
  ~DecodeScratch();
  DecodeScratch(const DecodeScratch&) = delete;
  DecodeScratch& operator=(const DecodeScratch&) = delete;

  // Bytes held now.
  size_t bytes() const;
  size_t max_bytes() const;
  // Gives all memory back.
  void Release();

  // The buffers themselves, opaque here (src/image/resample.h defines them).
  struct Rep;

 private:
  friend struct ScratchAccess;  // src/image/resample.h
  std::unique_ptr<Rep> rep_;
};

// Decodes the box of a JPEG, resized to spec's size, into out (spec.bytes()
// writable bytes; no alignment needed). On error out may be partly written.
// Errors: InvalidArgument for a bad box or spec, or a decode needing more
// scratch than allowed; DecodeError (message from libjpeg, or "truncated")
// for data that is not a decodable JPEG.
Status DecodeJpegInto(std::string_view jpeg, const CropBox& box, const OutputSpec& spec, DecodeScratch* scratch,
                      void* out);

// The same resize, flip and normalization applied to RGB pixels already
// decoded (PNG, WebP and the like, by PIL): `height` rows of `width` pixels,
// 3 bytes each (R, G, B), row i at rgb + i * row_stride.
Status ResampleRgbInto(const uint8_t* rgb, uint32_t width, uint32_t height, size_t row_stride, const CropBox& box,
                       const OutputSpec& spec, DecodeScratch* scratch, void* out);

// A batch: image i (jpegs[i], boxes[i], mirrored when flips[i]; flips may be
// null for none; colour changes colours[i], null for none) decoded into
// out + i * spec.bytes(); spec.flip and spec.colour are ignored.
// Stops at the first failure: its index goes to *failed_index and the
// Status names it ("image 3 of 64: ...") and carries Reason::kBatchItem with
// the index. Images before it are written.
Status DecodeJpegBatch(const std::string_view* jpegs, const CropBox* boxes, const bool* flips,
                       const ColourOps* colours, size_t count, const OutputSpec& spec, DecodeScratch* scratch,
                       void* out, size_t* failed_index);
Status DecodeJpegBatch(const std::string_view* jpegs, const CropBox* boxes, const bool* flips, size_t count,
                       const OutputSpec& spec, DecodeScratch* scratch, void* out, size_t* failed_index);

// Several crops of one image from one decode (multi-crop recipes such as
// DINOv2's: two global and eight local crops of each image). Crop k is
// crops[k].box resized to crops[k].spec (its size, flip and colour ops
// included) into crops[k].out (spec.bytes() writable bytes).
struct SharedCrop {
  CropBox box;
  OutputSpec spec;
  void* out = nullptr;
};

// The most crops one call takes.
constexpr uint32_t kMaxCropsPerDecode = 64;

// Decodes the JPEG once and resizes each crop from it: the region that
// holds every crop's box, at the largest IDCT scale any one crop would be
// decoded at alone (DecodeJpegInto's choice for its box and spec), so
// each crop is what DecodeJpegInto gives where the scales agree, and more
// precise (closer to a full decode) where a crop alone would have been
// shrunk further. The decoded region counts against the scratch's cap.
// Errors: InvalidArgument for 0 or more than kMaxCropsPerDecode crops, a bad
// box or spec (naming the crop), a region larger than the scratch's cap;
// DecodeError as DecodeJpegInto.
Status DecodeJpegCrops(std::string_view jpeg, const SharedCrop* crops, size_t count, DecodeScratch* scratch);

// The same crops of RGB pixels already decoded (ResampleRgbInto's rows).
Status ResampleRgbCrops(const uint8_t* rgb, uint32_t width, uint32_t height, size_t row_stride,
                        const SharedCrop* crops, size_t count, DecodeScratch* scratch);


// One source image of a batch's crop jobs: a JPEG's bytes (rgb null), or
// RGB pixels decoded elsewhere (ResampleRgbInto's rows).
struct CropSource {
  std::string_view jpeg;
  const uint8_t* rgb = nullptr;
  uint32_t width = 0;
  uint32_t height = 0;
  size_t row_stride = 0;
};

// One crop of a batch: sources[source]'s box resized to spec (its size,
// flip and colour ops) into a frame of frame_width x frame_height at
// `frame` (in spec's layout and type). A crop that fills its frame has
// frame_width 0 (the frame is spec's size); one that does not (CenterCrop's
// padding) lands at (x, y), the rest of the frame holding `fill` per channel
// (what zero padding becomes after normalization; 0 for uint8).
struct CropJob {
  uint32_t source = 0;
  CropBox box;
  OutputSpec spec;
  void* frame = nullptr;
  uint32_t frame_width = 0;
  uint32_t frame_height = 0;
  uint32_t x = 0;
  uint32_t y = 0;
  float fill[3] = {0, 0, 0};
};

// A batch of crop jobs, those of one source next to each other: each source
// decoded once, over the region its jobs lie in, at the IDCT scale its most
// demanding job needs (one job: DecodeJpegInto's choice; several:
// DecodeJpegCrops'), and every job written into its frame. Stops at the first
// failure: *failed_source is its source, and the Status carries
// Reason::kBatchItem with that index. Errors: InvalidArgument for jobs of a
// source apart or out of range, a padded crop outside its frame, and what
// DecodeJpegInto, DecodeJpegCrops, ResampleRgbInto refuse; DecodeError as
// they give it.
Status DecodeCropJobs(const CropSource* sources, size_t source_count, const CropJob* jobs, size_t job_count,
                      DecodeScratch* scratch, size_t* failed_source);

}  // namespace lmdbloader

#endif  // LMDBLOADER_IMAGE_DECODE_H_
