// Records split into their images and targets (lmdbloader/image_record.h),
// and Caffe Datums parsed (lmdbloader/caffe_datum.h): argument conversion
// only. Images come back as memoryviews of the record's own buffer (no
// copy), which keep the record alive.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <string_view>
#include <vector>

#include "held_buffer.h"
#include "image_sizes.h"
#include "lmdbloader/caffe_datum.h"
#include "lmdbloader/convert.h"
#include "lmdbloader/image_record.h"
#include "record_objects.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

namespace {

// A record's bytes as a memoryview of one byte an item, whatever its
// buffer's item size and shape, to slice views from by byte offsets. (The
// held buffer was asked for without its format: its itemsize and ndim are
// what say whether a cast is needed.)
py::object ByteView(const py::handle& record, const HeldBuffer& held) {
  py::object whole = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(record.ptr()));
  if (!whole) throw py::error_already_set();
  if (held.view().itemsize != 1 || held.view().ndim != 1) whole = whole.attr("cast")("B");
  return whole;
}

// The part of the record that `part` views.
py::object Slice(const py::object& whole, const HeldBuffer& held, std::string_view part) {
  const size_t begin = part.empty() ? 0 : static_cast<size_t>(part.data() - held.bytes().data());
  return whole[py::slice(static_cast<py::ssize_t>(begin), static_cast<py::ssize_t>(begin + part.size()), 1)];
}

py::tuple ParseDatum(const py::object& record) {
  HeldBuffer held(record, PyBUF_C_CONTIGUOUS, "a record");
  CaffeDatum d;
  ThrowIfError(WithoutGil([&] { return ParseCaffeDatum(held.bytes(), &d); }));
  return py::make_tuple(d.channels, d.height, d.width, Slice(ByteView(record, held), held, d.data),
                        d.has_label ? py::object(py::int_(d.label)) : py::object(py::none()), d.encoded);
}

py::object ImageOf(const py::handle& record, const HeldBuffer& held, const ImageRecord& r) {
  switch (r.kind) {
    case ImageRecord::Kind::kFrames: {
      const py::object whole = ByteView(record, held);
      py::list frames(r.frames.size());
      for (size_t i = 0; i < r.frames.size(); ++i) frames[i] = Slice(whole, held, r.frames[i]);
      return std::move(frames);
    }
    case ImageRecord::Kind::kPixels: {
      py::array_t<uint8_t> rgb({static_cast<py::ssize_t>(r.height), static_cast<py::ssize_t>(r.width),
                                static_cast<py::ssize_t>(3)});
      ThrowIfError(PixelsToRgb(r, rgb.mutable_data()));
      return std::move(rgb);
    }
    case ImageRecord::Kind::kEncoded:
    case ImageRecord::Kind::kWhole: break;
  }
  if (r.image.data() == held.bytes().data() && r.image.size() == held.size()) return py::reinterpret_borrow<py::object>(record);
  return Slice(ByteView(record, held), held, r.image);
}

py::object TargetOf(const ImageRecord& r, const py::object& missing) {
  switch (r.target) {
    case ImageRecord::Target::kInteger: return py::int_(r.label);
    case ImageRecord::Target::kValue: return RecordValueToPython(r.value);
    case ImageRecord::Target::kNone: break;
  }
  return missing;
}

// One call a batch: every record split with the GIL released; the first bad
// one is the error (its position in batch_index). With `sizes`, each encoded
// image's header is read in the same loop, once every record has split.
py::tuple SplitBatch(const py::sequence& records, const std::string& layout, const py::object& field,
                     const py::object& target, bool frames, const py::object& missing, bool sizes) {
  ImageRecordSpec spec;
  ConvertOptions parsed;  // the layout's name read as the converter reads it
  ThrowIfError(SetConvertOption("record", layout, &parsed));
  spec.layout = parsed.record;
  spec.field = field.is_none() ? std::string() : field.cast<std::string>();
  spec.target = target.is_none() ? std::string() : target.cast<std::string>();
  spec.frames = frames;
  const size_t n = py::len(records);
  std::vector<py::object> objects;
  std::vector<HeldBuffer> held;
  objects.reserve(n);
  held.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    objects.push_back(records[i]);
    held.emplace_back(objects.back(), PyBUF_C_CONTIGUOUS, "a record");
  }
  std::vector<ImageRecord> split(n);
  std::vector<ImageInfo> infos(sizes ? n : 0);
  // A clip's frames: each frame's header, a damaged one marked (not the
  // batch's error: only the frames a clip is cut from need a header).
  std::vector<std::vector<ImageInfo>> frame_infos(sizes ? n : 0);
  std::vector<std::vector<bool>> frame_damaged(sizes ? n : 0);
  Status s;
  {
    py::gil_scoped_release release;
    for (size_t i = 0; i < n && s.ok(); ++i) {
      s = SplitImageRecord(spec, held[i].bytes(), &split[i]);
      if (!s.ok()) s = s.WithReason(Status::Reason::kBatchItem, static_cast<uint32_t>(i));
    }
    for (size_t i = 0; i < infos.size() && s.ok(); ++i) {
      const ImageRecord::Kind kind = split[i].kind;
      if (kind == ImageRecord::Kind::kFrames) {
        frame_infos[i].resize(split[i].frames.size());
        frame_damaged[i].resize(split[i].frames.size());
        for (size_t f = 0; f < split[i].frames.size(); ++f)
          frame_damaged[i][f] = !ReadImageInfo(split[i].frames[f], &frame_infos[i][f]).ok();
        continue;
      }
      if (kind != ImageRecord::Kind::kEncoded && kind != ImageRecord::Kind::kWhole) continue;
      s = ReadImageInfo(split[i].image, &infos[i]);
      if (!s.ok()) s = s.WithReason(Status::Reason::kBatchItem, static_cast<uint32_t>(i));
    }
  }
  ThrowIfError(s);
  py::list images(n), targets(n);
  for (size_t i = 0; i < n; ++i) {
    try {
      images[i] = ImageOf(objects[i], held[i], split[i]);
    } catch (StatusError& e) {  // pixels the image path cannot show
      throw StatusError{e.status.WithReason(Status::Reason::kBatchItem, static_cast<uint32_t>(i))};
    }
    targets[i] = TargetOf(split[i], missing);
  }
  if (!sizes) return py::make_tuple(std::move(images), std::move(targets));
  py::list found(n);
  for (size_t i = 0; i < n; ++i) {
    switch (split[i].kind) {
      case ImageRecord::Kind::kPixels:
        found[i] = PixelsSizeTuple(static_cast<uint32_t>(split[i].width), static_cast<uint32_t>(split[i].height));
        break;
      case ImageRecord::Kind::kFrames: {
        py::list frames(split[i].frames.size());
        for (size_t f = 0; f < split[i].frames.size(); ++f)
          frames[f] = frame_damaged[i][f] ? py::make_tuple(0, 0, "damaged") : ImageSizeTuple(frame_infos[i][f]);
        found[i] = std::move(frames);
        break;
      }
      case ImageRecord::Kind::kEncoded:
      case ImageRecord::Kind::kWhole: found[i] = ImageSizeTuple(infos[i]); break;
    }
  }
  return py::make_tuple(std::move(images), std::move(targets), std::move(found));
}

}  // namespace

void RegisterImageRecords(py::module_& m) {
  m.def("caffe_datum", &ParseDatum, py::arg("record"),
        "A Caffe Datum's (channels, height, width, data, label, encoded): data a memoryview into record, label "
        "None when the record has none. DecodeError for bytes that are not a valid Datum "
        "(include/lmdbloader/caffe_datum.h lists the rules).");
  m.def("split_image_records", &SplitBatch, py::arg("records"), py::arg("layout") = "msgpack",
        py::arg("field") = "image", py::arg("target") = "label", py::arg("frames") = false,
        py::arg("missing") = py::none(), py::arg("sizes") = false,
        "(images, targets) of records (bytes-like) laid out as `layout` (include/lmdbloader/image_record.h), "
        "in one call with the GIL released: an image is a memoryview into its record (an encoded image), a "
        "list of them (frames=True: a clip's frames) or an RGB uint8 array (height, width, 3) (raw pixels); "
        "a target is an int, another msgpack value, or `missing` where the record has none. field/target "
        "None: none is read. sizes=True: also each image's (width, height, kind) (kind \"jpeg\", \"other\" or "
        "\"pixels\"; for frames a list, a frame's damaged header (0, 0, \"damaged\")), its header read in the same "
        "loop. DecodeError (attribute batch_index) for "
        "the first record that does not split, or whose JPEG header is damaged.");
}

}  // namespace lmdbloader
