// DecodeCropJobs: a batch of crop jobs against the calls it stands for
// (DecodeJpegInto for a lone crop, DecodeJpegCrops for several of one
// source, ResampleRgbInto for pixels), the padded crop's frame, and the
// failing source's index.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "image_test_util.h"
#include "lmdbloader/image_decode.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::EncodeJpeg;
using testing::SyntheticPhoto;

CropJob Job(uint32_t source, CropBox box, uint32_t side, bool flip, void* frame) {
  CropJob job;
  job.source = source;
  job.box = box;
  job.spec.width = job.spec.height = side;
  job.spec.flip = flip;
  job.frame = frame;
  return job;
}

TEST(CropJobsTest, EachSourceIsWhatItsOwnCallGives) {
  const std::string a = EncodeJpeg(SyntheticPhoto(300, 200, 1)), b = EncodeJpeg(SyntheticPhoto(180, 240, 2));
  const testing::Pixels pixels = SyntheticPhoto(120, 90, 3);
  std::vector<CropSource> sources(3);
  sources[0].jpeg = a;
  sources[1].jpeg = b;
  sources[2].rgb = pixels.data.data();
  sources[2].width = 120;
  sources[2].height = 90;
  sources[2].row_stride = 120 * 3;
  const size_t frame = OutputSpec{}.bytes() / (224 * 224) * 32 * 32;
  std::vector<uint8_t> out(5 * frame, 0xAB);
  std::vector<CropJob> jobs = {Job(0, {10, 20, 250, 170}, 32, false, out.data()),
                               Job(1, {0, 0, 180, 240}, 32, true, out.data() + frame),
                               Job(1, {30, 40, 60, 50}, 32, false, out.data() + 2 * frame),
                               Job(2, {5, 5, 100, 80}, 32, true, out.data() + 3 * frame)};
  DecodeScratch scratch;
  size_t failed = 99;
  ASSERT_OK(DecodeCropJobs(sources.data(), sources.size(), jobs.data(), jobs.size(), &scratch, &failed));
  std::vector<uint8_t> alone(frame);
  ASSERT_OK(DecodeJpegInto(a, jobs[0].box, jobs[0].spec, &scratch, alone.data()));
  EXPECT_EQ(0, std::memcmp(alone.data(), out.data(), frame));
  std::vector<uint8_t> shared(2 * frame);
  SharedCrop crops[2] = {{jobs[1].box, jobs[1].spec, shared.data()}, {jobs[2].box, jobs[2].spec, shared.data() + frame}};
  ASSERT_OK(DecodeJpegCrops(b, crops, 2, &scratch));
  EXPECT_EQ(0, std::memcmp(shared.data(), out.data() + frame, 2 * frame));
  ASSERT_OK(ResampleRgbInto(pixels.data.data(), 120, 90, 360, jobs[3].box, jobs[3].spec, &scratch, alone.data()));
  EXPECT_EQ(0, std::memcmp(alone.data(), out.data() + 3 * frame, frame));
  for (size_t i = 4 * frame; i < out.size(); ++i) ASSERT_EQ(out[i], 0xAB) << "past the last job, byte " << i;
}

// CenterCrop's padding: the crop lands at (x, y), the frame's rest is the fill.
TEST(CropJobsTest, APaddedCropLandsInsideItsFilledFrame) {
  const std::string jpeg = EncodeJpeg(SyntheticPhoto(64, 40, 4));
  CropSource source;
  source.jpeg = jpeg;
  for (PixelLayout layout : {PixelLayout::kCHW, PixelLayout::kHWC}) {
    std::vector<float> out(3 * 30 * 20, 7.0f);
    CropJob job = Job(0, {0, 0, 64, 40}, 0, false, out.data());
    job.spec.width = 16;
    job.spec.height = 10;
    job.spec.layout = layout;
    job.frame_width = 20;
    job.frame_height = 30;
    job.x = 3;
    job.y = 11;
    job.fill[0] = -1.5f;
    job.fill[1] = -2.5f;
    job.fill[2] = -3.5f;
    DecodeScratch scratch;
    size_t failed = 0;
    ASSERT_OK(DecodeCropJobs(&source, 1, &job, 1, &scratch, &failed));
    std::vector<float> crop(3 * 16 * 10);
    ASSERT_OK(DecodeJpegInto(jpeg, job.box, job.spec, &scratch, crop.data()));
    for (uint32_t c = 0; c < 3; ++c) {
      for (uint32_t y = 0; y < 30; ++y) {
        for (uint32_t x = 0; x < 20; ++x) {
          const bool inside = x >= 3 && x < 19 && y >= 11 && y < 21;
          const float want = !inside ? job.fill[c]
                             : layout == PixelLayout::kCHW ? crop[(c * 10 + y - 11) * 16 + x - 3]
                                                           : crop[((y - 11) * 16 + x - 3) * 3 + c];
          const float got = layout == PixelLayout::kCHW ? out[(c * 30 + y) * 20 + x] : out[(y * 20 + x) * 3 + c];
          ASSERT_EQ(got, want) << "channel " << c << " at (" << x << ", " << y << ")";
        }
      }
    }
  }
}

TEST(CropJobsTest, AFailingSourceIsNamedByItsIndex) {
  const std::string good = EncodeJpeg(SyntheticPhoto(50, 50, 5));
  const std::string cut = good.substr(0, good.size() / 2);
  std::vector<CropSource> sources(3);
  sources[0].jpeg = good;
  sources[1].jpeg = good;
  sources[2].jpeg = cut;
  std::vector<uint8_t> out(3 * OutputSpec{}.bytes() / (224 * 224) * 16 * 16);
  const size_t frame = out.size() / 3;
  std::vector<CropJob> jobs = {Job(0, {0, 0, 50, 50}, 16, false, out.data()),
                               Job(1, {0, 0, 50, 50}, 16, false, out.data() + frame),
                               Job(2, {0, 0, 50, 50}, 16, false, out.data() + 2 * frame)};
  DecodeScratch scratch;
  size_t failed = 0;
  Status s = DecodeCropJobs(sources.data(), 3, jobs.data(), 3, &scratch, &failed);
  EXPECT_EQ(failed, 2u);
  EXPECT_EQ(s.code(), Status::Code::kDecodeError) << s.ToString();
  EXPECT_NE(s.ToString().find("image 2 of 3: "), std::string::npos) << s.ToString();
  // Jobs of one source apart, or of a source out of range, are refused.
  const auto refused = [&](size_t count) {
    return DecodeCropJobs(sources.data(), 3, jobs.data(), count, &scratch, &failed).code() ==
           Status::Code::kInvalidArgument;
  };
  std::swap(jobs[0], jobs[1]);
  jobs[2].source = 0;
  EXPECT_TRUE(refused(3));
  jobs = {Job(3, {0, 0, 50, 50}, 16, false, out.data())};
  EXPECT_TRUE(refused(1));
  // A padded crop outside its frame.
  jobs = {Job(0, {0, 0, 50, 50}, 16, false, out.data())};
  jobs[0].frame_width = jobs[0].frame_height = 16;
  jobs[0].x = 1;
  EXPECT_TRUE(refused(1));
}

}  // namespace
}  // namespace lmdbloader
