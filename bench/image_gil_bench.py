"""The Python time of the fused image path per batch: ImageDecode /
ClipDecode.decode_records on 32 in-memory records, in the calling thread,
as a thread loader runs it. Of each batch's wall time, the part inside the
_core calls that release the GIL (the split, header reads, the decodes) is
timed by wrapping them; the rest is Python holding the GIL (the draws,
building each call's arguments), which threads of one process cannot
overlap. (Argument conversion inside a _core call holds the GIL too and is
counted with the call.)

Recipes: bench/image_recipes.py's fused decoders (train, eval, clip-train,
dinov2, colour) over bench/image_corpus.py's photographs, and clip (8 frames
of 320x240 a record, ClipDecode(112, frames=8)). Trees alternate round by
round, each run a fresh process importing that tree's package
(tests/python/tree_package.py: its build/, built when stale), so an old and
a new tree compare in the same run. Figures: medians over batches of a run,
then the range over rounds.

    python bench/image_gil_bench.py [--trees .,/path/to/other/tree] [--recipes train,dinov2,clip-train]
                                    [--rounds 3] [--batches 24]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WRAPPED = ("split_image_records", "image_sizes", "image_info", "decode_images", "resample_rgb", "decode_views",
           "decode_crops")
BATCH = 32


def _records(recipe, count):
    import msgpack
    import image_corpus
    if recipe == "clip":
        return [msgpack.packb({"frames": image_corpus.clip_jpegs(i)[0], "label": i % 7}) for i in range(count)]
    return [msgpack.packb({"image": jpeg, "label": label})
            for jpeg, label in (image_corpus.photo_jpeg(i) for i in range(count))]


def _decoder(recipe):
    import lmdbloader
    import image_recipes
    if recipe == "clip":
        return lmdbloader.ClipDecode(112, frames=8, train=True, flip=0.5)
    return image_recipes.fused_decode(recipe)


def child(tree, recipe, batches):
    """One run: {wall_ms, python_ms, core_ms} medians over `batches` batches."""
    sys.path.insert(0, os.path.join(tree, "tests", "python"))
    sys.path.insert(0, HERE)
    import tree_package
    tree_package.use_tree()
    import torch
    from lmdbloader import _core
    inside = [0.0]
    for name in WRAPPED:
        fn = getattr(_core, name, None)
        if fn is None:
            continue

        def timed(*args, _fn=fn, **kwargs):
            t = time.perf_counter()
            try:
                return _fn(*args, **kwargs)
            finally:
                inside[0] += time.perf_counter() - t
        setattr(_core, name, timed)
    torch.set_num_threads(1)
    decoder = _decoder(recipe)
    records = _records(recipe, 4 * BATCH)
    torch.manual_seed(0)
    walls, pythons = [], []
    for b in range(batches + 2):
        batch = records[(b % 4) * BATCH:(b % 4 + 1) * BATCH]
        inside[0] = 0.0
        t = time.perf_counter()
        decoder.decode_records(batch)
        wall = time.perf_counter() - t
        if b >= 2:  # the first batches warm the scratch and the caches
            walls.append(wall)
            pythons.append(wall - inside[0])
    wall, python = statistics.median(walls) * 1e3, statistics.median(pythons) * 1e3
    return {"wall_ms": wall, "python_ms": python, "core_ms": wall - python}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trees", default=".", help="comma-separated source trees, each with its build/")
    p.add_argument("--recipes", default="train,dinov2,clip-train")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batches", type=int, default=24)
    p.add_argument("--child", nargs=2, metavar=("TREE", "RECIPE"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(os.path.realpath(args.child[0]), args.child[1], args.batches)))
        return
    trees = [os.path.realpath(t) for t in args.trees.split(",")]
    results = {}
    for r in range(args.rounds):
        for recipe in args.recipes.split(","):
            for tree in trees:
                done = subprocess.run([sys.executable, __file__, "--child", tree, recipe, "--batches",
                                       str(args.batches)], capture_output=True, text=True, check=True)
                got = json.loads(done.stdout.strip().splitlines()[-1])
                results.setdefault((recipe, tree), []).append(got)
                print(f"round {r + 1} {recipe:10s} {tree}: wall {got['wall_ms']:.2f} ms, python "
                      f"{got['python_ms']:.2f} ms, in _core {got['core_ms']:.2f} ms a batch of {BATCH}", flush=True)
    print("\nper batch of 32, range over rounds (medians within a run):")
    for (recipe, tree), runs in results.items():
        span = {k: (min(x[k] for x in runs), max(x[k] for x in runs)) for k in ("wall_ms", "python_ms")}
        print(f"{recipe:10s} {tree}: wall {span['wall_ms'][0]:.2f}-{span['wall_ms'][1]:.2f} ms, "
              f"Python (GIL held) {span['python_ms'][0]:.2f}-{span['python_ms'][1]:.2f} ms")


if __name__ == "__main__":
    main()
