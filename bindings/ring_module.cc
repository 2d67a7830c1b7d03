// _core.BatchRing and _core.RingLease (lmdbloader/batch_ring.h to Python):
// the shared-memory ring lmdbloader.collate moves batches through, and a
// batch's hold on its slot. The ring's layout and the lease's fork rule are
// the library's; this only converts arguments and exports buffers.
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "lmdbloader/batch_ring.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

namespace {

RingBacking ParseBacking(const std::string& name) {
  RingBacking backing = RingBacking::kAuto;
  ThrowIfError(ParseRingBacking(name, &backing));
  return backing;
}

// `size` bytes at `data` as a writable Python buffer of unsigned bytes.
py::buffer_info ByteBuffer(char* data, uint64_t size) {
  return py::buffer_info(data, 1, py::format_descriptor<uint8_t>::format(), 1, {static_cast<py::ssize_t>(size)},
                         {1});
}

}  // namespace

void RegisterRing(py::module_& m) {
  py::class_<BatchRing, std::shared_ptr<BatchRing>>(m, "BatchRing", py::buffer_protocol())
      .def_property_readonly_static("MAX_SLOTS", [](const py::object&) { return BatchRing::kMaxSlots; })
      .def_property_readonly_static("HEADER_BYTES", [](const py::object&) { return BatchRing::kHeaderBytes; })
      .def_static("bytes_for", &BatchRing::BytesFor, py::arg("slots"), py::arg("slot_bytes"))
      .def_static("check_backing", [](const std::string& name) { ParseBacking(name); })
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
      .def("slot_offset", &BatchRing::SlotOffset, py::arg("slot"))
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
      .def("claim", &BatchRing::Claim)
      .def("claimed", &BatchRing::claimed)
      .def("return_free_slots", &BatchRing::ReturnFreeSlots, py::call_guard<py::gil_scoped_release>())
      .def("retire", &BatchRing::Retire, py::call_guard<py::gil_scoped_release>())
      .def("generation", &BatchRing::generation)
      .def("held", &BatchRing::held)
      .def_buffer([](BatchRing& ring) {  // every slot, one after another
        return ByteBuffer(ring.slot_data(0), uint64_t{ring.slots()} * ring.slot_bytes());
      });
  // Tensors are built over the lease's buffer (torch.frombuffer), each holding
  // a reference: the slot is released when the last of them goes, and only in
  // the process that took the lease (BatchRing::Lease).
  py::class_<BatchRing::Lease>(m, "RingLease", py::buffer_protocol())
      .def(py::init([](std::shared_ptr<BatchRing> ring, uint32_t slot, uint64_t generation) {
        std::unique_ptr<BatchRing::Lease> lease;
        ThrowIfError(BatchRing::Lease::Take(std::move(ring), slot, generation, &lease));
        return lease;
      }))
      .def_buffer([](BatchRing::Lease& lease) { return ByteBuffer(lease.data(), lease.size()); });
}

}  // namespace lmdbloader
