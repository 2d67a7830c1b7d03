#include "image/jpeg_decoder.h"

// jpeglib.h needs size_t and FILE declared first.
#include <csetjmp>
#include <cstddef>
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
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 96];
  // Inputs.
  const unsigned char* data;
  unsigned long size;
  const JpegHeader* header;
  const JpegRegionRequest* request;
  RowSink* sink;
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

// Warnings are ignored as Pillow ignores them (corrupt data it can decode
// around), except the end of the data before the rows asked for: jpeg_mem_src
// then pads with an EOI marker and warns JWRN_JPEG_EOF, where Pillow raises
// "image file is truncated".
void EmitMessage(j_common_ptr cinfo, int level) {
  if (level >= 0 || cinfo->err->msg_code != JWRN_JPEG_EOF) return;
  JpegJob* job = JobOf(cinfo);
  SetMessage(job, "Premature end of JPEG file (truncated)");
  std::longjmp(job->jump, 1);
}

void OutputMessage(j_common_ptr) {}

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

// The only function that calls into libjpeg. Between setjmp and the last
// libjpeg call no C++ object with a destructor lives in this frame, and no
// local is read after a longjmp. Returns false with job->message set.
bool RunJob(JpegJob* job) {
  if (setjmp(job->jump)) return false;
  j_decompress_ptr cinfo = &job->cinfo;
  jpeg_create_decompress(cinfo);
  cinfo->client_data = job;
  cinfo->progress = &job->progress;
  cinfo->mem->max_memory_to_use = static_cast<long>(kMaxJpegDecoderBytes);
  jpeg_mem_src(cinfo, job->data, job->size);
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
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_EXT_RGBX;
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
  if (cinfo->output_components != 4) {
    SetMessage(job, "libjpeg gives other than 4 bytes a pixel");
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
  if (!job->sink->Begin(x0, width, cmyk ? JpegPixels::kCmykInverted : JpegPixels::kRgbx)) {
    job->sink_refused = true;
    return false;
  }
  JSAMPARRAY row = (*cinfo->mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(cinfo), JPOOL_IMAGE,
                                               width * 4, 1);
  for (JDIMENSION y = r.y_begin; y < r.y_end; ++y) {
    if (jpeg_read_scanlines(cinfo, row, 1) != 1) {
      SetMessage(job, "libjpeg returned no row");
      return false;
    }
    job->sink->Row(row[0]);
  }
  // The rest of the data is not read: jpeg_destroy_decompress in the caller
  // releases everything without looking at it.
  return true;
}

}  // namespace

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
