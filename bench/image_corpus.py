"""Generated image and clip corpora for bench/image_bench.py: photographs, as
files, as an lmdbloader corpus and as the LMDB file a py-lmdb user writes.

Every image is made from one of scikit-image's bundled photographs (its class)
by a random crop, rescale and flip, then sharpened and given sensor grain so
that at quality 90 a JPEG of 350-500 px on its long side weighs about what a
camera photograph of that size does (~88 KB; the smooth sources would give
~40 KB without). Everything is drawn from (seed, index): the same arguments
write the same bytes, and a corpus already written with them is reused.

    python bench/image_corpus.py WORKDIR [--images 2048] [--clips 1024] [--videos 384]

Under WORKDIR/images-N (N JPEGs in 8 classes):
  folder/class_k/img_NNNNN.jpg   the image folder (also DALI's folder of files)
  corpus/                        `lmdbloader convert --from image_folder`: {image, label, name}
  pylmdb/                        py-lmdb: b"%08d" -> pickle.dumps((jpeg bytes, label)), b"__len__"
Under WORKDIR/lines-N (N word crops as MJSynth's: a word of 3-12 letters in a drawn colour
over a crop of a photograph, 32 px high, 50-250 wide; 2-6 KB each), the same three forms.
Under WORKDIR/clips-N (N clips of 8 frames 320x240, a moving crop of one photograph):
  folder/class_k/video_NNNNN/frame_0000F.jpg   the video folder
  corpus/                        `lmdbloader convert --from video_folder`: {frames, label, name}
  pylmdb/                        b"%08d" -> pickle.dumps(([jpeg bytes, ...], label)), b"__len__"
  streams/video_NNNNN            links to the frame folders, one level deep (DALI's sequence reader)
Under WORKDIR/coclr-N (N videos of 32-48 frames 128x171, H x W), as CoCLR's
convert_video_to_lmdb.py writes UCF101 and its dataset code reads it:
  ucf101_frame.lmdb             one file (subdir=False): b"%09d" -> msgpack.dumps([jpeg, ...]) per
                                video, and msgpack records __keys__, __len__, __order__ (the
                                shuffled video names "class/video", whose position is the key),
                                __vlen__
  ucf101_frame.lmdb-order       the order, one name a line
  ClassInd.txt, train_split01.csv, test_split01.csv   the classes; "frame/class/video/,frames" a line
"""

import argparse
import functools
import io
import json
import os
import pickle
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

# scikit-image's bundled colour photographs, one class each (none needs a download).
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry",
          "retina", "stereo_motorcycle")
QUALITY = 90
FRAMES, FRAME_W, FRAME_H = 8, 320, 240
# CoCLR's layout (TengdaHan/CoCLR, dataset/convert_video_to_lmdb.py and lmdb_dataset.py): frames
# of 128x171 (H x W), as UCF101's frames are extracted for it, 32-48 a video (two 16-frame clips).
COCLR_W, COCLR_H, COCLR_FRAMES = 171, 128, (32, 48)
COCLR_TEST_EVERY = 6  # one video in 6 goes to the test split
VERSION = 1  # bump when what is generated changes: cached corpora are then written again
_GRAIN = 12.0  # sensor grain, in 8-bit levels: luminance and each channel

_sources = None
_grain = None


def _photos():
    """The source photographs as PIL RGB images (loaded once per process)."""
    global _sources
    if _sources is None:
        import skimage.data
        from PIL import Image
        out = []
        for name in PHOTOS:
            a = getattr(skimage.data, name)()
            a = a[0] if isinstance(a, tuple) else a  # stereo_motorcycle: (left, right, disparity)
            out.append(Image.fromarray(np.ascontiguousarray(a[..., :3])))
        _sources = out
    return _sources


def _grain_tile():
    """A fixed tile of grain: each image takes a window of it at a drawn offset
    (drawing fresh normals for every image would cost more than the rest)."""
    global _grain
    if _grain is None:
        rng = np.random.default_rng(12345)
        size = 1024
        _grain = (rng.standard_normal((size, size, 1), dtype=np.float32) * _GRAIN +
                  rng.standard_normal((size, size, 3), dtype=np.float32) * _GRAIN)
    return _grain


def _finish(img, rng):
    """Sharpened, with grain, as JPEG bytes at QUALITY (4:2:0, PIL's default)."""
    from PIL import Image, ImageFilter
    img = img.filter(ImageFilter.UnsharpMask(radius=2, percent=200, threshold=0))
    w, h = img.size
    tile = _grain_tile()
    y, x = (int(v) for v in rng.integers(0, [tile.shape[0] - h + 1, tile.shape[1] - w + 1]))
    pixels = np.asarray(img, dtype=np.float32) + tile[y:y + h, x:x + w]
    img = Image.fromarray(np.clip(pixels + 0.5, 0, 255).astype(np.uint8))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=QUALITY)
    return buf.getvalue()


def photo_jpeg(index, seed=0):
    """(JPEG bytes, class) of image ``index``: a crop of 40-100% of a source
    photograph's area (aspect kept), rescaled to 350-500 px on its long side,
    flipped half the time."""
    from PIL import Image
    rng = np.random.default_rng([seed, 1, index])
    label = index % len(PHOTOS)
    src = _photos()[label]
    w, h = src.size
    side = np.sqrt(rng.uniform(0.4, 1.0))
    cw, ch = max(16, int(w * side)), max(16, int(h * side))
    x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
    img = src.crop((x, y, x + cw, y + ch))
    scale = int(rng.integers(350, 501)) / max(cw, ch)
    img = img.resize((max(1, round(cw * scale)), max(1, round(ch * scale))), Image.BICUBIC)
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    return _finish(img, rng), label


def clip_jpegs(index, seed=0, frames=FRAMES, width=FRAME_W, height=FRAME_H, stream=2):
    """([``frames`` JPEG bytes], class) of clip ``index``: a ``width`` x
    ``height`` window (0.7-1.5x that size in the source, as it fits)
    panning across a photograph at a drawn speed, flipped half the time.
    ``stream`` keeps the draws of different corpora apart."""
    from PIL import Image
    rng = np.random.default_rng([seed, stream, index])
    label = index % len(PHOTOS)
    src = _photos()[label]
    w, h = src.size
    fit = min(w / width, h / height)
    scale = rng.uniform(0.7, max(0.7, min(1.5, fit * 0.9)))
    ww, wh = width * scale, height * scale
    if ww > w or wh > h:
        ww, wh = width * fit, height * fit
    x0, y0 = rng.uniform(0, w - ww), rng.uniform(0, h - wh)
    x1, y1 = rng.uniform(0, w - ww), rng.uniform(0, h - wh)
    x1, y1 = x0 + (x1 - x0) * rng.uniform(0.1, 0.4), y0 + (y1 - y0) * rng.uniform(0.1, 0.4)
    flip = rng.random() < 0.5
    out = []
    for f in range(frames):
        t = f / (frames - 1)
        x, y = x0 + (x1 - x0) * t, y0 + (y1 - y0) * t
        img = src.resize((width, height), Image.BICUBIC, box=(x, y, x + ww, y + wh))
        if flip:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        out.append(_finish(img, rng))
    return out, label


def line_jpeg(index, seed=0):
    """(JPEG bytes, class) of text line ``index``: a word rendered over a
    crop of a source photograph, scaled to 32 px high, as synthetic OCR
    corpora (MJSynth) store their word images."""
    from PIL import Image, ImageDraw, ImageFont
    rng = np.random.default_rng([seed, 5, index])
    label = index % len(PHOTOS)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    word = "".join(letters[int(i)] for i in rng.integers(0, len(letters), int(rng.integers(3, 13))))
    font = ImageFont.load_default(size=int(rng.integers(22, 40)))
    left, top, right, bottom = font.getbbox(word)
    pad = int(rng.integers(2, 10))
    w, h = right - left + 2 * pad, bottom - top + 2 * pad
    src = _photos()[label]
    x, y = int(rng.integers(0, src.size[0] - w)), int(rng.integers(0, src.size[1] - h))
    img = src.crop((x, y, x + w, y + h))
    ink = tuple(int(v) for v in rng.integers(0, 256, 3))
    ImageDraw.Draw(img).text((pad - left, pad - top), word, font=font, fill=ink)
    img = img.resize((max(8, round(w * 32 / h)), 32), Image.BICUBIC)
    return _finish(img, rng), label


def _write_images(make, args):
    """Images [start, stop) as ``make(index, seed)`` draws them, each into its class's folder."""
    folder, start, stop, seed = args
    total = 0
    for i in range(start, stop):
        jpeg, label = make(i, seed)
        with open(os.path.join(folder, f"class_{label}", f"img_{i:05d}.jpg"), "wb") as f:
            f.write(jpeg)
        total += len(jpeg)
    return total


def _make_clips(args):
    folder, start, stop, seed = args
    total = 0
    for i in range(start, stop):
        frames, label = clip_jpegs(i, seed)
        d = os.path.join(folder, f"class_{label}", f"video_{i:05d}")
        os.makedirs(d, exist_ok=True)
        for f, jpeg in enumerate(frames):
            with open(os.path.join(d, f"frame_{f + 1:05d}.jpg"), "wb") as out:
                out.write(jpeg)
            total += len(jpeg)
    return total


def _generate(fn, folder, n, seed, jobs):
    """fn over [0, n) in chunks on ``jobs`` processes; the bytes written."""
    chunk = max(1, min(64, n // (4 * jobs) or 1))
    work = [(folder, s, min(n, s + chunk), seed) for s in range(0, n, chunk)]
    if jobs <= 1:
        return sum(map(fn, work))
    import multiprocessing
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        return sum(pool.map(fn, work))


def _write_pylmdb(path, items):
    """What a py-lmdb user writes: one key per sample, its value a pickle of
    (payload, label); the count under b"__len__"."""
    import lmdb
    n = 0
    with lmdb.open(path, map_size=64 << 30, subdir=True, meminit=False, map_async=True) as env:
        txn = env.begin(write=True)
        for n, (payload, label) in enumerate(items, 1):
            txn.put(f"{n - 1:08d}".encode(), pickle.dumps((payload, label), protocol=pickle.HIGHEST_PROTOCOL))
            if n % 512 == 0:
                txn.commit()
                txn = env.begin(write=True)
        txn.put(b"__len__", str(n).encode())
        txn.commit()
        env.sync(True)


def _read_file(path):
    with open(path, "rb") as f:
        return f.read()


def _cached(root, stamp):
    """True when root holds a complete corpus written with ``stamp``."""
    try:
        with open(os.path.join(root, "stamp.json")) as f:
            return json.load(f)["stamp"] == stamp
    except (OSError, ValueError, KeyError):
        return False


def _finish_stamp(root, stamp, info):
    with open(os.path.join(root, "stamp.json"), "w") as f:
        json.dump({"stamp": stamp, **info}, f, indent=1)


def _info(root):
    with open(os.path.join(root, "stamp.json")) as f:
        return json.load(f)


def _fresh_class_folders(root):
    """Empties `root` and makes root/folder/class_k for every photograph."""
    shutil.rmtree(root, ignore_errors=True)
    folder = os.path.join(root, "folder")
    for k in range(len(PHOTOS)):
        os.makedirs(os.path.join(folder, f"class_{k}"))
    return folder


def images(workdir, n=2048, seed=0, jobs=2, log=print, kind="images"):
    """The image corpora (see the module's docstring), written unless cached;
    returns dict(root, folder, corpus, pylmdb, count, mean_bytes, ...).
    ``kind``: "images" (photographs) or "lines" (word crops)."""
    import lmdbloader
    root = os.path.join(os.path.abspath(workdir), f"{kind}-{n}")
    stamp = {"version": VERSION, "n": n, "seed": seed, "photos": list(PHOTOS), "quality": QUALITY}
    if not _cached(root, stamp):
        t = time.perf_counter()
        log(f"generating {n} JPEG {'photographs' if kind == 'images' else 'text lines'} under {root} ...")
        folder = _fresh_class_folders(root)
        make = photo_jpeg if kind == "images" else line_jpeg
        total = _generate(functools.partial(_write_images, make), folder, n, seed, jobs)
        summary = lmdbloader.convert(folder, os.path.join(root, "corpus"), kind="image_folder")
        _write_pylmdb(os.path.join(root, "pylmdb"),
                      ((_read_file(os.path.join(folder, f"class_{i % len(PHOTOS)}", f"img_{i:05d}.jpg")),
                        i % len(PHOTOS)) for i in range(n)))
        _finish_stamp(root, stamp, {"count": n, "mean_bytes": total / n, "corpus_bytes": summary["bytes"],
                                    "seconds": time.perf_counter() - t})
        log(f"  {n} images, {total / n / 1000:.1f} KB on average, in {time.perf_counter() - t:.0f} s")
    info = _info(root)
    return {"root": root, "folder": os.path.join(root, "folder"), "corpus": os.path.join(root, "corpus"),
            "pylmdb": os.path.join(root, "pylmdb"), **info}


def clips(workdir, n=1024, seed=0, jobs=2, log=print):
    """The clip corpora (see the module's docstring), written unless cached;
    returns dict(root, folder, corpus, pylmdb, streams, count, mean_bytes, ...)."""
    import lmdbloader
    root = os.path.join(os.path.abspath(workdir), f"clips-{n}")
    stamp = {"version": VERSION, "n": n, "seed": seed, "photos": list(PHOTOS), "quality": QUALITY,
             "frames": FRAMES, "size": [FRAME_W, FRAME_H]}
    if not _cached(root, stamp):
        t = time.perf_counter()
        log(f"generating {n} clips of {FRAMES} frames {FRAME_W}x{FRAME_H} under {root} ...")
        folder = _fresh_class_folders(root)
        total = _generate(_make_clips, folder, n, seed, jobs)
        videos = [(os.path.join(folder, f"class_{i % len(PHOTOS)}", f"video_{i:05d}"), i % len(PHOTOS))
                  for i in range(n)]
        summary = lmdbloader.convert(folder, os.path.join(root, "corpus"), kind="video_folder")
        _write_pylmdb(os.path.join(root, "pylmdb"),
                      (([_read_file(os.path.join(d, f"frame_{f + 1:05d}.jpg")) for f in range(FRAMES)], label)
                       for d, label in videos))
        streams = os.path.join(root, "streams")
        os.makedirs(streams)
        for d, _ in videos:
            os.symlink(os.path.relpath(d, streams), os.path.join(streams, os.path.basename(d)))
        _finish_stamp(root, stamp, {"count": n, "mean_bytes": total / n, "corpus_bytes": summary["bytes"],
                                    "seconds": time.perf_counter() - t})
        log(f"  {n} clips, {total / n / FRAMES / 1000:.0f} KB a frame on average, in "
            f"{time.perf_counter() - t:.0f} s")
    info = _info(root)
    return {"root": root, "folder": os.path.join(root, "folder"), "corpus": os.path.join(root, "corpus"),
            "pylmdb": os.path.join(root, "pylmdb"), "streams": os.path.join(root, "streams"), **info}


def _make_coclr(args):
    """(index, frames, class) of the videos in [start, stop)."""
    start, stop, seed = args
    out = []
    for i in range(start, stop):
        count = int(np.random.default_rng([seed, 4, i]).integers(COCLR_FRAMES[0], COCLR_FRAMES[1] + 1))
        frames, label = clip_jpegs(i, seed, frames=count, width=COCLR_W, height=COCLR_H, stream=3)
        out.append((i, frames, label))
    return out


def coclr_video(i):
    """The name CoCLR's layout gives video ``i``: "class/video"."""
    label = i % len(PHOTOS)
    return f"{PHOTOS[label]}/v_{PHOTOS[label]}_{i:05d}"


def coclr(workdir, n=384, seed=0, jobs=2, log=print):
    """The CoCLR-layout corpus (see the module's docstring), written unless
    cached; returns dict(root, lmdb, classes, train_csv, test_csv, count,
    train, mean_bytes, ...)."""
    import lmdb
    import msgpack
    root = os.path.join(os.path.abspath(workdir), f"coclr-{n}")
    stamp = {"version": VERSION, "n": n, "seed": seed, "photos": list(PHOTOS), "quality": QUALITY,
             "frames": list(COCLR_FRAMES), "size": [COCLR_W, COCLR_H], "test_every": COCLR_TEST_EVERY}
    path = os.path.join(root, "ucf101_frame.lmdb")
    if not _cached(root, stamp):
        t = time.perf_counter()
        log(f"generating {n} videos of {COCLR_FRAMES[0]}-{COCLR_FRAMES[1]} frames {COCLR_H}x{COCLR_W} (H x W) "
            f"in CoCLR's layout under {root} ...")
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        # As convert_video_to_lmdb.py: the video names shuffled once, a video's key is its
        # position in that order as 9 ASCII digits; values written class by class.
        names = [coclr_video(i) for i in range(n)]
        order = list(names)
        np.random.default_rng([seed, 5]).shuffle(order)
        video_id = {name: k for k, name in enumerate(order)}
        chunk = max(1, min(16, n // (4 * max(1, jobs)) or 1))
        work = [(s, min(n, s + chunk), seed) for s in range(0, n, chunk)]
        if jobs <= 1:
            results = map(_make_coclr, work)
        else:
            import multiprocessing
            pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"))
            results = pool.map(_make_coclr, work)
        total = frames_total = 0
        vlen = {}
        with lmdb.open(path, subdir=False, map_size=64 << 30, meminit=False, map_async=True) as env:
            for part in results:
                with env.begin(write=True) as txn:
                    for i, frames, _ in part:
                        txn.put(b"%09d" % video_id[names[i]], msgpack.dumps(frames))
                        vlen[i] = len(frames)
                        total += sum(map(len, frames))
                        frames_total += len(frames)
            if jobs > 1:
                pool.shutdown()
            by_class = sorted(range(n), key=lambda i: (i % len(PHOTOS), names[i]))
            with env.begin(write=True) as txn:
                txn.put(b"__keys__", msgpack.dumps([b"%09d" % video_id[names[i]] for i in by_class]))
                txn.put(b"__len__", msgpack.dumps(n))
                txn.put(b"__order__", msgpack.dumps(order))
                txn.put(b"__vlen__", msgpack.dumps([vlen[i] for i in by_class]))
            env.sync(True)
        with open(path + "-order", "w") as f:
            f.write("\n".join(order))
        with open(os.path.join(root, "ClassInd.txt"), "w") as f:
            f.write("".join(f"{name}\n" for name in PHOTOS))
        for split, keep in (("train", lambda i: i % COCLR_TEST_EVERY != COCLR_TEST_EVERY - 1),
                            ("test", lambda i: i % COCLR_TEST_EVERY == COCLR_TEST_EVERY - 1)):
            with open(os.path.join(root, f"{split}_split01.csv"), "w") as f:
                f.writelines(f"frame/{names[i]}/,{vlen[i]}\n" for i in by_class if keep(i))
        train = sum(1 for i in range(n) if i % COCLR_TEST_EVERY != COCLR_TEST_EVERY - 1)
        _finish_stamp(root, stamp, {"count": n, "train": train, "frames": frames_total,
                                    "mean_bytes": total / n, "frame_bytes": total / frames_total,
                                    "corpus_bytes": os.path.getsize(path), "seconds": time.perf_counter() - t})
        log(f"  {n} videos ({train} in the train split), {frames_total / n:.1f} frames a video, "
            f"{total / frames_total / 1000:.1f} KB a frame on average, in {time.perf_counter() - t:.0f} s")
    info = _info(root)
    return {"root": root, "lmdb": path, "classes": os.path.join(root, "ClassInd.txt"),
            "train_csv": os.path.join(root, "train_split01.csv"), "test_csv": os.path.join(root, "test_split01.csv"),
            **info}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workdir")
    p.add_argument("--images", type=int, default=2048)
    p.add_argument("--clips", type=int, default=1024)
    p.add_argument("--videos", type=int, default=0, help="videos of the CoCLR-layout corpus (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = p.parse_args()
    if args.images < 1 or args.clips < 0:
        p.error("--images must be at least 1 and --clips at least 0")
    print(json.dumps(images(args.workdir, args.images, args.seed, args.jobs), indent=1))
    if args.clips:
        print(json.dumps(clips(args.workdir, args.clips, args.seed, args.jobs), indent=1))
    if args.videos:
        print(json.dumps(coclr(args.workdir, args.videos, args.seed, args.jobs), indent=1))


if __name__ == "__main__":
    sys.exit(main())
