// The image functions of _core (lmdbloader/image_decode.h to Python):
// argument conversion only. Every decode runs with the GIL released, each
// Python thread with its own DecodeScratch.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lmdbloader/convert.h"
#include "held_buffer.h"
#include "image_sizes.h"
#include "lmdbloader/image_decode.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

namespace {

DecodeScratch& ThreadScratch() {
  thread_local DecodeScratch scratch;
  return scratch;
}

OutputSpec MakeSpec(uint32_t width, uint32_t height, const std::string& layout, const std::string& dtype,
                    const std::array<float, 3>& mean, const std::array<float, 3>& std, bool scale_in_idct,
                    const std::string& interpolation, bool grayscale) {
  OutputSpec spec;
  spec.width = width;
  spec.height = height;
  ThrowIfError(ParsePixelLayout(layout, &spec.layout));
  ThrowIfError(ParsePixelType(dtype, &spec.type));
  ThrowIfError(ParseInterpolation(interpolation, &spec.interpolation));
  spec.grayscale = grayscale;
  for (int c = 0; c < 3; ++c) {
    spec.mean[c] = mean[c];
    spec.std[c] = std[c];
  }
  spec.scale_in_idct = scale_in_idct;
  return spec;
}

CropBox MakeBox(const py::handle& obj, size_t index) {
  if (!py::isinstance<py::sequence>(obj) || py::len(obj) != 4) {
    ThrowInvalid("box " + std::to_string(index) + " must be (left, top, width, height)");
  }
  py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
  CropBox box;
  box.left = seq[0].cast<double>();
  box.top = seq[1].cast<double>();
  box.width = seq[2].cast<double>();
  box.height = seq[3].cast<double>();
  return box;
}

// [(name, value), ...] (None: none; ("blur", sigma, kernel) for a blur) -> ColourOps, checked.
ColourOps MakeColour(const py::handle& obj) {
  ColourOps ops;
  if (obj.is_none()) return ops;
  if (!py::isinstance<py::sequence>(obj)) ThrowInvalid("colour ops must be a list of (name, value) pairs");
  py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
  if (seq.size() > kMaxColourOps) {
    ThrowInvalid(std::to_string(seq.size()) + " colour ops; at most " + std::to_string(kMaxColourOps));
  }
  for (size_t i = 0; i < seq.size(); ++i) {
    py::handle pair = seq[i];
    if (!py::isinstance<py::sequence>(pair) || py::isinstance<py::str>(pair) || py::len(pair) < 2 ||
        py::len(pair) > 3) {
      ThrowInvalid("colour op " + std::to_string(i) + " must be a (name, value) pair, or (\"blur\", sigma, kernel)");
    }
    py::sequence op = py::reinterpret_borrow<py::sequence>(pair);
    ThrowIfError(ParseColourOp(op[0].cast<std::string>(), &ops.ops[i].kind));
    ops.ops[i].value = op[1].is_none() ? 0.0f : op[1].cast<float>();
    if ((ops.ops[i].kind == ColourOpKind::kBlur) != (py::len(op) == 3)) {
      ThrowInvalid("colour op " + std::to_string(i) + ": blur is (\"blur\", sigma, kernel), the others (name, value)");
    }
    if (py::len(op) == 3) ops.ops[i].kernel = op[2].cast<uint32_t>();
  }
  ops.count = static_cast<uint32_t>(seq.size());
  ThrowIfError(CheckColourOps(ops));  // a ValueError here, not a batch's DecodeError
  return ops;
}

// Whether a buffer's items are bytes (uint8), whatever the exporter calls them.
bool IsBytes(const Py_buffer& v) {
  return v.itemsize == 1 && (v.format == nullptr || std::string_view(v.format) == "B" ||
                             std::string_view(v.format) == "=B" || std::string_view(v.format) == "<B");
}

// RGB pixels as the resampler reads them: uint8 (height, width, 3), each
// row's pixels contiguous (numpy.asarray of an RGB PIL image).
void CheckRgbRows(const Py_buffer& v, const std::string& what) {
  if (v.ndim != 3 || v.shape[2] != 3 || !IsBytes(v) || v.strides[2] != 1 || v.strides[1] != 3 || v.strides[0] < 0) {
    ThrowInvalid(what + " must be uint8 of shape (height, width, 3), each row's pixels contiguous "
                 "(numpy.asarray of an RGB PIL image)");
  }
}

// The output buffer, checked to hold `need` bytes.
HeldBuffer OutputBuffer(const py::object& out, size_t need) {
  HeldBuffer buf(out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS, "out");
  if (static_cast<size_t>(buf.view().len) < need) {
    ThrowInvalid("out holds " + std::to_string(buf.view().len) + " bytes; " + std::to_string(need) + " are needed");
  }
  return buf;
}

// What image_sizes and decode_crops read of an image: a JPEG's bytes, or
// RGB pixels as a (height, width, 3) uint8 array whose rows' pixels are
// contiguous.
struct HeldSource {
  HeldBuffer held;
  bool pixels = false;
};

HeldSource HeldSourceOf(const py::handle& obj, size_t i) {
  HeldBuffer buf(obj, PyBUF_STRIDES | PyBUF_FORMAT, "image " + std::to_string(i));
  const Py_buffer& v = buf.view();
  if (v.ndim <= 1) {
    if (v.ndim == 1 && v.strides != nullptr && v.strides[0] != 1) ThrowInvalid("image " + std::to_string(i) +
                                                                                 " must be contiguous bytes");
    return {std::move(buf), false};
  }
  CheckRgbRows(v, "image " + std::to_string(i) + ": pixels");
  return {std::move(buf), true};
}

// (width, height, kind) of each image (bytes-like encoded, or RGB pixel
// arrays), the headers read with the GIL released; DecodeError (batch_index)
// for the first damaged one.
py::list ImageSizes(const py::sequence& images) {
  const size_t n = images.size();
  std::vector<HeldSource> sources;
  sources.reserve(n);
  for (size_t i = 0; i < n; ++i) sources.push_back(HeldSourceOf(images[i], i));
  std::vector<ImageInfo> infos(n);
  ThrowIfError(WithoutGil([&] {
    for (size_t i = 0; i < n; ++i) {
      if (sources[i].pixels) continue;
      Status s = ReadImageInfo(sources[i].held.bytes(), &infos[i]);
      if (!s.ok()) return s.WithReason(Status::Reason::kBatchItem, static_cast<uint32_t>(i));
    }
    return Status::OK();
  }));
  py::list out(n);
  for (size_t i = 0; i < n; ++i) {
    const Py_buffer& v = sources[i].held.view();
    out[i] = sources[i].pixels ? PixelsSizeTuple(static_cast<uint32_t>(v.shape[1]), static_cast<uint32_t>(v.shape[0]))
                               : ImageSizeTuple(infos[i]);
  }
  return out;
}

// A batch as crop jobs (DecodeCropJobs): sources as HeldSourceOf takes
// them; outs[o] = (buffer, width, height), frames of that size one after
// another; each job (source, box, flip, colour ops or None, o, frame,
// None or (x, y, width, height): the crop resized to that size at (x, y)
// of the frame, the rest `fill`). One call, the GIL released for the batch.
void DecodeCrops(const py::sequence& images, const py::sequence& jobs, const py::sequence& outs,
                 const std::string& layout, const std::string& dtype, const std::array<float, 3>& mean,
                 const std::array<float, 3>& std, bool scale_in_idct, const std::string& interpolation,
                 bool grayscale, const std::array<float, 3>& fill) {
  const size_t n = images.size();
  std::vector<HeldSource> held;
  std::vector<CropSource> sources(n);
  held.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    held.push_back(HeldSourceOf(images[i], i));
    const Py_buffer& v = held.back().held.view();
    if (!held.back().pixels) {
      sources[i].jpeg = held.back().held.bytes();
      continue;
    }
    sources[i].rgb = static_cast<const uint8_t*>(v.buf);
    sources[i].width = static_cast<uint32_t>(v.shape[1]);
    sources[i].height = static_cast<uint32_t>(v.shape[0]);
    sources[i].row_stride = static_cast<size_t>(v.strides[0]);
  }
  std::vector<OutputSpec> specs;
  std::vector<HeldBuffer> targets;
  std::vector<size_t> frames;
  for (size_t o = 0; o < outs.size(); ++o) {
    py::sequence entry = outs[o].cast<py::sequence>();
    if (entry.size() != 3) ThrowInvalid("an output must be (buffer, width, height)");
    specs.push_back(MakeSpec(entry[1].cast<uint32_t>(), entry[2].cast<uint32_t>(), layout, dtype, mean, std,
                             scale_in_idct, interpolation, grayscale));
    const size_t frame = specs.back().width <= kMaxOutputSide && specs.back().height <= kMaxOutputSide
                             ? specs.back().bytes() : 0;
    targets.push_back(OutputBuffer(entry[0], 0));
    // A size out of range is the decoder's to name (CheckSpec), not a
    // frame missing from the output.
    frames.push_back(frame ? static_cast<size_t>(targets.back().view().len) / frame : SIZE_MAX);
  }
  std::vector<CropJob> cuts(jobs.size());
  for (size_t j = 0; j < cuts.size(); ++j) {
    py::sequence job = jobs[j].cast<py::sequence>();
    if (job.size() != 7) ThrowInvalid("a crop job must be (source, box, flip, colour, output, frame, inside)");
    CropJob& cut = cuts[j];
    cut.source = job[0].cast<uint32_t>();
    cut.box = MakeBox(job[1], j);
    const size_t o = job[4].cast<size_t>(), frame = job[5].cast<size_t>();
    if (o >= specs.size() || frame >= frames[o]) {
      ThrowInvalid("crop job " + std::to_string(j) + ": frame " + std::to_string(frame) + " of output " +
                   std::to_string(o) + " is not in the outputs given");
    }
    cut.spec = specs[o];
    cut.spec.flip = job[2].cast<bool>();
    cut.spec.colour = MakeColour(job[3]);
    cut.frame =
        static_cast<uint8_t*>(targets[o].view().buf) + (frames[o] == SIZE_MAX ? 0 : frame * specs[o].bytes());
    if (!job[6].is_none()) {
      const auto inside = job[6].cast<std::array<uint32_t, 4>>();
      cut.frame_width = specs[o].width;
      cut.frame_height = specs[o].height;
      cut.x = inside[0];
      cut.y = inside[1];
      cut.spec.width = inside[2];
      cut.spec.height = inside[3];
      for (int c = 0; c < 3; ++c) cut.fill[c] = fill[c];
    }
  }
  Status s;
  size_t failed = 0;
  {
    py::gil_scoped_release release;
    s = DecodeCropJobs(sources.data(), n, cuts.data(), cuts.size(), &ThreadScratch(), &failed);
  }
  ThrowIfError(s);
}

// The colour ops applied in place to a writable C-contiguous uint8 array of
// (height, width, 3) or (height, width) levels.
void ApplyColour(const py::object& pixels, const py::object& ops_obj) {
  const ColourOps ops = MakeColour(ops_obj);
  HeldBuffer buf(pixels, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND, "pixels");
  const Py_buffer& v = buf.view();
  if (!IsBytes(v) || (v.ndim != 2 && !(v.ndim == 3 && (v.shape[2] == 3 || v.shape[2] == 1)))) {
    ThrowInvalid("pixels must be a C-contiguous uint8 array of (height, width, 3), (height, width, 1) or "
                 "(height, width)");
  }
  const uint32_t channels = v.ndim == 3 ? static_cast<uint32_t>(v.shape[2]) : 1;
  Status s;
  {
    py::gil_scoped_release release;
    s = ApplyColourOps(ops, static_cast<uint8_t*>(v.buf), static_cast<uint32_t>(v.shape[1]),
                       static_cast<uint32_t>(v.shape[0]), channels);
  }
  ThrowIfError(s);
}

std::array<float, 3> ImageNet(const double (&v)[3]) {
  return {static_cast<float>(v[0]), static_cast<float>(v[1]), static_cast<float>(v[2])};
}

// What ImageDecode and ClipDecode accept, from the C++ tables, so Python,
// its checks and its docs spell nothing of their own.
py::dict ImageOptions() {
  py::dict out;
  out["layouts"] = PixelLayoutNames();
  out["dtypes"] = PixelTypeNames();
  out["interpolations"] = InterpolationNames();
  out["colour_ops"] = ColourOpNames();
  out["max_blur_kernel"] = kMaxBlurKernel;
  out["max_crops_per_decode"] = kMaxCropsPerDecode;
  // The layouts a record can have on the image path: the converter's, but
  // "as_is" (a record kept as it is has no image to split out).
  std::vector<std::string> records;
  for (RecordLayout r : {RecordLayout::kMsgpack, RecordLayout::kRaw, RecordLayout::kCaffe})
    records.emplace_back(RecordLayoutName(r));
  out["records"] = records;
  out["mean"] = py::make_tuple(kImageNetMean[0], kImageNetMean[1], kImageNetMean[2]);
  out["std"] = py::make_tuple(kImageNetStd[0], kImageNetStd[1], kImageNetStd[2]);
  out["max_side"] = kMaxOutputSide;
  return out;
}

}  // namespace

void RegisterImage(py::module_& m) {
  m.def("image_options", &ImageOptions,
        "The image path's option table: layout, dtype and record names, ImageNet's mean and std, the "
        "longest output side.");
  m.def("image_sizes", &ImageSizes, py::arg("images"),
        "(width, height, kind) of each image (bytes-like encoded, or RGB pixel arrays): kind \"jpeg\" (width "
        "and height from its frame header), \"other\" (0, 0: decode it elsewhere) or \"pixels\". One call, the "
        "GIL released; DecodeError (attribute batch_index) for a damaged JPEG header.");
  m.def("decode_crops", &DecodeCrops, py::arg("images"), py::arg("jobs"), py::arg("outs"), py::arg("layout") = "CHW",
        py::arg("dtype") = "float32", py::arg("mean") = ImageNet(kImageNetMean),
        py::arg("std") = ImageNet(kImageNetStd), py::arg("scale_in_idct") = true,
        py::arg("interpolation") = "bilinear", py::arg("grayscale") = false,
        py::arg("fill") = std::array<float, 3>{0, 0, 0},
        "A batch as crop jobs: images[i] (a JPEG's bytes, or RGB pixels as a (height, width, 3) uint8 array) "
        "decoded once, over the region its jobs lie in, at the IDCT scale its most demanding job needs; job "
        "(source, box, flip, colour ops or None, output, frame, inside) written into frame `frame` of "
        "outs[output] = (writable C-contiguous buffer, width, height): the whole frame, or with inside = (x, "
        "y, width, height) the crop resized to that size at (x, y), the rest of the frame `fill` per channel. "
        "A source's jobs must be next to each other, sources in order. DecodeError (attribute batch_index: "
        "the source) for an image that does not decode; ValueError for bad arguments.");
  m.def("apply_colour", &ApplyColour, py::arg("pixels"), py::arg("ops"),
        "Applies colour ops ([(name, value), ...]: brightness, contrast, saturation factors, grayscale, "
        "solarize threshold; (\"blur\", sigma, kernel)) in place to a C-contiguous uint8 array of (height, width, 3) or (height, width) "
        "levels: the code decode_crops runs on each image. ValueError for a bad op or array.");
  m.def("scratch_bytes", [] { return ThreadScratch().bytes(); },
        "Bytes of image scratch the calling thread holds.");
}

}  // namespace lmdbloader
