// The _core extension: translates the C++ Reader to Python. No logic of its
// own beyond building Python objects: errors are translated in one place
// (ThrowIfError and the translator below), reads release the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <map>
#include <memory>

#include <msgpack.hpp>

#include "lmdbloader/batch_ring.h"
#include "lmdbloader/convert.h"
#include "lmdbloader/inspect.h"
#include "lmdbloader/memory.h"
#include "lmdbloader/options.h"
#include "lmdbloader/reader.h"
#include "lmdbloader/writer.h"
#include "lmdbloader/lmdb_copy.h"
#include "lmdbloader/msgpack_record.h"
#include "status_error.h"

namespace py = pybind11;
using namespace lmdbloader;

namespace {

// A message as Python text: paths in it are the file system's bytes, which
// need not be UTF-8; those bytes show as \xNN escapes.
py::object MessageText(const std::string& m) {
  return py::reinterpret_steal<py::object>(
      PyUnicode_DecodeUTF8(m.data(), static_cast<Py_ssize_t>(m.size()), "backslashreplace"));
}

// Python exception classes live in lmdbloader/errors.py. A status's reason
// rides on the exception as attributes (reason, and lmdb_format), so callers
// (compat) never parse the message.
void TranslateStatus(const Status& s) {
  py::module_ errors = py::module_::import("lmdbloader.errors");
  py::object text = MessageText(s.message());
  py::object type;
  switch (s.code()) {
    case Status::Code::kNotFound: type = py::reinterpret_borrow<py::object>(PyExc_KeyError); break;
    case Status::Code::kOutOfRange: type = py::reinterpret_borrow<py::object>(PyExc_IndexError); break;
    case Status::Code::kInvalidArgument: type = py::reinterpret_borrow<py::object>(PyExc_ValueError); break;
    case Status::Code::kIOError: type = py::reinterpret_borrow<py::object>(PyExc_OSError); break;
    case Status::Code::kCorruption: type = errors.attr("CorruptedError"); break;
    case Status::Code::kUnsupported: type = errors.attr("UnsupportedError"); break;
    case Status::Code::kDecodeError: type = errors.attr("DecodeError"); break;
    default:
      type = errors.attr("Error");
      text = MessageText(std::string(CodeName(s.code())) + ": " + s.message());
  }
  py::object exc = s.code() == Status::Code::kIOError && s.sys_errno() != 0 ? type(s.sys_errno(), text) : type(text);
  switch (s.reason()) {
    case Status::Reason::kNotLmdb: exc.attr("reason") = "not_lmdb"; break;
    case Status::Reason::kLmdbFormat:
      exc.attr("reason") = "lmdb_format";
      exc.attr("lmdb_format") = s.reason_detail();
      break;
    case Status::Reason::kBatchItem: exc.attr("batch_index") = s.reason_detail(); break;
    case Status::Reason::kNone: break;
  }
  PyErr_SetObject(type.ptr(), exc.ptr());
}

// Holds records between the read (GIL released) and decoding. Each thread
// reuses one buffer: a fresh one per call costs a zero fill and, above
// malloc's mmap threshold, a page fault per 4 KiB on every call, which
// measured slower than the read itself. A buffer above kKeepBytes is freed
// after use, so one huge batch does not pin its memory for the process's life.
class ScratchBuffer {
 public:
  explicit ScratchBuffer(uint64_t size) {
    Slot& slot = ThreadSlot();
    // A transform called from decode_batch may read from a Reader while the
    // batch still needs its buffer: such a nested use gets a private one.
    if (slot.in_use) {
      own_.reset(new char[size ? size : 1]);
      data_ = own_.get();
      return;
    }
    if (size > slot.capacity) {
      slot.data.reset();  // free first: never hold the old and the new buffer together
      slot.data.reset(new char[size]);
      slot.capacity = size;
    }
    slot.in_use = true;
    data_ = slot.data.get();
    shared_ = true;
  }
  ~ScratchBuffer() {
    if (!shared_) return;
    Slot& slot = ThreadSlot();
    slot.in_use = false;
    if (slot.capacity > kKeepBytes) {
      slot.data.reset();
      slot.capacity = 0;
    }
  }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  char* data() { return data_; }

 private:
  static constexpr uint64_t kKeepBytes = 8ull << 20;
  struct Slot {
    std::unique_ptr<char[]> data;
    uint64_t capacity = 0;
    bool in_use = false;
  };
  static Slot& ThreadSlot() {
    thread_local Slot slot;
    return slot;
  }
  std::unique_ptr<char[]> own_;
  char* data_ = nullptr;
  bool shared_ = false;
};

// ---- msgpack -> Python objects (maps, lists, bytes, ints, floats, strings).

py::object ToPython(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return py::none();
    case msgpack::type::BOOLEAN: return py::bool_(o.via.boolean);
    case msgpack::type::POSITIVE_INTEGER:
      return py::reinterpret_steal<py::object>(PyLong_FromUnsignedLongLong(o.via.u64));
    case msgpack::type::NEGATIVE_INTEGER:
      return py::reinterpret_steal<py::object>(PyLong_FromLongLong(o.via.i64));
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return py::float_(o.via.f64);
    case msgpack::type::STR: {  // UnpackRecord checked the UTF-8
      PyObject* s = PyUnicode_DecodeUTF8(o.via.str.ptr, o.via.str.size, "strict");
      if (!s) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(s);
    }
    case msgpack::type::BIN: return py::bytes(o.via.bin.ptr, o.via.bin.size);
    case msgpack::type::ARRAY: {
      py::list list(o.via.array.size);
      for (uint32_t i = 0; i < o.via.array.size; ++i) list[i] = ToPython(o.via.array.ptr[i]);
      return std::move(list);
    }
    case msgpack::type::MAP: {
      py::dict dict;
      for (uint32_t i = 0; i < o.via.map.size; ++i)
        dict[ToPython(o.via.map.ptr[i].key)] = ToPython(o.via.map.ptr[i].val);
      return std::move(dict);
    }
    default:
      throw std::invalid_argument("msgpack extension types are not supported");
  }
}

// Decodes one record; a malformed record raises lmdbloader.DecodeError
// naming the file and the record.
py::object DecodeRecord(const Reader& r, uint64_t index, const char* data, size_t size) {
  msgpack::object_handle oh;
  std::string error;
  if (!UnpackRecord(data, size, &oh, &error)) {
    py::module_ errors = py::module_::import("lmdbloader.errors");
    std::string m = "cannot decode record " + std::to_string(index) + " of " + r.path() + " as msgpack: " + error;
    PyErr_SetObject(errors.attr("DecodeError").ptr(), MessageText(m).ptr());
    throw py::error_already_set();
  }
  return ToPython(oh.get());
}

// Any Python integer (numpy's too) to a position; negative counts from the
// end; IndexError naming the file for anything out of range, however large.
uint64_t Position(const Reader& r, const py::handle& index) {
  PyObject* number = PyNumber_Index(index.ptr());
  if (!number) {
    PyErr_Clear();
    throw py::type_error(std::string("indices must be integers, not ") + Py_TYPE(index.ptr())->tp_name);
  }
  py::object owner = py::reinterpret_steal<py::object>(number);
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(number, &overflow);
  const int64_t n = static_cast<int64_t>(r.size());
  const int64_t i = overflow ? -1 : value < 0 ? value + n : value;
  if (overflow || i < 0 || i >= n)
    throw StatusError{Status::OutOfRange("index " + py::str(owner).cast<std::string>() + " out of range for " +
                                         r.path() + " (" + std::to_string(n) + " records)")};
  return static_cast<uint64_t>(i);
}

// Reads record `i` straight into a new bytes object.
py::bytes ReadBytes(Reader& r, uint64_t i) {
  uint64_t size = 0;
  ThrowIfError(r.ValueSize(i, &size));
  PyObject* obj = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
  if (!obj) throw py::error_already_set();
  py::bytes out = py::reinterpret_steal<py::bytes>(obj);
  Status s;
  // Releasing the GIL costs about as much as reading a small record.
  if (size >= (64u << 10)) {
    py::gil_scoped_release release;
    s = r.ReadInto(i, PyBytes_AS_STRING(obj), size);
  } else {
    s = r.ReadInto(i, PyBytes_AS_STRING(obj), size);
  }
  ThrowIfError(s);
  return out;
}

std::vector<uint64_t> Positions(const Reader& r, const py::iterable& indices) {
  std::vector<uint64_t> out;
  for (py::handle index : indices) out.push_back(Position(r, index));
  return out;
}

std::vector<uint64_t> ValueSizes(const Reader& r, const std::vector<uint64_t>& pos) {
  std::vector<uint64_t> sizes(pos.size());
  for (size_t k = 0; k < pos.size(); ++k) ThrowIfError(r.ValueSize(pos[k], &sizes[k]));
  return sizes;
}

// An uninitialized bytes object of `size` bytes, to be read into at *data.
py::object NewBytes(uint64_t size, char** data) {
  PyObject* obj = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
  if (!obj) throw py::error_already_set();
  *data = PyBytes_AS_STRING(obj);
  return py::reinterpret_steal<py::object>(obj);
}

py::list ReadBatchBytes(Reader& r, const py::iterable& indices) {
  std::vector<uint64_t> pos = Positions(r, indices);
  py::list out(pos.size());
  std::vector<char*> dsts(pos.size());
  for (size_t k = 0; k < pos.size(); ++k) {
    uint64_t size = 0;
    ThrowIfError(r.ValueSize(pos[k], &size));
    out[k] = NewBytes(size, &dsts[k]);
  }
  Status s;
  {
    py::gil_scoped_release release;
    s = r.ReadBatch(pos.data(), pos.size(), dsts.data());
  }
  ThrowIfError(s);
  return out;
}

// Reads record indices[k] to `buffer` at offsets[k] (one writable buffer:
// a ring slot, or a tensor's memory), or into buffers[k] when `offsets` is
// None (a list of writable buffers, one a record, each of its record's
// size). Checksums are checked in place. Bounds are checked before anything
// is read.
void ReadBatchInto(Reader& r, const py::iterable& indices, const py::object& buffers, const py::object& offsets) {
  std::vector<uint64_t> pos = Positions(r, indices);
  std::vector<uint64_t> sizes = ValueSizes(r, pos);
  std::vector<char*> dsts(pos.size());
  std::vector<py::buffer_info> held;  // keeps each buffer exported during the read
  if (offsets.is_none()) {
    py::list list = buffers.cast<py::list>();
    if (list.size() != pos.size()) throw py::value_error("one buffer a record is needed");
    for (size_t k = 0; k < pos.size(); ++k) {
      held.push_back(list[k].cast<py::buffer>().request(true));
      const py::buffer_info& b = held.back();
      if (static_cast<uint64_t>(b.size * b.itemsize) != sizes[k])
        throw py::value_error("buffer " + std::to_string(k) + " holds " + std::to_string(b.size * b.itemsize) +
                              " bytes; record " + std::to_string(pos[k]) + " has " + std::to_string(sizes[k]));
      dsts[k] = static_cast<char*>(b.ptr);
    }
  } else {
    held.push_back(buffers.cast<py::buffer>().request(true));
    const py::buffer_info& b = held.back();
    const uint64_t capacity = static_cast<uint64_t>(b.size * b.itemsize);
    std::vector<uint64_t> at = offsets.cast<std::vector<uint64_t>>();
    if (at.size() != pos.size()) throw py::value_error("one offset a record is needed");
    for (size_t k = 0; k < pos.size(); ++k) {
      if (at[k] > capacity || sizes[k] > capacity - at[k])
        throw py::value_error("record " + std::to_string(pos[k]) + " (" + std::to_string(sizes[k]) +
                              " bytes at offset " + std::to_string(at[k]) + ") does not fit a buffer of " +
                              std::to_string(capacity) + " bytes");
      dsts[k] = static_cast<char*>(b.ptr) + at[k];
    }
  }
  Status s;
  {
    py::gil_scoped_release release;
    s = r.ReadBatch(pos.data(), pos.size(), dsts.data());
  }
  ThrowIfError(s);
}

// A batch's hold on one ring slot, in the process that received the batch:
// exports the slot's bytes (tensors are built over it with torch.frombuffer,
// each holding a reference), and frees the slot when the last reference goes,
// so the slot is reused only after every tensor, view and alias of its batch
// is gone. Only the process that took the lease releases it: a child forked
// while the batch is held inherits the lease, and its release would free the
// slot under the parent's batch.
struct RingLease {
  std::shared_ptr<BatchRing> ring;
  uint32_t slot = 0;
  uint64_t generation = 0;
  pid_t holder = ::getpid();
  ~RingLease() {
    if (::getpid() == holder) ring->Release(slot, generation);
  }
};

RingBacking ParseBacking(const std::string& name) {
  if (name == "auto") return RingBacking::kAuto;
  if (name == "memfd") return RingBacking::kMemfd;
  if (name == "shm") return RingBacking::kShm;
  throw py::value_error("backing must be 'auto', 'memfd' or 'shm'; got '" + name + "'");
}

void BindBatchRing(py::module_& m) {
  py::class_<BatchRing, std::shared_ptr<BatchRing>>(m, "BatchRing", py::buffer_protocol())
      .def_property_readonly_static("MAX_SLOTS", [](const py::object&) { return BatchRing::kMaxSlots; })
      .def_static("create", [](uint32_t slots, uint64_t slot_bytes, const std::string& backing) {
        std::unique_ptr<BatchRing> ring;
        ThrowIfError(BatchRing::Create(slots, slot_bytes, ParseBacking(backing), &ring));
        return std::shared_ptr<BatchRing>(std::move(ring));
      }, py::arg("slots"), py::arg("slot_bytes"), py::arg("backing") = "auto")
      .def_static("attach", [](int fd) {
        std::unique_ptr<BatchRing> ring;
        ThrowIfError(BatchRing::Attach(fd, &ring));
        return std::shared_ptr<BatchRing>(std::move(ring));
      }, py::arg("fd"))
      .def_property_readonly("fd", &BatchRing::fd)
      .def_property_readonly("slots", &BatchRing::slots)
      .def_property_readonly("slot_bytes", &BatchRing::slot_bytes)
      .def_property_readonly("total_bytes", &BatchRing::total_bytes)
      .def_property_readonly("reserved_bytes", &BatchRing::reserved_bytes)
      .def_property_readonly("backing", &BatchRing::backing_name)
      .def_property_readonly("retired", &BatchRing::retired)
      .def("acquire", [](BatchRing& ring) -> py::object {
        uint32_t slot = 0;
        uint64_t generation = 0;
        if (!ring.Acquire(&slot, &generation)) return py::none();
        return py::make_tuple(slot, generation);
      })
      // Reserving and giving back pages (tens of MiB at a time) let the
      // worker's other threads (the queue's feeder) run meanwhile.
      .def("reserve", [](BatchRing& ring, uint32_t slot, uint64_t bytes) {
        Status s;
        {
          py::gil_scoped_release release;
          s = ring.Reserve(slot, bytes);
        }
        ThrowIfError(s);
      }, py::arg("slot"), py::arg("bytes"))
      .def("release", &BatchRing::Release)
      .def("return_free_slots", &BatchRing::ReturnFreeSlots, py::call_guard<py::gil_scoped_release>())
      .def("retire", &BatchRing::Retire, py::call_guard<py::gil_scoped_release>())
      .def("generation", &BatchRing::generation)
      .def("held", &BatchRing::held)
      .def_buffer([](BatchRing& ring) {  // every slot, one after another
        return py::buffer_info(ring.slot_data(0), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(uint64_t{ring.slots()} * ring.slot_bytes())}, {1});
      });
  py::class_<RingLease>(m, "RingLease", py::buffer_protocol())
      .def(py::init([](std::shared_ptr<BatchRing> ring, uint32_t slot, uint64_t generation) {
        if (slot >= ring->slots()) throw py::value_error("no slot " + std::to_string(slot) + " in this ring");
        return new RingLease{std::move(ring), slot, generation};
      }))
      .def_buffer([](RingLease& lease) {
        return py::buffer_info(lease.ring->slot_data(lease.slot), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(lease.ring->slot_bytes())}, {1});
      });
}

// Records are read and decoded a cache-sized chunk at a time: reading a whole
// batch first and decoding it afterwards measured 0.6x of per-record speed,
// because by the time a record is decoded its bytes have left the CPU cache.
// `transform` (or None) is applied to each record as soon as it is decoded,
// so only one decoded record of the batch exists untransformed at a time.
constexpr uint64_t kDecodeChunkBytes = 256u << 10;
// Checking a record this large (its checksum: about 4 us) is worth more than
// releasing and taking the GIL back (well under 1 us).
constexpr uint64_t kReleaseGilBytes = 64u << 10;

// End of the chunk of records starting at `first`: up to kDecodeChunkBytes,
// at least one record. `*total` gets the chunk's bytes.
size_t ChunkEnd(const std::vector<uint64_t>& sizes, size_t first, uint64_t* total) {
  size_t end = first;
  *total = 0;
  while (end < sizes.size() && (end == first || *total + sizes[end] <= kDecodeChunkBytes)) *total += sizes[end++];
  return end;
}

// fn(arg) for one record. An exception fn raises goes on unchanged, with a
// note (PEP 678, Python 3.11+) naming the record and file: a DataLoader
// re-raises a worker's exception as text, where a user's decode error would
// otherwise not say which record of which file it met.
py::object CallForRecord(const py::object& fn, py::object arg, const Reader& r, uint64_t index) {
  try {
    return fn(std::move(arg));
  } catch (py::error_already_set& e) {
    py::object exc = e.value();
    if (exc && py::hasattr(exc, "add_note"))
      exc.attr("add_note")("lmdbloader: raised on record " + std::to_string(index) + " of " + r.path());
    throw;
  }
}

py::list DecodeBatch(Reader& r, const py::iterable& indices, const py::object& transform) {
  std::vector<uint64_t> pos = Positions(r, indices);
  std::vector<uint64_t> sizes = ValueSizes(r, pos);
  py::list out(pos.size());
  std::vector<char*> dsts;
  for (size_t first = 0; first < pos.size();) {
    uint64_t total = 0;
    const size_t end = ChunkEnd(sizes, first, &total);
    ScratchBuffer buf(total);
    dsts.clear();
    for (size_t k = first, at = 0; k < end; at += sizes[k], ++k) dsts.push_back(buf.data() + at);
    Status s;
    {
      py::gil_scoped_release release;
      s = r.ReadBatch(pos.data() + first, end - first, dsts.data());
    }
    ThrowIfError(s);
    for (size_t k = first; k < end; ++k) {
      py::object record = DecodeRecord(r, pos[k], dsts[k - first], sizes[k]);
      out[k] = transform.is_none() ? record : CallForRecord(transform, std::move(record), r, pos[k]);
    }
    first = end;
  }
  return out;
}

// fn(bytes) of each record, read a chunk at a time (one ReadBatch, reads in
// flight together) and each record's bytes dropped as soon as fn returns.
// Holding a whole batch of large records at once instead measured 5x slower
// for 1 MiB records: the allocator returns the freed batch to the kernel and
// every record's pages fault in again (about 255 faults a MiB).
py::list ApplyBatch(Reader& r, const py::iterable& indices, const py::object& fn) {
  std::vector<uint64_t> pos = Positions(r, indices);
  std::vector<uint64_t> sizes = ValueSizes(r, pos);
  py::list out(pos.size());
  std::vector<py::object> chunk;
  std::vector<char*> dsts;
  for (size_t first = 0; first < pos.size();) {
    uint64_t total = 0;
    const size_t end = ChunkEnd(sizes, first, &total);
    chunk.clear();
    dsts.clear();
    for (size_t k = first; k < end; ++k) {
      dsts.push_back(nullptr);
      chunk.push_back(NewBytes(sizes[k], &dsts.back()));
    }
    Status s;
    {
      py::gil_scoped_release release;
      s = r.ReadBatch(pos.data() + first, end - first, dsts.data());
    }
    ThrowIfError(s);
    for (size_t k = first; k < end; ++k) {
      out[k] = CallForRecord(fn, std::move(chunk[k - first]), r, pos[k]);
    }
    first = end;
  }
  return out;
}

// fn(view) of each record, zero-copy (mode=mmap): the batch's pages are
// prefetched together, then each record is checked (checksum) in the mapping
// and handed at once to fn as a read-only memoryview. No copy is made:
// against a copy out of the page cache (pread or memcpy) this saves one pass
// over the record's bytes, which for large records is most of the work
// (bench/cold_bench.py --views-only). One record at a time, so that fn's touches are
// counted by the governor at the next record and the bytes are still in the
// CPU cache when fn reads them. A view stays valid as long as it is
// referenced (it keeps its mapping).
py::list ApplyBatchViews(Reader& r, const py::iterable& indices, const py::object& fn) {
  std::vector<uint64_t> pos = Positions(r, indices);
  std::vector<uint64_t> sizes = ValueSizes(r, pos);
  {
    py::gil_scoped_release release;
    r.Prefetch(pos.data(), pos.size());
  }
  py::list out(pos.size());
  for (size_t k = 0; k < pos.size(); ++k) {
    RecordView view;
    Status s;
    if (sizes[k] >= kReleaseGilBytes) {
      py::gil_scoped_release release;
      s = r.View(pos[k], &view);
    } else {
      s = r.View(pos[k], &view);
    }
    ThrowIfError(s);
    py::object holder = py::cast(std::move(view));
    PyObject* mv = PyMemoryView_FromObject(holder.ptr());
    if (!mv) throw py::error_already_set();
    out[k] = CallForRecord(fn, py::reinterpret_steal<py::object>(mv), r, pos[k]);
    // fn read the mapping: zeros, not the file's bytes, if the file shrank meanwhile.
    ThrowIfError(r.CheckMappings());
  }
  return out;
}

py::dict StatsDict(Reader& r) {
  ReaderStats s = r.stats();
  py::dict d;
  d["rss_budget"] = s.rss_budget;
  d["mode"] = s.mode;
  d["records"] = s.records;
  d["process_rss"] = s.process_rss;
  d["process_file_rss"] = s.process_file_rss;
  d["mapped_rss"] = s.mapped_rss;
  d["drops"] = s.drops;
  d["remaps"] = s.remaps;
  d["records_read"] = s.records_read;
  d["bytes_read"] = s.bytes_read;
  d["index_bytes"] = s.index_bytes;
  d["index_source"] = s.index_source;
  d["io_engine"] = s.io_engine;
  d["io_fallback"] = s.io_fallback;
  d["queue_depth"] = s.queue_depth;
  d["cache_policy"] = s.cache_policy;
  d["chunks_filled"] = s.chunks_filled;
  return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "lmdbloader C++ core (private; use the lmdbloader package)";
  m.attr("__version__") = LMDBLOADER_VERSION;

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      TranslateStatus(e.status);
    }
  });

  RegisterImage(m);

  m.def("parse_byte_size", [](const std::string& text) {
    uint64_t v = 0;
    ThrowIfError(ParseByteSize(text, &v));
    return v;
  });

  // The converter's options by name as text (ConvertOptionList), as the
  // reader's: the library parses and checks each one.
  m.def("convert_options", [] {
    py::list out;
    const ConvertOptions defaults;
    for (const OptionInfo& o : ConvertOptionList())
      out.append(py::make_tuple(o.name, o.kind, o.values, o.help, ConvertOptionValue(defaults, o.name)));
    return out;
  });
  m.def("convert", [](const std::map<std::string, std::string>& given) {
    ConvertOptions o;
    for (const auto& [name, text] : given) ThrowIfError(SetConvertOption(name, text, &o));
    ConvertSummary summary;
    Status s;
    {
      py::gil_scoped_release release;
      s = Convert(o, &summary);
    }
    ThrowIfError(s);
    py::dict d;
    d["outputs"] = summary.outputs;
    d["records"] = summary.records;
    d["bytes"] = summary.bytes;
    d["seconds"] = summary.seconds;
    d["skipped"] = summary.skipped;
    return d;
  });

  m.def("write_shard_list", [](const std::string& folder) {
    uint64_t records = 0;
    ThrowIfError(WriteShardList(folder, &records));
    return records;
  });

  m.def("inspect", [](const std::string& path, const std::string& db) {
    DatabaseInfo info;
    ThrowIfError(InspectDatabase(path, db, &info));
    py::dict d;
    d["data_path"] = info.data_path;
    d["file_bytes"] = info.file_bytes;
    d["page_size"] = info.page_size;
    d["depth"] = info.depth;
    d["branch_pages"] = info.branch_pages;
    d["leaf_pages"] = info.leaf_pages;
    d["overflow_pages"] = info.overflow_pages;
    d["entries"] = info.entries;
    d["last_txnid"] = info.last_txnid;
    d["last_pgno"] = info.last_pgno;
    d["map_size"] = info.map_size;
    return d;
  });
  m.def("named_databases", [](const std::string& path) {
    std::vector<std::string> names;
    ThrowIfError(ListNamedDatabases(path, &names));
    py::list out;
    for (const auto& n : names) out.append(py::bytes(n));
    return out;
  });
  m.def("copy_environment", [](const std::string& path, const std::string& dir, bool compact) {
    py::gil_scoped_release release;
    ThrowIfError(CopyEnvironmentToDir(path, dir, compact));
  });
  m.def("copy_environment_fd", [](const std::string& path, int fd, bool compact) {
    py::gil_scoped_release release;
    ThrowIfError(CopyEnvironmentToFd(path, fd, compact));
  });
  m.def("leaf_layout", [](const std::string& path, const std::string& db) {
    LeafLayout layout;
    ThrowIfError(ReadLeafLayout(path, db, &layout));
    py::dict dups;
    for (const auto& [key, starts] : layout.dup_page_starts) dups[py::int_(key)] = py::cast(starts);
    return py::make_tuple(py::cast(layout.key_page_starts), dups);
  });
  m.def("lmdb_version", [] {
    int major = 0, minor = 0, patch = 0;
    LmdbVersion(&major, &minor, &patch);
    return py::make_tuple(major, minor, patch);
  });

  m.def("process_memory", [](int pid) {
    ProcessMemory mem;
    ThrowIfError(ReadProcessMemory(pid, &mem));
    py::dict d;
    d["rss"] = mem.rss;
    d["pss"] = mem.pss;
    d["uss"] = mem.uss;
    d["shared"] = mem.shared;
    d["file_rss"] = mem.file_rss;
    d["shmem_rss"] = mem.shmem_rss;
    return d;
  }, py::arg("pid") = 0);

  // A view's bytes, exposed through the buffer protocol (read-only). The
  // RecordView inside keeps the mapping alive.
  py::class_<RecordView>(m, "RecordView", py::buffer_protocol())
      .def_buffer([](RecordView& v) {
        return py::buffer_info(const_cast<char*>(v.data()), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(v.size())}, {1}, /*readonly=*/true);
      })
      .def("__len__", &RecordView::size);

  py::class_<CorpusWriter>(m, "CorpusWriter")
      .def(py::init([](const std::string& target, bool overwrite, bool keyed_by_names) {
             WriterOptions o;
             o.overwrite = overwrite;
             o.keys = keyed_by_names ? CorpusKeys::kNames : CorpusKeys::kRecordNumbers;
             std::unique_ptr<CorpusWriter> w;
             ThrowIfError(CorpusWriter::Create(target, o, &w));
             return w;
           }),
           py::arg("target"), py::arg("overwrite") = false, py::arg("keyed_by_names") = false)
      .def("add", [](CorpusWriter& w, const std::string& name, const py::bytes& record,
                     const std::map<std::string, double>& columns) {
        ThrowIfError(w.Add(name, std::string_view(record), columns));
      }, py::arg("name"), py::arg("record"), py::arg("columns") = std::map<std::string, double>{})
      .def("finish", [](CorpusWriter& w, const std::string& manifest_json) {
        Status s;
        {
          py::gil_scoped_release release;
          s = w.Finish(manifest_json);
        }
        ThrowIfError(s);
      })
      .def("__len__", &CorpusWriter::size);

  BindBatchRing(m);
  m.attr("MAX_SHARDS") = kMaxShards;
  m.def("reader_options", [] {
    py::list out;
    const ReaderOptions defaults;
    for (const ReaderOptionInfo& o : ReaderOptionList())
      out.append(py::make_tuple(o.name, o.kind, o.values, o.help, ReaderOptionValue(defaults, o.name)));
    return out;
  });

  py::class_<Reader>(m, "Reader")
      // Options by name as text (ReaderOptionList): the library parses and
      // checks each; the budget's default comes from LMDBLOADER_RSS_BUDGET.
      .def(py::init([](const std::string& path, const std::map<std::string, std::string>& given) {
             ReaderOptions o;
             ThrowIfError(ReaderOptionsFromEnvironment(&o));
             for (const auto& [name, text] : given) ThrowIfError(SetReaderOption(name, text, &o));
             std::unique_ptr<Reader> r;
             Status s;
             {
               py::gil_scoped_release release;
               s = Reader::Open(path, o, &r);
             }
             ThrowIfError(s);
             return r;
           }),
           py::arg("path"), py::arg("options"))
      .def("option", [](const Reader& r, const std::string& name) { return ReaderOptionValue(r.options(), name); })
      .def("__len__", &Reader::size)
      .def_property_readonly("path", &Reader::path)
      .def_property_readonly("mode", [](const Reader& r) { return AccessModeName(r.mode()); })
      .def_property_readonly("manifest", &Reader::manifest)
      .def_property_readonly("db_flags", &Reader::db_flags)
      .def("read", [](Reader& r, const py::object& i) { return ReadBytes(r, Position(r, i)); })
      .def("read_batch", &ReadBatchBytes)
      .def("decode", [](Reader& r, const py::object& i) {
        uint64_t pos = Position(r, i);
        uint64_t size = 0;
        ThrowIfError(r.ValueSize(pos, &size));
        ScratchBuffer buf(size);
        Status s;
        {
          py::gil_scoped_release release;
          s = r.ReadInto(pos, buf.data(), size);
        }
        ThrowIfError(s);
        return DecodeRecord(r, pos, buf.data(), size);
      })
      .def("decode_batch", &DecodeBatch, py::arg("indices"), py::arg("transform") = py::none())
      .def("apply_batch", &ApplyBatch, py::arg("indices"), py::arg("fn"))
      .def("apply_batch_views", &ApplyBatchViews, py::arg("indices"), py::arg("fn"))
      .def("value_sizes", [](Reader& r, const py::iterable& indices) { return ValueSizes(r, Positions(r, indices)); })
      .def("read_batch_into", &ReadBatchInto, py::arg("indices"), py::arg("buffers"), py::arg("offsets") = py::none())
      .def("value_size", [](Reader& r, const py::object& i) {
        uint64_t size = 0;
        ThrowIfError(r.ValueSize(Position(r, i), &size));
        return size;
      })
      .def("check_mappings", [](const Reader& r) { ThrowIfError(r.CheckMappings()); })
      .def("view", [](Reader& r, const py::object& i) {
        RecordView v;
        ThrowIfError(r.View(Position(r, i), &v));
        return v;
      })
      .def("key", [](Reader& r, const py::object& i) {
        std::string k;
        ThrowIfError(r.Key(Position(r, i), &k));
        return py::bytes(k);
      })
      .def("find", [](Reader& r, const py::bytes& key) -> py::object {
        uint64_t pos = 0;
        Status s = r.Find(std::string_view(key), &pos);
        if (s.IsNotFound()) return py::none();
        ThrowIfError(s);
        return py::int_(pos);
      })
      .def("lower_bound", [](Reader& r, const py::bytes& key) { return r.LowerBound(std::string_view(key)); })
      .def("name", [](Reader& r, const py::object& i) {
        const uint64_t pos = Position(r, i);
        std::string n;
        ThrowIfError(r.Name(pos, &n));
        // Names that are keys are bytes (an LMDB's keys); others UTF-8 text, checked by the core.
        if (r.corpus_keys() == CorpusKeys::kNames) return py::object(py::bytes(n));
        return py::object(py::str(n));
      })
      .def_property_readonly("keyed_by_names", [](const Reader& r) { return r.corpus_keys() == CorpusKeys::kNames; })
      .def("column_chunks", [](Reader& r, const std::string& name) {
        std::vector<ColumnChunk> chunks;
        ThrowIfError(r.Column(name, &chunks));
        py::list out;
        for (const auto& c : chunks) out.append(py::make_tuple(c.data_path, c.offset, c.size, c.dtype));
        return out;
      })
      .def("read_column", [](Reader& r, const std::string& name) {
        std::string bytes;
        ThrowIfError(r.ReadColumn(name, &bytes));
        return py::bytes(bytes);
      })
      .def("record_positions", [](const Reader& r) {
        std::vector<uint64_t> positions;
        r.RecordPositions(&positions);
        return py::bytes(reinterpret_cast<const char*>(positions.data()), positions.size() * 8);
      })
      .def("remap", [](Reader& r) { ThrowIfError(r.Remap()); })
      .def("stats", &StatsDict);
}
