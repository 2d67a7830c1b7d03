// A batch as a list of crop jobs (lmdbloader/image_decode.h, DecodeCropJobs):
// a single crop, CenterCrop's padded crop, a clip's frames and multi-crop
// differ only in how many jobs a source has. A source with one job that
// fills its frame streams its rows into the resampler (DecodeJpegInto, no
// stored region); several share one decode of their region
// (DecodeJpegCrops); a padded crop is resized alone and copied into its
// frame, whose rest is filled first.
#include <cstring>
#include <string>
#include <vector>

#include "image/decode_plan.h"
#include "lmdbloader/image_decode.h"

namespace lmdbloader {

namespace {

size_t ItemBytes(const OutputSpec& spec) { return spec.type == PixelType::kFloat32 ? 4 : 1; }

// The frame's pixels outside the crop: `fill` per channel, everywhere (the
// crop is copied over it next).
void FillFrame(const CropJob& job) {
  const OutputSpec& spec = job.spec;
  const size_t pixels = size_t{job.frame_width} * job.frame_height, channels = spec.channels();
  if (spec.type == PixelType::kUint8) {
    uint8_t* out = static_cast<uint8_t*>(job.frame);
    for (size_t c = 0; c < channels; ++c) {
      const uint8_t v = static_cast<uint8_t>(job.fill[c]);
      if (spec.layout == PixelLayout::kCHW) {
        std::memset(out + c * pixels, v, pixels);
      } else {
        for (size_t p = 0; p < pixels; ++p) out[p * channels + c] = v;
      }
    }
    return;
  }
  uint8_t* out = static_cast<uint8_t*>(job.frame);
  for (size_t c = 0; c < channels; ++c) {
    for (size_t p = 0; p < pixels; ++p) {
      const size_t at = spec.layout == PixelLayout::kCHW ? c * pixels + p : p * channels + c;
      std::memcpy(out + at * 4, &job.fill[c], 4);
    }
  }
}

// Copies a crop resized to spec's size into its frame at (x, y).
void PlaceCrop(const CropJob& job, const uint8_t* crop) {
  const OutputSpec& spec = job.spec;
  const size_t item = ItemBytes(spec), channels = spec.channels();
  const size_t fw = job.frame_width, fh = job.frame_height, cw = spec.width, ch = spec.height;
  uint8_t* out = static_cast<uint8_t*>(job.frame);
  if (spec.layout == PixelLayout::kCHW) {
    for (size_t c = 0; c < channels; ++c) {
      for (size_t r = 0; r < ch; ++r) {
        std::memcpy(out + ((c * fh + job.y + r) * fw + job.x) * item, crop + (c * ch + r) * cw * item, cw * item);
      }
    }
    return;
  }
  for (size_t r = 0; r < ch; ++r) {
    std::memcpy(out + ((job.y + r) * fw + job.x) * channels * item, crop + r * cw * channels * item,
                cw * channels * item);
  }
}

Status DecodeOneCrop(const CropSource& source, const CropBox& box, const OutputSpec& spec, DecodeScratch* scratch,
                     void* out) {
  if (source.rgb != nullptr) {
    return ResampleRgbInto(source.rgb, source.width, source.height, source.row_stride, box, spec, scratch, out);
  }
  return DecodeJpegInto(source.jpeg, box, spec, scratch, out);
}

// A crop that does not fill its frame: resized alone, then placed.
Status DecodePadded(const CropSource& source, const CropJob& job, DecodeScratch* scratch) {
  if (uint64_t{job.x} + job.spec.width > job.frame_width || uint64_t{job.y} + job.spec.height > job.frame_height ||
      uint64_t{job.frame_width} * job.frame_height > kMaxImagePixels) {
    return Status::InvalidArgument("a " + std::to_string(job.spec.width) + "x" + std::to_string(job.spec.height) +
                                   " crop at (" + std::to_string(job.x) + ", " + std::to_string(job.y) +
                                   ") does not lie inside its " + std::to_string(job.frame_width) + "x" +
                                   std::to_string(job.frame_height) + " frame");
  }
  LMDBLOADER_RETURN_IF_ERROR(CheckSpec(job.spec));
  std::vector<uint8_t> crop(job.spec.bytes());
  LMDBLOADER_RETURN_IF_ERROR(DecodeOneCrop(source, job.box, job.spec, scratch, crop.data()));
  FillFrame(job);
  PlaceCrop(job, crop.data());
  return Status::OK();
}

// The jobs [first, first + count) of one source.
Status DecodeSource(const CropSource& source, const CropJob* first, size_t count, DecodeScratch* scratch) {
  if (count == 1 && first->frame_width == 0) {  // the common case, with nothing to gather
    return DecodeOneCrop(source, first->box, first->spec, scratch, first->frame);
  }
  std::vector<SharedCrop> filling;
  for (size_t k = 0; k < count; ++k) {
    const CropJob& job = first[k];
    if (job.frame_width != 0) {
      LMDBLOADER_RETURN_IF_ERROR(DecodePadded(source, job, scratch));
      continue;
    }
    filling.push_back(SharedCrop{job.box, job.spec, job.frame});
  }
  if (filling.empty()) return Status::OK();
  if (filling.size() == 1) return DecodeOneCrop(source, filling[0].box, filling[0].spec, scratch, filling[0].out);
  if (source.rgb != nullptr) {
    return ResampleRgbCrops(source.rgb, source.width, source.height, source.row_stride, filling.data(),
                            filling.size(), scratch);
  }
  return DecodeJpegCrops(source.jpeg, filling.data(), filling.size(), scratch);
}

}  // namespace

Status DecodeCropJobs(const CropSource* sources, size_t source_count, const CropJob* jobs, size_t job_count,
                      DecodeScratch* scratch, size_t* failed_source) {
  *failed_source = 0;
  size_t next_source = 0;  // sources before it have had their jobs
  for (size_t i = 0; i < job_count;) {
    const uint32_t source = jobs[i].source;
    size_t end = i + 1;
    while (end < job_count && jobs[end].source == source) ++end;
    if (source >= source_count || source < next_source) {
      return Status::InvalidArgument("crop job " + std::to_string(i) + " is of source " + std::to_string(source) +
                                     " of " + std::to_string(source_count) +
                                     ": jobs of one source must be together, sources in order");
    }
    Status s = DecodeSource(sources[source], jobs + i, end - i, scratch);
    if (!s.ok()) {
      *failed_source = source;
      return s.WithPrefix("image " + std::to_string(source) + " of " + std::to_string(source_count) + ": ")
          .WithReason(Status::Reason::kBatchItem, source);
    }
    next_source = size_t{source} + 1;
    i = end;
  }
  return Status::OK();
}

}  // namespace lmdbloader
