// Fault guard: a read through a mapping of a file that shrank since it was
// mapped touches a page with no file behind it, and the kernel answers with
// SIGBUS, which kills the process (a DataLoader user sees only "worker exited
// unexpectedly"). Files shrink under a long job when a corpus is rewritten in
// place (`cp` truncates its target first) or a shared file system loses a
// file.
//
// A guarded mapping turns that SIGBUS into a flag: the process's SIGBUS
// handler, on a fault at a guarded address past the end of its file
// (BUS_ADRERR), maps zero pages over the rest of the mapping, marks it and
// returns, so the read completes (with zeros) and the reader checks the mark
// afterwards and reports an error instead of the bytes. Every other SIGBUS
// goes on to the handler that was installed before (Python's faulthandler,
// PyTorch's worker handler, a sanitizer's) or to the default action.
//
// The handler is put (back) in front whenever a mapping is guarded: at open,
// at remap and at a Reader's first use after fork(), where a DataLoader
// worker has installed its own handler meanwhile.
#ifndef LMDBLOADER_SRC_FAULT_GUARD_H_
#define LMDBLOADER_SRC_FAULT_GUARD_H_

#include <cstdint>

namespace lmdbloader {

// Guards [begin, begin + size). Returns a handle, or -1 when no handle is
// free (over a million mappings guarded at once): that mapping then stays
// unguarded.
int GuardMapping(const void* begin, uint64_t size);

// Stops guarding; call before unmapping.
void UnguardMapping(int handle);

// Whether a read through the mapping reached past the end of its file since
// it was guarded (the rest of the mapping reads as zeros from then on).
bool MappingShrank(int handle);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_FAULT_GUARD_H_
