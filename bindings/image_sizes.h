// What an image's header tells the image path before it draws a crop: its
// size and kind, as (width, height, kind) for Python ("jpeg": the fused
// decoder's; "other": PIL decodes it, and its size comes from PIL;
// "pixels": RGB pixels already decoded). Shared by the batched split
// (image_record_module.cc) and image_sizes (image_module.cc); the split marks a
// clip frame whose header does not read (0, 0, "damaged").
#ifndef LMDBLOADER_BINDINGS_IMAGE_SIZES_H_
#define LMDBLOADER_BINDINGS_IMAGE_SIZES_H_

#include <pybind11/pybind11.h>

#include <cstdint>

#include "lmdbloader/image_decode.h"

namespace lmdbloader {

inline pybind11::tuple ImageSizeTuple(const ImageInfo& info) {
  return pybind11::make_tuple(info.width, info.height, info.format == ImageFormat::kJpeg ? "jpeg" : "other");
}

inline pybind11::tuple PixelsSizeTuple(uint32_t width, uint32_t height) {
  return pybind11::make_tuple(width, height, "pixels");
}

}  // namespace lmdbloader

#endif  // LMDBLOADER_BINDINGS_IMAGE_SIZES_H_
