#include "image_test_util.h"

// jpeglib.h needs size_t and FILE declared first.
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <cmath>

#include <jpeglib.h>

namespace lmdbloader::testing {

namespace {

uint32_t NextRandom(uint64_t* state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<uint32_t>(*state >> 33);
}

struct ErrorJump {
  jpeg_error_mgr pub;
  jmp_buf jump;
};

void JumpOnError(j_common_ptr cinfo) { std::longjmp(reinterpret_cast<ErrorJump*>(cinfo->err)->jump, 1); }

// PIL's MULDIV255: a * b / 255, rounded its way.
int MulDiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

struct Coefficients {
  std::vector<int> first, count;
  std::vector<std::vector<int32_t>> weights;
};

// PIL's filters (Resample.c): the triangle of support 1 and Keys' cubic
// (a = -0.5) of support 2.
double Filter(Interpolation f, double x) {
  x = std::fabs(x);
  if (f == Interpolation::kBilinear) return x < 1.0 ? 1.0 - x : 0.0;
  const double a = -0.5;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// PIL's precompute_coeffs, then its normalize_coeffs_8bpc (22-bit fixed
// point, negative weights rounded away from zero).
Coefficients Precompute(int in_size, int out_size, Interpolation f) {
  Coefficients c;
  const double scale = double(in_size) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = (f == Interpolation::kBicubic ? 2.0 : 1.0) * filterscale;
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    int xmin = int(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = int(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    std::vector<double> k(xmax);
    double ww = 0;
    for (int x = 0; x < xmax; ++x) {
      k[x] = Filter(f, (x + xmin - center + 0.5) * (1.0 / filterscale));
      ww += k[x];
    }
    std::vector<int32_t> q(xmax);
    for (int x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? k[x] / ww : k[x];
      q[x] = int32_t(w < 0 ? -0.5 + w * (1 << 22) : 0.5 + w * (1 << 22));
    }
    c.first.push_back(xmin);
    c.count.push_back(xmax);
    c.weights.push_back(q);
  }
  return c;
}

uint8_t Clip8(int64_t ss) {
  const int64_t v = ss >> 22;
  return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
}

Pixels Horizontal(const Pixels& in, int out_w, Interpolation f) {
  const Coefficients c = Precompute(int(in.width), out_w, f);
  Pixels out;
  out.width = uint32_t(out_w);
  out.height = in.height;
  out.data.resize(size_t{out.width} * out.height * 3);
  for (uint32_t y = 0; y < in.height; ++y) {
    for (int xx = 0; xx < out_w; ++xx) {
      for (int ch = 0; ch < 3; ++ch) {
        int64_t ss = 1 << 21;
        for (int x = 0; x < c.count[xx]; ++x) ss += int64_t(in.at(uint32_t(c.first[xx] + x), y, ch)) * c.weights[xx][x];
        out.data[(size_t{y} * out.width + xx) * 3 + ch] = Clip8(ss);
      }
    }
  }
  return out;
}

Pixels Vertical(const Pixels& in, int out_h, Interpolation f) {
  const Coefficients c = Precompute(int(in.height), out_h, f);
  Pixels out;
  out.width = in.width;
  out.height = uint32_t(out_h);
  out.data.resize(size_t{out.width} * out.height * 3);
  for (int yy = 0; yy < out_h; ++yy) {
    for (uint32_t x = 0; x < in.width; ++x) {
      for (int ch = 0; ch < 3; ++ch) {
        int64_t ss = 1 << 21;
        for (int y = 0; y < c.count[yy]; ++y) ss += int64_t(in.at(x, uint32_t(c.first[yy] + y), ch)) * c.weights[yy][y];
        out.data[(size_t{uint32_t(yy)} * out.width + x) * 3 + ch] = Clip8(ss);
      }
    }
  }
  return out;
}

}  // namespace

Pixels SyntheticPhoto(uint32_t width, uint32_t height, uint32_t seed, uint32_t channels) {
  Pixels p;
  p.width = width;
  p.height = height;
  p.channels = channels;
  p.data.resize(size_t{width} * height * channels);
  uint64_t state = seed * 2654435761ull + 1;
  const double fx = 0.02 + (NextRandom(&state) % 100) / 1500.0, fy = 0.015 + (NextRandom(&state) % 100) / 2000.0;
  const uint32_t bx = NextRandom(&state) % (width + 1), by = NextRandom(&state) % (height + 1);
  for (uint32_t y = 0; y < height; ++y) {
    for (uint32_t x = 0; x < width; ++x) {
      for (uint32_t c = 0; c < channels; ++c) {
        double v = 60 + 120.0 * x / std::max(width, 1u) + 40 * std::sin(fx * x * (c + 1) + fy * y);
        v += (x > bx && y > by) ? 50 : 0;         // an edge
        v += double(NextRandom(&state) % 24) - 12;  // texture
        p.data[(size_t{y} * width + x) * channels + c] = uint8_t(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return p;
}

std::string EncodeJpeg(const Pixels& pixels, const JpegOptions& options) {
  jpeg_compress_struct cinfo;
  ErrorJump err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = JumpOnError;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&cinfo);
    std::free(buffer);
    return std::string();
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = pixels.width;
  cinfo.image_height = pixels.height;
  cinfo.input_components = int(pixels.channels);
  cinfo.in_color_space = pixels.channels == 1 ? JCS_GRAYSCALE : pixels.channels == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  if (pixels.channels == 4) jpeg_set_colorspace(&cinfo, options.ycck ? JCS_YCCK : JCS_CMYK);
  jpeg_set_quality(&cinfo, options.quality, TRUE);
  if (pixels.channels == 3) {
    const std::string& s = options.subsampling;
    cinfo.comp_info[0].h_samp_factor = (s == "422" || s == "420") ? 2 : 1;
    cinfo.comp_info[0].v_samp_factor = (s == "420" || s == "440") ? 2 : 1;
    for (int i = 1; i < 3; ++i) cinfo.comp_info[i].h_samp_factor = cinfo.comp_info[i].v_samp_factor = 1;
  }
  if (options.progressive) jpeg_simple_progression(&cinfo);
  cinfo.arith_code = options.arithmetic ? TRUE : FALSE;
  cinfo.restart_in_rows = options.restart_rows;
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<uint8_t> row(size_t{pixels.width} * pixels.channels);
  while (cinfo.next_scanline < cinfo.image_height) {
    const uint8_t* src = pixels.data.data() + size_t{cinfo.next_scanline} * row.size();
    // Pillow writes CMYK inverted (its "CMYK;I" raw mode) with an Adobe marker.
    for (size_t i = 0; i < row.size(); ++i) row[i] = pixels.channels == 4 ? uint8_t(255 - src[i]) : src[i];
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&cinfo, &r, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<const char*>(buffer), size);
  std::free(buffer);
  return out;
}

Pixels ReferenceDecode(const std::string& jpeg, uint32_t num) {
  jpeg_decompress_struct cinfo;
  ErrorJump err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = JumpOnError;
  Pixels out;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return Pixels();
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size());
  jpeg_read_header(&cinfo, TRUE);
  const bool cmyk = cinfo.num_components == 4;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  cinfo.scale_num = num;
  cinfo.scale_denom = 8;
  jpeg_start_decompress(&cinfo);
  out.width = cinfo.output_width;
  out.height = cinfo.output_height;
  out.data.resize(size_t{out.width} * out.height * 3);
  std::vector<uint8_t> row(size_t{out.width} * cinfo.output_components);
  for (uint32_t y = 0; y < out.height; ++y) {
    JSAMPROW r = row.data();
    jpeg_read_scanlines(&cinfo, &r, 1);
    for (uint32_t x = 0; x < out.width; ++x) {
      uint8_t* d = &out.data[(size_t{y} * out.width + x) * 3];
      if (!cmyk) {
        std::copy(&row[size_t{x} * 3], &row[size_t{x} * 3] + 3, d);
        continue;
      }
      CmykToRgb(&row[size_t{x} * 4], d);
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return out;
}

void CmykToRgb(const uint8_t* raw, uint8_t* rgb) {
  int v[4];
  for (int c = 0; c < 4; ++c) v[c] = 255 - raw[c];  // unpack "CMYK;I"
  const int nk = 255 - v[3];
  for (int c = 0; c < 3; ++c) rgb[c] = uint8_t(std::clamp(nk - MulDiv255(v[c], nk), 0, 255));
}

Pixels ReferenceResize(const Pixels& rgb, uint32_t left, uint32_t top, uint32_t width, uint32_t height,
                       uint32_t out_width, uint32_t out_height, Interpolation filter) {
  Pixels crop;
  crop.width = width;
  crop.height = height;
  crop.data.resize(size_t{width} * height * 3);
  for (uint32_t y = 0; y < height; ++y) {
    std::copy(&rgb.data[(size_t{top + y} * rgb.width + left) * 3],
              &rgb.data[(size_t{top + y} * rgb.width + left + width) * 3], &crop.data[size_t{y} * width * 3]);
  }
  const bool need_h = out_width != width, need_v = out_height != height;
  const int64_t dh = int64_t(height) - out_height, dw = int64_t(width) - out_width;
  const bool horizontal_first = !(dh > 0 && dh > dw * 2);
  Pixels img = crop;
  if (horizontal_first) {
    if (need_h) img = Horizontal(img, int(out_width), filter);
    if (need_v) img = Vertical(img, int(out_height), filter);
  } else {
    if (need_v) img = Vertical(img, int(out_height), filter);
    if (need_h) img = Horizontal(img, int(out_width), filter);
  }
  return img;
}

Pixels Mirror(const Pixels& rgb) {
  Pixels m = rgb;
  for (uint32_t y = 0; y < rgb.height; ++y) {
    for (uint32_t x = 0; x < rgb.width; ++x) {
      for (uint32_t c = 0; c < rgb.channels; ++c) {
        m.data[(size_t{y} * rgb.width + x) * rgb.channels + c] = rgb.at(rgb.width - 1 - x, y, c);
      }
    }
  }
  return m;
}

Pixels FromHwc(const std::vector<uint8_t>& out, uint32_t width, uint32_t height) {
  Pixels p;
  p.width = width;
  p.height = height;
  p.data.assign(out.begin(), out.begin() + size_t{width} * height * 3);
  return p;
}

Difference Compare(const Pixels& a, const Pixels& b) {
  Difference d;
  if (a.width != b.width || a.height != b.height || a.data.size() != b.data.size()) {
    d.max = 256;
    return d;
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const int diff = std::abs(int(a.data[i]) - int(b.data[i]));
    d.max = std::max(d.max, diff);
    sum += uint64_t(diff);
    d.differing += diff != 0;
  }
  d.values = a.data.size();
  d.mean = d.values ? double(sum) / double(d.values) : 0;
  return d;
}

int Reflected(int64_t i, int n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (int64_t{n} - 1) - i;
  return static_cast<int>(i);
}

std::vector<uint8_t> DirectBlur(const std::vector<uint8_t>& in, int w, int h, int c, int k, double sigma) {
  std::vector<double> g(k);
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += g[i] = std::exp(-0.5 * std::pow((i - (k - 1) / 2.0) / sigma, 2));
  for (double& v : g) v /= sum;
  std::vector<uint8_t> out(in.size());
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int ch = 0; ch < c; ++ch) {
        double t = 0;
        for (int i = 0; i < k; ++i)
          for (int j = 0; j < k; ++j)
            t += g[i] * g[j] * in[(size_t(Reflected(y + i - k / 2, h)) * w + Reflected(x + j - k / 2, w)) * c + ch];
        out[(size_t(y) * w + x) * c + ch] = static_cast<uint8_t>(std::nearbyint(t));
      }
  return out;
}

}  // namespace lmdbloader::testing
