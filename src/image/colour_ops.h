// The colour changes of lmdbloader/image_decode.h (ColourOps) as the
// decoders make them: the image resized into the scratch as 8-bit levels,
// then changed in place and written out in the caller's type and layout.
#ifndef LMDBLOADER_SRC_IMAGE_COLOUR_OPS_H_
#define LMDBLOADER_SRC_IMAGE_COLOUR_OPS_H_

#include <cstdint>

#include "image/resample.h"
#include "lmdbloader/image_decode.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

// InvalidArgument for more than kMaxColourOps ops, an unknown kind, a
// factor that is negative or not finite, a threshold that is not finite.
Status CheckColourOps(const ColourOps& ops);

// The spec and buffer a resampler writes into when spec has colour ops:
// uint8 HWC levels in the scratch's colour buffer (else spec and out
// unchanged). InvalidArgument when the buffer would pass the scratch's cap.
Status ColourTarget(const OutputSpec& spec, DecodeScratch::Rep* scratch, OutputSpec* inner, void** target);

// After the resampler wrote into ColourTarget's buffer: applies spec's
// ops and writes the image to out as spec says (type, layout, mean, std).
void FinishColour(const OutputSpec& spec, DecodeScratch::Rep* scratch, void* out) noexcept;

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_IMAGE_COLOUR_OPS_H_
