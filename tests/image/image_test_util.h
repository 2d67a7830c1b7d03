// Helpers shared by the image tests: JPEGs of every kind written with
// libjpeg's encoder, a reference full decode with libjpeg's plain API (the
// settings Pillow uses), and an oracle of PIL's resize: its integer
// algorithm (Resample.c) written out plainly, scalar and exact, to check the
// fast float resampler against.
#ifndef LMDBLOADER_TESTS_IMAGE_IMAGE_TEST_UTIL_H_
#define LMDBLOADER_TESTS_IMAGE_IMAGE_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lmdbloader/image_decode.h"

namespace lmdbloader::testing {

// An 8-bit image: height rows of width pixels, `channels` bytes each.
struct Pixels {
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t channels = 3;
  std::vector<uint8_t> data;
  uint8_t at(uint32_t x, uint32_t y, uint32_t c) const { return data[(size_t{y} * width + x) * channels + c]; }
};

// Something like a photograph: smooth gradients, edges and fine texture,
// different for each seed.
Pixels SyntheticPhoto(uint32_t width, uint32_t height, uint32_t seed, uint32_t channels = 3);

struct JpegOptions {
  int quality = 90;
  bool progressive = false;
  bool arithmetic = false;
  // Chroma subsampling of 3-component images: "444", "422", "420", "440".
  std::string subsampling = "420";
  int restart_rows = 0;  // a restart marker every this many MCU rows
  bool adobe_cmyk = false;  // 4 channels written as Adobe CMYK (inverted, as Pillow writes it)
  bool ycck = false;        // 4 channels as YCCK
};

// Encodes pixels (1, 3 or 4 channels) with libjpeg.
std::string EncodeJpeg(const Pixels& pixels, const JpegOptions& options = {});

// Decodes the whole image at scale num/8 as Pillow does (islow, fancy
// upsampling) and converts it to RGB as Pillow's convert("RGB") does
// (gray replicated; CMYK read inverted, then cmyk2rgb).
Pixels ReferenceDecode(const std::string& jpeg, uint32_t num = 8);

// Pillow's RGB for the 4 bytes libjpeg gives for an Adobe CMYK pixel: it
// reads them inverted ("CMYK;I"), then convert("RGB") applies cmyk2rgb.
void CmykToRgb(const uint8_t* raw, uint8_t* rgb);

// PIL's Image.resize(size, BILINEAR) of the crop (left, top, width, height)
// (whole pixels) of RGB pixels, in PIL's integer arithmetic and its pass
// order (Pillow 13: the vertical pass first when the height shrinks by more
// than twice as many pixels as the width).
Pixels ReferenceResize(const Pixels& rgb, uint32_t left, uint32_t top, uint32_t width, uint32_t height,
                       uint32_t out_width, uint32_t out_height,
                       Interpolation filter = Interpolation::kBilinear);

// The same image mirrored left to right.
Pixels Mirror(const Pixels& rgb);

// Reads an HWC uint8 output back as Pixels.
Pixels FromHwc(const std::vector<uint8_t>& out, uint32_t width, uint32_t height);

// Largest and mean absolute difference, in levels, and how many values differ.
struct Difference {
  int max = 0;
  double mean = 0;
  size_t differing = 0;
  size_t values = 0;
};
Difference Compare(const Pixels& a, const Pixels& b);

// Index i of an axis of n, reflected back and forth until it lands inside
// (torch's reflect padding, edges not repeated).
int Reflected(int64_t i, int n);

// torchvision's k x k Gaussian blur of interleaved levels (w x h, c a
// pixel) summed directly in two dimensions in double, edges mirrored
// without repeating them (torch's reflect padding, again where a kernel is
// wider than the image), rounded half to even: the reference for the
// separable blur.
std::vector<uint8_t> DirectBlur(const std::vector<uint8_t>& in, int w, int h, int c, int k, double sigma);

}  // namespace lmdbloader::testing

#endif  // LMDBLOADER_TESTS_IMAGE_IMAGE_TEST_UTIL_H_
