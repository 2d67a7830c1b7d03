// What each step of the fused image path costs per image, on photographs
// with crop boxes drawn as torchvision's RandomResizedCrop draws them
// (scale 0.08-1, ratio 3/4-4/3), output 224x224 float32 CHW normalized:
//   FullDecode         every pixel at full size (what PIL's decode does)
//   RegionDecode       only the box's rows and columns, full size
//   RegionScaledDecode the box's region, shrunk in the IDCT
//   RegionScaledDecodeToEnd  the same, then always the rows below the box
//                      entropy-decoded and the markers after the scan read,
//                      as PIL reads them (RegionScaledDecode does that only
//                      when the scan below does not run into the end marker)
//   MarkerSearch       the search for that marker, over all of each photo's
//                      scan data (more than the part below a box)
//   Resample           resize + flip + normalize of the decoded region alone
//   Fused              DecodeJpegInto: RegionScaledDecode + Resample
//   FusedFullScale     DecodeJpegInto without IDCT scaling (bit-exact path)
//   ResampleRgb        ResampleRgbInto from a fully decoded image (PIL path)
// Items are images: compare the per-item times printed in one run.
//   Colour/OP/SIZE     one colour op (or the four of ColorJitter) on a
//                      SIZExSIZE uint8 RGB crop as the decoders apply it
//                      (FinishColour, uint8 HWC out); ns_px is nanoseconds a
//                      pixel. Colour/copy is the copies each case includes.
//                      These need no photos.
//
//   python3 bench/image_photos.py /tmp/photos
//   build/bench/image_bench /tmp/photos --benchmark_min_time=1
//   build/bench/image_bench --benchmark_filter=Colour
#include <benchmark/benchmark.h>
#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "image/colour_ops.h"
#include "image/decode_plan.h"
#include "lmdbloader/image_decode.h"

namespace lmdbloader {
namespace {

struct Photo {
  std::string name;
  std::string bytes;
  JpegHeader header;
  CropBox box;
  bool flip = false;
};

std::vector<Photo>& Photos() {
  static std::vector<Photo> photos;
  return photos;
}

// torchvision's RandomResizedCrop.get_params (scale 0.08-1, ratio 3/4-4/3).
CropBox DrawBox(uint32_t width, uint32_t height, std::mt19937* rng) {
  const double area = double(width) * height;
  std::uniform_real_distribution<double> scale(0.08, 1.0), log_ratio(std::log(3.0 / 4), std::log(4.0 / 3));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * scale(*rng);
    const double ratio = std::exp(log_ratio(*rng));
    const long w = std::lround(std::sqrt(target * ratio));
    const long h = std::lround(std::sqrt(target / ratio));
    if (w > 0 && h > 0 && w <= long(width) && h <= long(height)) {
      const long top = std::uniform_int_distribution<long>(0, height - h)(*rng);
      const long left = std::uniform_int_distribution<long>(0, width - w)(*rng);
      return CropBox{double(left), double(top), double(w), double(h)};
    }
  }
  return CropBox{0, 0, double(width), double(height)};
}

bool LoadPhotos(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() > 4 && n.substr(n.size() - 4) == ".jpg") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  std::mt19937 rng(42);
  for (const std::string& n : names) {
    std::ifstream f(dir + "/" + n, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    Photo p;
    p.name = n;
    p.bytes = ss.str();
    if (!ParseJpegHeader(p.bytes, &p.header).ok() || !p.header.decodable) continue;
    p.box = DrawBox(p.header.width, p.header.height, &rng);
    p.flip = rng() & 1;
    Photos().push_back(std::move(p));
  }
  return !Photos().empty();
}

OutputSpec Spec(bool scale) {
  OutputSpec spec;
  spec.scale_in_idct = scale;
  return spec;
}

class NullSink : public RowSink {
 public:
  bool Begin(uint32_t, uint32_t, JpegPixels) noexcept override { return true; }
  void Row(const uint8_t* p) noexcept override { sum_ += p[0]; }
  uint64_t sum_ = 0;
};

// Keeps every row of the region, as the resampler would be fed.
class KeepSink : public RowSink {
 public:
  bool Begin(uint32_t x0, uint32_t width, JpegPixels) noexcept override {
    x0_ = x0;
    width_ = width;
    return true;
  }
  void Row(const uint8_t* p) noexcept override { rows_.insert(rows_.end(), p, p + size_t{width_} * 4); }
  uint32_t x0_ = 0, width_ = 0;
  std::vector<uint8_t> rows_;
};

// The request DecodeJpegInto makes, rows trimmed to what the resize reads.
JpegDecodePlan Plan(const Photo& p, const OutputSpec& spec, DecodeScratch* scratch, std::vector<uint8_t>* out) {
  JpegDecodePlan plan;
  PlanJpegDecode(p.header, p.box, spec, &plan);
  Resampler r(ScratchAccess::Get(scratch));
  if (!r.Prepare(plan.geometry, spec, out->data()).ok()) std::abort();
  plan.request.y_end = plan.request.y_begin + r.rows_needed();
  return plan;
}

void DecodeOnly(benchmark::State& state, bool region, bool scale, bool to_end = false) {
  DecodeScratch scratch;
  std::vector<uint8_t> out(Spec(scale).bytes());
  std::vector<JpegRegionRequest> requests;
  for (const Photo& p : Photos()) {
    JpegRegionRequest r;
    if (region) {
      r = Plan(p, Spec(scale), &scratch, &out).request;
    } else {
      r.x_end = p.header.width;
      r.y_end = p.header.height;
    }
    r.read_to_end = to_end;
    requests.push_back(r);
  }
  NullSink sink;
  bool refused;
  for (auto _ : state) {
    for (size_t i = 0; i < Photos().size(); ++i) {
      if (!DecodeJpegRegion(Photos()[i].bytes, Photos()[i].header, requests[i], &sink, &refused).ok()) std::abort();
    }
  }
  benchmark::DoNotOptimize(sink.sum_);
  state.SetItemsProcessed(state.iterations() * Photos().size());
}

void BM_FullDecode(benchmark::State& state) { DecodeOnly(state, false, false); }
void BM_RegionDecode(benchmark::State& state) { DecodeOnly(state, true, false); }
void BM_RegionScaledDecode(benchmark::State& state) { DecodeOnly(state, true, true); }
void BM_RegionScaledDecodeToEnd(benchmark::State& state) { DecodeOnly(state, true, true, true); }

void BM_MarkerSearch(benchmark::State& state) {
  std::vector<std::string_view> scans;
  for (const Photo& p : Photos()) {
    const size_t sos = p.bytes.find("\xFF\xDA");
    if (sos == std::string::npos) std::abort();
    scans.push_back(std::string_view(p.bytes).substr(sos + 2));
  }
  int found = 0;
  for (auto _ : state) {
    for (std::string_view s : scans) found += NextMarker(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  benchmark::DoNotOptimize(found);
  state.SetItemsProcessed(state.iterations() * Photos().size());
}

void BM_Resample(benchmark::State& state) {
  DecodeScratch scratch;
  const OutputSpec base = Spec(true);
  std::vector<uint8_t> out(base.bytes());
  struct Decoded {
    JpegDecodePlan plan;
    KeepSink rows;
  };
  std::vector<Decoded> decoded(Photos().size());
  bool refused;
  for (size_t i = 0; i < Photos().size(); ++i) {
    decoded[i].plan = Plan(Photos()[i], base, &scratch, &out);
    if (!DecodeJpegRegion(Photos()[i].bytes, Photos()[i].header, decoded[i].plan.request, &decoded[i].rows,
                          &refused)
             .ok())
      std::abort();
  }
  for (auto _ : state) {
    for (size_t i = 0; i < Photos().size(); ++i) {
      const Decoded& d = decoded[i];
      OutputSpec spec = base;
      spec.flip = Photos()[i].flip;
      Resampler r(ScratchAccess::Get(&scratch));
      if (!r.Prepare(d.plan.geometry, spec, out.data()).ok()) std::abort();
      const size_t stride = size_t{d.rows.width_} * 4;
      const uint8_t* first = d.rows.rows_.data() + size_t{d.plan.request.x_begin - d.rows.x0_} * 4;
      for (uint32_t y = 0; y < r.rows_needed(); ++y) r.PushRow(first + y * stride, SourcePixels::kRgbx);
      benchmark::DoNotOptimize(out.data());
    }
  }
  state.SetItemsProcessed(state.iterations() * Photos().size());
}

void Fused(benchmark::State& state, bool scale) {
  DecodeScratch scratch;
  std::vector<uint8_t> out(Spec(scale).bytes());
  for (auto _ : state) {
    for (const Photo& p : Photos()) {
      OutputSpec spec = Spec(scale);
      spec.flip = p.flip;
      if (!DecodeJpegInto(p.bytes, p.box, spec, &scratch, out.data()).ok()) std::abort();
      benchmark::DoNotOptimize(out.data());
    }
  }
  state.SetItemsProcessed(state.iterations() * Photos().size());
}

void BM_Fused(benchmark::State& state) { Fused(state, true); }
void BM_FusedFullScale(benchmark::State& state) { Fused(state, false); }

void BM_ResampleRgb(benchmark::State& state) {
  DecodeScratch scratch;
  std::vector<std::vector<uint8_t>> rgb;
  for (const Photo& p : Photos()) {
    KeepSink rows;
    JpegRegionRequest r;
    r.x_end = p.header.width;
    r.y_end = p.header.height;
    bool refused;
    if (!DecodeJpegRegion(p.bytes, p.header, r, &rows, &refused).ok()) std::abort();
    std::vector<uint8_t> packed(size_t{p.header.width} * p.header.height * 3);
    for (size_t i = 0; i < size_t{p.header.width} * p.header.height; ++i) {
      for (int c = 0; c < 3; ++c) packed[i * 3 + c] = rows.rows_[i * 4 + c];
    }
    rgb.push_back(std::move(packed));
  }
  const OutputSpec base = Spec(false);
  std::vector<uint8_t> out(base.bytes());
  for (auto _ : state) {
    for (size_t i = 0; i < Photos().size(); ++i) {
      const Photo& p = Photos()[i];
      OutputSpec spec = base;
      spec.flip = p.flip;
      if (!ResampleRgbInto(rgb[i].data(), p.header.width, p.header.height, size_t{p.header.width} * 3, p.box, spec,
                           &scratch, out.data())
               .ok())
        std::abort();
      benchmark::DoNotOptimize(out.data());
    }
  }
  state.SetItemsProcessed(state.iterations() * Photos().size());
}

void RegisterPhotoBenchmarks() {
  for (const auto& [name, fn] : std::initializer_list<std::pair<const char*, void (*)(benchmark::State&)>>{
           {"BM_FullDecode", BM_FullDecode},
           {"BM_RegionDecode", BM_RegionDecode},
           {"BM_RegionScaledDecode", BM_RegionScaledDecode},
           {"BM_RegionScaledDecodeToEnd", BM_RegionScaledDecodeToEnd},
           {"BM_MarkerSearch", BM_MarkerSearch},
           {"BM_Resample", BM_Resample},
           {"BM_Fused", BM_Fused},
           {"BM_FusedFullScale", BM_FusedFullScale},
           {"BM_ResampleRgb", BM_ResampleRgb}})
    benchmark::RegisterBenchmark(name, fn)->Unit(benchmark::kMillisecond);
}

// A photograph-like crop: smooth colour gradients, edges and a little noise
// (the ops' costs depend on the levels: gray pixels skip hue's maths).
std::vector<uint8_t> ColourCrop(uint32_t size) {
  std::vector<uint8_t> p(size_t{size} * size * 3);
  std::mt19937 rng(size);
  for (uint32_t y = 0; y < size; ++y) {
    for (uint32_t x = 0; x < size; ++x) {
      const double u = double(x) / size, v = double(y) / size;
      const double base[3] = {120 + 100 * std::sin(6 * u + 2 * v), 110 + 90 * std::cos(5 * v - 3 * u),
                              (x / 16 + y / 16) % 2 ? 200 * u * v : 60 + 40 * u};
      for (int c = 0; c < 3; ++c)
        p[(size_t{y} * size + x) * 3 + c] = uint8_t(std::clamp(base[c] + double(rng() % 9) - 4.0, 0.0, 255.0));
    }
  }
  return p;
}

void Colour(benchmark::State& state, std::vector<ColourOp> list) {
  const uint32_t size = uint32_t(state.range(0));
  const std::vector<uint8_t> crop = ColourCrop(size);
  OutputSpec spec;
  spec.width = spec.height = size;
  spec.type = PixelType::kUint8;
  spec.layout = PixelLayout::kHWC;
  for (const ColourOp& op : list) spec.colour.ops[spec.colour.count++] = op;
  DecodeScratch scratch;
  DecodeScratch::Rep* rep = ScratchAccess::Get(&scratch);
  std::vector<uint8_t> out(spec.bytes());
  OutputSpec inner;
  std::vector<uint8_t> resized(crop.size());
  void* target = resized.data();
  for (auto _ : state) {
    if (!list.empty() && !ColourTarget(spec, rep, &inner, &target).ok()) std::abort();
    std::memcpy(target, crop.data(), crop.size());  // what the resampler writes
    if (list.empty()) {
      std::memcpy(out.data(), target, crop.size());
    } else {
      FinishColour(spec, rep, out.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["ns_px"] = benchmark::Counter(double(state.iterations()) * size * size * 1e-9,
                                               benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void RegisterColourBenchmarks() {
  using K = ColourOpKind;
  const std::pair<const char*, std::vector<ColourOp>> cases[] = {
      {"copy", {}},
      {"brightness", {{K::kBrightness, 1.3f}}},
      {"contrast", {{K::kContrast, 0.7f}}},
      {"saturation", {{K::kSaturation, 1.2f}}},
      {"hue", {{K::kHue, 0.07f}}},
      {"grayscale", {{K::kGrayscale, 0}}},
      {"solarize", {{K::kSolarize, 128}}},
      {"jitter", {{K::kContrast, 0.8f}, {K::kHue, -0.06f}, {K::kBrightness, 1.25f}, {K::kSaturation, 0.9f}}},
      {"blur9", {{K::kBlur, 1.0f, 9}}},
      {"blur9s0.1", {{K::kBlur, 0.1f, 9}}},
      {"blur23", {{K::kBlur, 2.0f, 23}}},
  };
  for (const auto& [name, ops] : cases) {
    benchmark::RegisterBenchmark((std::string("Colour/") + name).c_str(),
                                 [ops = ops](benchmark::State& s) { Colour(s, ops); })
        ->Arg(224)
        ->Arg(96)
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace
}  // namespace lmdbloader

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (argc > 2 || (argc == 2 && !lmdbloader::LoadPhotos(argv[1]))) {
    std::fprintf(stderr, "usage: image_bench [PHOTO_DIR] [--benchmark flags]\n"
                         "  (PHOTO_DIR holds *.jpg; python3 bench/image_photos.py PHOTO_DIR writes some;\n"
                         "  without it, only the colour ops run)\n");
    return 2;
  }
  if (argc == 2) {
    std::fprintf(stderr, "%zu photos\n", lmdbloader::Photos().size());
    lmdbloader::RegisterPhotoBenchmarks();
  }
  lmdbloader::RegisterColourBenchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
