"""Conversion throughput against `cat` reading the same files, side by side.

Generates about 1 GiB of files (an image folder, and video frame folders),
reads them once so the page cache is warm, then alternates `cat` of every file
into /dev/null, `cat` of every file into one synced file (the floor for any
tool that writes what it reads) and `lmdbloader convert` of the folder,
`--repeats` times each. Prints MB/s and the median ratios; writes JSON.

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


def time_cat_to_file(files, output):
    """The floor for any converter: read every byte and write it to one file, synced."""
    start = time.perf_counter()
    with open(output, "wb") as out:
        subprocess.run(["xargs", "-0", "cat"], input="\0".join(files).encode(), stdout=out, check=True)
        os.fsync(out.fileno())
    seconds = time.perf_counter() - start
    os.unlink(output)
    return seconds


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
    if args.repeats < 1 or args.mib < 1:
        p.error("--repeats and --mib must be at least 1")
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
            cat_s, cat_file_s, convert_s = [], [], []
            for _ in range(args.repeats):
                cat_s.append(time_cat(files))
                cat_file_s.append(time_cat_to_file(files, os.path.join(tmp, "concatenated")))
                seconds, summary = time_convert(args.cli, kind, source, os.path.join(tmp, "corpus"))
                convert_s.append(seconds)
            ratio = statistics.median(c / v for c, v in zip(cat_s, convert_s))
            ratio_file = statistics.median(c / v for c, v in zip(cat_file_s, convert_s))
            results[kind] = {"files": len(files), "bytes": total, "records": summary["records"],
                             "cat_seconds": cat_s, "cat_to_file_seconds": cat_file_s, "convert_seconds": convert_s,
                             "cat_mb_per_s": total / 1e6 / statistics.median(cat_s),
                             "cat_to_file_mb_per_s": total / 1e6 / statistics.median(cat_file_s),
                             "convert_mb_per_s": total / 1e6 / statistics.median(convert_s),
                             "ratio_convert_to_cat": ratio, "ratio_convert_to_cat_to_file": ratio_file}
            r = results[kind]
            print(f"{kind:13s} {len(files):6d} files {total / 1e9:.2f} GB: cat {r['cat_mb_per_s']:5.0f} MB/s, "
                  f"cat > file {r['cat_to_file_mb_per_s']:5.0f} MB/s, convert {r['convert_mb_per_s']:5.0f} MB/s; "
                  f"convert/cat {ratio:.2f}x, convert/(cat > file) {ratio_file:.2f}x (medians of {args.repeats})",
                  flush=True)
    with open(os.path.join(args.out, "convert_bench.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {args.out}/convert_bench.json")


if __name__ == "__main__":
    main()
