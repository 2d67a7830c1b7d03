"""Two builds of lmdbloader compared on the fused image decode: the CPU time
per image of ``_core.decode_crops`` (crop boxes as RandomResizedCrop draws
them, 224x224 float32, IDCT scaling on and off) and, as a control that no
build changes, PIL's decode in the same process. CPU time (process_time), not
wall time, so that other work on the machine moves the figures less; each
interpreter runs in turn, ``--rounds`` times, and the ratio to the first
interpreter is taken round by round.

    python3 bench/image_photos.py /tmp/photos
    python3 bench/build_decode_bench.py /tmp/photos python3 /tmp/venv/bin/python

(the system's package built by ``pip install .`` against Debian's libjpeg,
against the wheel of scripts/wheel.sh installed in /tmp/venv).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import glob, io, json, os, sys, time
import numpy as np
from PIL import Image
import lmdbloader
from lmdbloader import _core
mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
jpegs = [open(p, "rb").read() for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.jpg")))]
rng = np.random.default_rng(0)
boxes, flips = [], []
for b in jpegs:
    w, h = Image.open(io.BytesIO(b)).size
    bw, bh = int(w * rng.uniform(0.3, 1)), int(h * rng.uniform(0.3, 1))
    boxes.append((int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1)), bw, bh))
    flips.append(bool(rng.integers(2)))
out = np.empty((len(jpegs), 3, 224, 224), np.float32)
jobs = [(i, box, flip, None, 0, i, None) for i, (box, flip) in enumerate(zip(boxes, flips))]
reps = int(sys.argv[2])
res = {"module": lmdbloader._core.__file__}
for scale in (True, False):
    _core.decode_crops(jpegs, jobs, [(out, 224, 224)], "CHW", "float32", mean, std, scale)
    t = time.process_time()
    for _ in range(reps):
        _core.decode_crops(jpegs, jobs, [(out, 224, 224)], "CHW", "float32", mean, std, scale)
    res["scaled" if scale else "full"] = (time.process_time() - t) / (reps * len(jpegs)) * 1e3
t = time.process_time()
for _ in range(reps):
    for b in jpegs:
        Image.open(io.BytesIO(b)).convert("RGB")
res["pil"] = (time.process_time() - t) / (reps * len(jpegs)) * 1e3
print(json.dumps(res))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photos")
    ap.add_argument("pythons", nargs="+", help="interpreters, each with its lmdbloader build")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--reps", type=int, default=20, help="passes over the photos per measurement")
    args = ap.parse_args()
    runs = {py: [] for py in args.pythons}
    for _ in range(args.rounds):
        for py in args.pythons:
            out = subprocess.run([py, "-c", CHILD, args.photos, str(args.reps)], check=True,
                                 capture_output=True, text=True,
                                 env=dict(os.environ, OMP_NUM_THREADS="1"))
            runs[py].append(json.loads(out.stdout))
    base = runs[args.pythons[0]]
    print("CPU ms an image, median of rounds "
          "(ratio to the first build, median of rounds' ratios):")
    for py in args.pythons:
        print(f"  {py}: {runs[py][0]['module']}")
        for key, name in (("scaled", "fused, IDCT scaling on "),
                          ("full", "fused, IDCT scaling off"),
                          ("pil", "PIL decode (control)   ")):
            vals = [r[key] for r in runs[py]]
            ratio = statistics.median(r[key] / b[key] for r, b in zip(runs[py], base))
            print(f"    {name} {statistics.median(vals):6.3f}  ({ratio:.3f}x)  rounds: "
                  + " ".join(f"{v:.3f}" for v in vals))


if __name__ == "__main__":
    sys.exit(main())
