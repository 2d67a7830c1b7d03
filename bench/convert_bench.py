"""Conversion throughput against `cat` reading the same files, side by side.

Generates about 1 GiB of files (an image folder, and video frame folders),
reads them once so the page cache is warm, then alternates `cat` of every file
into /dev/null and `lmdbloader convert` of the folder, `--repeats` times each.
Prints MB/s and the median ratio convert / cat; writes JSON. The converter
also builds and commits the LMDB (a durable write), which `cat` does not.

    python bench/convert_bench.py [--mib 1024] [--repeats 3] [--out bench/out]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
from conftest import frame_bytes, write_video_folders  # noqa: E402


def write_image_folder(root, total_bytes, classes=10):
    """root/class_k/img_i.jpg, sizes 50-150 KiB (mean 100 KiB)."""
    written, i = 0, 0
    while written < total_bytes:
        size = (50 + (i * 37) % 101) * 1024
        d = os.path.join(root, f"class_{i % classes}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"img_{i:06d}.jpg"), "wb") as f:
            f.write(frame_bytes(i, 0, size))
        written += size
        i += 1
    return written


def files_of(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)


def time_cat(files):
    start = time.perf_counter()
    # xargs batches the file names; cat reads every byte into /dev/null.
    subprocess.run(["xargs", "-0", "cat"], input="\0".join(files).encode(), stdout=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - start


def time_convert(cli, kind, source, output):
    if os.path.exists(output):
        shutil.rmtree(output)
    start = time.perf_counter()
    done = subprocess.run([cli, "convert", "--from", kind, source, output, "--json", "--no-progress"],
                          check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    return seconds, json.loads(done.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", type=int, default=1024, help="bytes of source files per kind")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cli", default=shutil.which("lmdbloader") or os.path.join(HERE, "..", "build", "lmdbloader"))
    p.add_argument("--out", default=os.path.join(HERE, "out"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = {}
    with tempfile.TemporaryDirectory(dir=args.out) as tmp:
        sources = {"image_folder": os.path.join(tmp, "images"), "video_folder": os.path.join(tmp, "videos")}
        write_image_folder(sources["image_folder"], args.mib << 20)
        frame, frames = 32 * 1024, 8
        write_video_folders(sources["video_folder"], (args.mib << 20) // (frame * frames), frames, frame)
        for kind, source in sources.items():
            files = files_of(source)
            total = sum(os.path.getsize(f) for f in files)
            time_cat(files)  # warm the page cache
            cat_s, convert_s = [], []
            for _ in range(args.repeats):
                cat_s.append(time_cat(files))
                seconds, summary = time_convert(args.cli, kind, source, os.path.join(tmp, "corpus"))
                convert_s.append(seconds)
            ratio = statistics.median(c / v for c, v in zip(cat_s, convert_s))
            results[kind] = {"files": len(files), "bytes": total, "records": summary["records"],
                             "cat_seconds": cat_s, "convert_seconds": convert_s,
                             "cat_mb_per_s": total / 1e6 / statistics.median(cat_s),
                             "convert_mb_per_s": total / 1e6 / statistics.median(convert_s),
                             "ratio_convert_to_cat": ratio}
            r = results[kind]
            print(f"{kind:13s} {len(files):6d} files {total / 1e9:.2f} GB: cat {r['cat_mb_per_s']:7.0f} MB/s, "
                  f"convert {r['convert_mb_per_s']:7.0f} MB/s, convert/cat {ratio:.2f}x (median of {args.repeats})",
                  flush=True)
    with open(os.path.join(args.out, "convert_bench.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {args.out}/convert_bench.json")


if __name__ == "__main__":
    main()
