// The colour changes of lmdbloader/image_decode.h (ColourOps) as the
// decoders make them: the image resized into the scratch as 8-bit levels,
// then changed in place and written out in the caller's type and layout.
#ifndef LMDBLOADER_SRC_IMAGE_COLOUR_OPS_H_
#define LMDBLOADER_SRC_IMAGE_COLOUR_OPS_H_

#include <cstddef>
#include <cstdint>

#include "image/resample.h"
#include "lmdbloader/image_decode.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

// The spec and buffer a resampler writes into when spec has colour ops:
// uint8 HWC levels in the scratch's colour buffer (else spec and out
// unchanged). InvalidArgument when the buffer would pass the scratch's cap,
// or when a blur's kernel is too large for spec's size (ApplyColourOps).
Status ColourTarget(const OutputSpec& spec, DecodeScratch::Rep* scratch, OutputSpec* inner, void** target);

// After the resampler wrote into ColourTarget's buffer: applies spec's
// ops and writes the image to out as spec says (type, layout, mean, std).
void FinishColour(const OutputSpec& spec, DecodeScratch::Rep* scratch, void* out) noexcept;

// hsv2rgb's steps that depend on the hue or the saturation alone, once
// (Hsv()); indexed by the 8-bit hue and saturation.
struct HsvTables {
  int sector[256];
  float remainder[256];
  float saturation[256];
  HsvTables();
};
const HsvTables& Hsv();

// torchvision's adjust_hue of PIL RGB pixels (p: `pixels` of 3 bytes, in
// place): Pillow's rgb2hsv, the hue plus `shift` modulo 256, its hsv2rgb,
// every rounding as Pillow's. ShiftHue runs the AVX2 build where the CPU
// has it (colour_ops_avx2.cc: whole blocks of 8 pixels, returning how many
// it changed) and the portable one on the rest; tests compare the two.
void ShiftHue(uint8_t* p, size_t pixels, int shift);
void ShiftHuePortable(uint8_t* p, size_t pixels, int shift);
#if defined(__x86_64__)
size_t ShiftHueAvx2(uint8_t* p, size_t pixels, int shift, const HsvTables& tables);
#endif

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IMAGE_COLOUR_OPS_H_
