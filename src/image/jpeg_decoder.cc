#include "image/jpeg_decoder.h"

// jpeglib.h needs size_t and FILE declared first.
#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include <jerror.h>
#include <jpeglib.h>

#include "lmdbloader/image_decode.h"

namespace lmdbloader {

namespace {

// Everything libjpeg touches, in one plain struct: no constructors, no
// destructors, so a longjmp out of libjpeg skips nothing. Zeroed before use.
struct JpegJob {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  jpeg_progress_mgr progress;
  jpeg_source_mgr source;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 96];
  // Inputs.
  const unsigned char* data;
  unsigned long size;
  const JpegHeader* header;
  const JpegRegionRequest* request;
  RowSink* sink;
  // Past the last row, in jpeg_finish_decompress: the end of the data ends
  // the decode without error (ended_after_last_row).
  bool finishing;
  bool ended_after_last_row;
  // Outcome.
  bool sink_refused;
  bool bad_request;
};

JpegJob* JobOf(j_common_ptr cinfo) { return static_cast<JpegJob*>(cinfo->client_data); }

void SetMessage(JpegJob* job, const char* text) {
  std::snprintf(job->message, sizeof(job->message), "%s", text);
}

// libjpeg's fatal errors: keep the message, leave through the longjmp.
void ErrorExit(j_common_ptr cinfo) {
  JpegJob* job = JobOf(cinfo);
  char text[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, text);
  SetMessage(job, text);
  std::longjmp(job->jump, 1);
}

// Warnings are ignored, as Pillow ignores them (its error manager replaces
// error_exit and output_message only): libjpeg decodes around corrupt
// entropy data, extraneous bytes and bogus progressions. A truncation is
// not a warning here; the source below makes it an error.
void EmitMessage(j_common_ptr, int) {}

void OutputMessage(j_common_ptr) {}

// The source: all the data at once. libjpeg asks for more only when it has
// used every byte; jpeg_mem_src would then warn and pretend an end-of-image
// marker, and decode the missing rows as grey. Pillow's suspending source
// instead gets nothing more from a file at its end and raises "image file
// is truncated", unless every row was already decoded: then its
// jpeg_finish_decompress suspends, wherever it was in the markers after
// the scan, and Pillow takes the image as it is.
void InitSource(j_decompress_ptr) {}
void TermSource(j_decompress_ptr) {}

// The frame headers libjpeg reads (SOF0-2, SOF9-10); it refuses the others
// on sight.
bool IsFrameMarker(int marker) {
  return marker == 0xC0 || marker == 0xC1 || marker == 0xC2 || marker == 0xC9 || marker == 0xCA;
}

boolean FillInput(j_decompress_ptr cinfo) {
  JpegJob* job = JobOf(reinterpret_cast<j_common_ptr>(cinfo));
  if (job->finishing && IsFrameMarker(cinfo->unread_marker)) {
    // libjpeg-turbo 3 (which Pillow's wheels carry) refuses a second frame
    // header as soon as it reads the marker; 2.1 only after its length, so
    // at the end of the data it would take the image.
    SetMessage(job, "Invalid JPEG file structure: two SOF markers");
  } else if (job->finishing) {
    job->ended_after_last_row = true;
  } else {
    SetMessage(job, "Premature end of JPEG file (truncated)");
  }
  std::longjmp(job->jump, 1);
}

void SkipInput(j_decompress_ptr cinfo, long count) {
  jpeg_source_mgr* src = cinfo->src;
  if (count <= 0) return;
  if (static_cast<unsigned long>(count) <= src->bytes_in_buffer) {
    src->next_input_byte += count;
    src->bytes_in_buffer -= static_cast<size_t>(count);
    return;
  }
  src->bytes_in_buffer = 0;
  FillInput(cinfo);
}

// Every scan of a progressive JPEG walks the whole image: a few hundred
// bytes of empty scans could otherwise keep the decoder busy for minutes.
void Progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > static_cast<int>(kMaxJpegScans)) {
    JpegJob* job = JobOf(cinfo);
    std::snprintf(job->message, sizeof(job->message), "more than %u scans (the limit)", kMaxJpegScans);
    std::longjmp(job->jump, 1);
  }
}

// After the rows asked for: decodes the rows below (entropy decoding only,
// without the inverse DCT) and reads the markers after the scan, as
// Pillow's jpeg_finish_decompress does. Skipping to the very end would only
// mark the input done without reading it, so the last row is read. Runs
// under RunJob's setjmp, with the same rules.
bool ReadToEnd(JpegJob* job, JSAMPARRAY row) {
  j_decompress_ptr cinfo = &job->cinfo;
  const JDIMENSION last = cinfo->output_height - 1;
  if (cinfo->output_scanline < last) {
    const JDIMENSION skip = last - cinfo->output_scanline;
    if (jpeg_skip_scanlines(cinfo, skip) != skip) {
      SetMessage(job, "could not skip to the last row");
      return false;
    }
  }
  while (cinfo->output_scanline < cinfo->output_height) {
    if (jpeg_read_scanlines(cinfo, row, 1) != 1) {
      SetMessage(job, "libjpeg returned no row");
      return false;
    }
  }
  job->finishing = true;
  jpeg_finish_decompress(cinfo);
  return true;
}

// The only function that calls into libjpeg. Between setjmp and the last
// libjpeg call no C++ object with a destructor lives in this frame, and no
// local is read after a longjmp. Returns false with job->message set.
bool RunJob(JpegJob* job) {
  if (setjmp(job->jump)) return job->ended_after_last_row;
  j_decompress_ptr cinfo = &job->cinfo;
  jpeg_create_decompress(cinfo);
  cinfo->client_data = job;
  cinfo->progress = &job->progress;
  cinfo->mem->max_memory_to_use = static_cast<long>(kMaxJpegDecoderBytes);
  cinfo->src = &job->source;
  job->source.next_input_byte = job->data;
  job->source.bytes_in_buffer = job->size;
  job->source.init_source = InitSource;
  job->source.fill_input_buffer = FillInput;
  job->source.skip_input_data = SkipInput;
  job->source.resync_to_restart = jpeg_resync_to_restart;
  job->source.term_source = TermSource;
  jpeg_read_header(cinfo, TRUE);
  const JpegHeader& h = *job->header;
  if (cinfo->image_width != h.width || cinfo->image_height != h.height) {
    std::snprintf(job->message, sizeof(job->message),
                  "libjpeg reads a %ux%u frame where the first frame header says %ux%u", cinfo->image_width,
                  cinfo->image_height, h.width, h.height);
    return false;
  }
  const bool cmyk = cinfo->num_components == 4;
  if (cinfo->num_components != 1 && cinfo->num_components != 3 && !cmyk) {
    SetMessage(job, "not 1, 3 or 4 components");
    return false;
  }
  // Pillow decodes 4-component JPEGs (CMYK, or YCCK that libjpeg turns into
  // CMYK) as Adobe's inverted CMYK; 1 and 3 components as L and RGB.
  const bool gray = job->request->gray && !cmyk;
  cinfo->out_color_space = cmyk ? JCS_CMYK : gray ? JCS_GRAYSCALE : JCS_EXT_RGBX;
  cinfo->dct_method = JDCT_ISLOW;
  cinfo->do_fancy_upsampling = TRUE;
  cinfo->do_block_smoothing = TRUE;
  cinfo->scale_num = job->request->scale_num;
  cinfo->scale_denom = 8;
  jpeg_calc_output_dimensions(cinfo);
  const JpegRegionRequest& r = *job->request;
  if (cinfo->output_width != JpegScaledSize(h.width, r.scale_num) ||
      cinfo->output_height != JpegScaledSize(h.height, r.scale_num) || r.x_begin >= r.x_end ||
      r.x_end > cinfo->output_width || r.y_begin >= r.y_end || r.y_end > cinfo->output_height) {
    job->bad_request = true;
    std::snprintf(job->message, sizeof(job->message),
                  "region [%u, %u) x [%u, %u) is not inside the %ux%u image scaled by %u/8", r.x_begin, r.x_end,
                  r.y_begin, r.y_end, cinfo->output_width, cinfo->output_height, r.scale_num);
    return false;
  }
  jpeg_start_decompress(cinfo);
  const JpegPixels format = cmyk ? JpegPixels::kCmykInverted : gray ? JpegPixels::kGray : JpegPixels::kRgbx;
  if (cinfo->output_components != static_cast<int>(JpegPixelBytes(format))) {
    SetMessage(job, "libjpeg gives another number of bytes a pixel than asked");
    return false;
  }
  // One pixel of margin on the left, where jpeg_crop_scanline's iMCU
  // boundary makes the fancy upsampler treat the region's edge as the
  // image's, and one chroma sample's worth on the right.
  const JDIMENSION margin = static_cast<JDIMENSION>(2 * cinfo->max_h_samp_factor);
  JDIMENSION x0 = r.x_begin > 0 ? r.x_begin - 1 : 0;
  JDIMENSION end = r.x_end + margin < cinfo->output_width ? r.x_end + margin : cinfo->output_width;
  JDIMENSION width = end - x0;
  jpeg_crop_scanline(cinfo, &x0, &width);
  if (r.y_begin > 0 && jpeg_skip_scanlines(cinfo, r.y_begin) != r.y_begin) {
    SetMessage(job, "could not skip to the first row");
    return false;
  }
  if (!job->sink->Begin(x0, width, format)) {
    job->sink_refused = true;
    return false;
  }
  // The row starts 4 bytes past a 16-byte boundary on purpose: into an
  // aligned row, libjpeg-turbo's SIMD colour conversion stores with
  // non-temporal stores (movntdq), which leave the row out of the cache
  // just before the sink reads it; unaligned, it stores normally. Measured
  // on 350-500 px photographs: the sink's first read of each row took
  // 85% of its conversion's samples, ~150 us an image.
  JSAMPARRAY rows = (*cinfo->mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(cinfo), JPOOL_IMAGE,
                                                width * 4 + 16, 1);
  JSAMPROW row[1] = {rows[0] + (20 - reinterpret_cast<uintptr_t>(rows[0]) % 16) % 16};
  for (JDIMENSION y = r.y_begin; y < r.y_end; ++y) {
    if (jpeg_read_scanlines(cinfo, row, 1) != 1) {
      SetMessage(job, "libjpeg returned no row");
      return false;
    }
    job->sink->Row(row[0]);
  }
  // A single-scan JPEG read down to the box only. Between here and the
  // next marker that is not a restart lies only entropy-coded data, where
  // libjpeg finds nothing worse than warnings; if that marker is the end of
  // the image, Pillow, decoding on, would take the image. Anything else
  // (no marker: the data was cut; another marker, which random bytes in the
  // scan make) is decided by decoding the rest, as Pillow does. Where the
  // box's last row ends a restart interval, libjpeg has usually read that
  // interval's RST marker already (unread_marker): the search goes on after it.
  if (!r.read_to_end && !jpeg_input_complete(cinfo)) {
    const int unread = cinfo->unread_marker;
    const bool restart = unread >= JPEG_RST0 && unread <= JPEG_RST0 + 7;
    const int marker = unread != 0 && !restart
                           ? unread
                           : NextMarker(cinfo->src->next_input_byte, cinfo->src->bytes_in_buffer);
    if (marker == JPEG_EOI) return true;
  }
  if (r.read_to_end || !jpeg_input_complete(cinfo)) return ReadToEnd(job, row);
  // jpeg_destroy_decompress in the caller releases everything.
  return true;
}

}  // namespace

int NextMarker(const uint8_t* p, size_t n) {
  const uint8_t* end = p + n;
  while (p < end) {
    const void* ff = std::memchr(p, 0xFF, static_cast<size_t>(end - p));
    if (ff == nullptr) return 0;
    p = static_cast<const uint8_t*>(ff);
    while (p < end && *p == 0xFF) ++p;
    if (p == end) return 0;
    if (*p != 0 && (*p < 0xD0 || *p > 0xD7)) return *p;
    ++p;
  }
  return 0;
}

Status DecodeJpegRegion(std::string_view jpeg, const JpegHeader& header, const JpegRegionRequest& request,
                        RowSink* sink, bool* sink_refused) {
  *sink_refused = false;
  if (!header.decodable) return Status::DecodeError("JPEG: a variant libjpeg-turbo does not decode");
  if (request.scale_num < 1 || request.scale_num > 8) {
    return Status::InvalidArgument("JPEG: scale " + std::to_string(request.scale_num) + "/8 is not 1/8 to 8/8");
  }
  JpegJob job;
  std::memset(&job, 0, sizeof(job));
  job.cinfo.err = jpeg_std_error(&job.err);
  job.err.error_exit = ErrorExit;
  job.err.emit_message = EmitMessage;
  job.err.output_message = OutputMessage;
  job.progress.progress_monitor = Progress;
  job.data = reinterpret_cast<const unsigned char*>(jpeg.data());
  job.size = static_cast<unsigned long>(jpeg.size());
  job.header = &header;
  job.request = &request;
  job.sink = sink;
  const bool ok = RunJob(&job);
  // Safe after any failure: create zeroes the struct first, and destroy
  // does nothing when the memory manager never came up.
  jpeg_destroy_decompress(&job.cinfo);
  if (ok) return Status::OK();
  if (job.sink_refused) {
    *sink_refused = true;
    return Status::OK();
  }
  if (job.bad_request) return Status::InvalidArgument(std::string("JPEG: ") + job.message);
  return Status::DecodeError(std::string("JPEG: ") + job.message);
}

}  // namespace lmdbloader
