"""Image and video-clip jobs in DataLoader workers: py-lmdb + PIL + torchvision
against lmdbloader's dataset with the same decoding, its fused decode path
(lmdbloader.ImageDecode / ClipDecode, where this build has it) and DALI's
CPU-only pipeline (where installed), in one run.

Recipes (2 persistent workers, batch 32, shuffled, 3 epochs):
- ``train``: RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
  Normalize(ImageNet mean/std) -> float32 [3, 224, 224], over 2,048 JPEG
  photographs 350-500 px on the long side (~88 KB at quality 90);
- ``eval``: Resize(256), CenterCrop(224), ToTensor, Normalize, same images;
- ``clip-train``: open_clip's RandomResizedCrop(224, scale=(0.9, 1.0),
  bicubic), no flip, ToTensor, Normalize(OpenAI's mean/std), same images;
- ``ocr``: Grayscale, Resize((32, 128)) squashing, bicubic, ToTensor,
  Normalize(0.5, 0.5) -> float32 [1, 32, 128], same images;
- ``ocr-lines``: the same OCR recipe over word crops as synthetic OCR corpora
  (MJSynth) store them: a word over a photograph's crop, 32 px high, 50-250
  px wide, 2-6 KB (the ``lines`` corpus: bench/image_corpus.py);
- ``colour``: RandomResizedCrop(224, bicubic), flip, RandomApply([ColorJitter(
  0.4, 0.4, 0.2, 0.1)], 0.8), RandomGrayscale(0.2), RandomSolarize(128, 0.2),
  ToTensor, Normalize(ImageNet), same images;
- ``dinov2``: DINOv2's multi-crop (dinov2/data/augmentations.py): per image
  two global crops RandomResizedCrop(224, scale=(0.32, 1), bicubic) and
  eight local ones (96, scale=(0.05, 0.32)), each flipped (0.5),
  RandomApply([ColorJitter(0.4, 0.4, 0.2, 0.1)], 0.8), RandomGrayscale(0.2),
  GaussianBlur(9, (0.1, 2)) (always on global crop 1, 0.1 on global crop 2,
  0.5 on the locals), RandomSolarize(128, 0.2) on global crop 2, ToTensor,
  Normalize(ImageNet) -> float32 [1, 3, 224, 224] x 2 and [8, 3, 96, 96];
  the fused path is ImageDecode(crops=[Crop(...), ...]) (one decode an
  image), torchvision's a per-crop transform of the PIL image; same images;
- ``clip``: 1,024 clips of 8 frames 320x240 -> one RandomResizedCrop box and
  one flip for the whole clip, 112x112 -> float32 [8, 3, 112, 112];
- ``coclr``: CoCLR's two-clip pretraining input over a corpus in its layout
  (one LMDB file, a msgpack list of 128x171 JPEG frames per video under its
  9-digit id, the train split's videos and labels from CSV files beside it):
  two clips of 16 consecutive frames, each from its own random start, box
  (scale 0.2-1, as CoCLR's bottom_area) and flip, 112x112 -> float32
  [2, 16, 3, 112, 112]; every video of the split once an epoch.
Variants per recipe:
1. ``pylmdb``: py-lmdb opened lazily in each worker (a pickle of (JPEG bytes,
   label) per key, as users write one), PIL + torchvision, default_collate:
   the baseline (1.00x); for ``coclr``, a Dataset doing what CoCLR's
   UCF101LMDB_2CLIP does (py-lmdb, msgpack, PIL, per-frame torchvision);
2. ``lmdb-tv``: lmdbloader.LmdbDataset(decode=the same PIL + torchvision
   function), collate_fn=lmdbloader.collate;
3. ``fused-loader``: LmdbDataset(decode=lmdbloader.ImageDecode(...)) under
   lmdbloader.DataLoader (decoded straight into ring slots); for ``coclr``,
   LmdbDataset(keys=the split's videos, targets=their labels,
   decode=ClipDecode(112, frames=16, clips=2), rss_budget=--rss-budget);
4. ``fused-collate``: the same dataset under torch's DataLoader with
   collate_fn=lmdbloader.collate;
5. ``fused-pickle``: variant 3 reading variant 1's LMDB as it is, the
   pickles split by ``record=pickle.loads`` and the samples named by
   ``keys=[b"%08d" % i ...]`` (train, eval, clip);
6. ``dali``: DALI's CPU-only pipeline (device_id=None, 2 threads) over the
   folder of files: fused crop-decode, resize, crop_mirror_normalize (the
   clip recipe: its sequence reader over the frame folders; clip-train:
   area 0.9-1.0, cubic antialiased resize, no flip; ocr: decoded to gray,
   squashed to 32x128 by the cubic resize, normalized 0.5 / 0.5). An anchor,
   not the same pixels: DALI's filters and its gray (libjpeg's Y plane) are
   not PIL's.
7. ``fused-threads``: variant 3 with ``worker_method="thread"``: the workers
   are threads of the main process (no worker processes, one Reader).
3-5 and 7 are skipped with a note where lmdbloader has no ImageDecode /
ClipDecode, 6 where DALI is not installed (it is an optional, large wheel:
``pip install -c constraints.txt nvidia-dali-cuda130``) and for colour (no
DALI pipeline is written for it).
With variant 5 the cost of ``pickle.loads`` on the corpus's records is
timed in the parent (microseconds a record) and reported beside its rate.

Each run is a fresh process (no variant's libraries or arenas are counted in
another's), the page cache warm; variants alternate, ``--repeats`` rounds.
Figures are medians: of epochs 2-3 within a run (the first starts the
workers), then over rounds, with the ratio to variant 1 taken within each
round. Also reported: each worker's and the main process's peak RSS and PSS, the
job's (every process of it summed at each sample)
(lmdbloader.memory, from /proc; for ``coclr`` also the RSS of the data
file's mappings, each worker's peak in epoch 1 and after, and the reader's
rss_budget), and the peak of /dev/shm the job holds: the
files under /dev/shm its processes have open or mapped (the filesystem's own
count, statvfs, includes other programs' use and is kept in the JSON). Writes
bench/out/image_bench.json and .png.

    python bench/image_bench.py [--recipes train,eval,clip-train,ocr,ocr-lines,colour,dinov2,clip,coclr] [--variants pylmdb,...]
                                [--repeats 3] [--videos 384] [--rss-budget 64MiB]
                                [--workdir bench/out/image_corpora] [--out bench/out]
    python bench/image_bench.py --demo     # train recipe, variants 1, 3 and 7 (else 1 and 2), 1,024 images
"""

import argparse
import json
import os
import pickle
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
from image_coclr import CoclrDecode, coclr_dataset  # noqa: E402
from image_dali import have_dali  # noqa: E402
from image_recipes import (  # noqa: E402
    BASELINE, DETERMINISTIC, FUSED, FUSED_API, OCR, RECIPES, VARIANTS, TorchvisionDecode, fused_decode,
    pickle_cost, pickle_keys)
from image_report import plot, print_demo, print_table, summarize  # noqa: E402
from image_run import run_one  # noqa: E402


def warm(paths, variant, recipe):
    """Drops the variant's input from the page cache and reads it back sequentially."""
    from conftest import warm_page_cache
    if recipe == "coclr":
        files = [paths["lmdb"]]
    elif variant in ("pylmdb", "fused-pickle"):
        files = [os.path.join(paths["pylmdb"], "data.mdb")]
    elif variant == "dali":
        files = [os.path.join(d, f) for d, _, fs in os.walk(paths["folder"]) for f in sorted(fs)]
    else:
        files = [os.path.join(paths["corpus"], f) for f in sorted(os.listdir(paths["corpus"]))]
    for f in files:
        warm_page_cache(f)


def available(recipe, variant):
    """None where the variant can run here, else why not."""
    if recipe == "coclr" and variant in ("fused-pickle", "dali"):
        return "not part of this recipe (the CoCLR corpus is read as it is by variants 2-4)"
    if variant in FUSED:
        import lmdbloader
        name = FUSED_API[recipe]
        if not hasattr(lmdbloader, name):
            return f"lmdbloader.{name} is missing from this build (the fused decode path)"
    if variant == "dali" and not have_dali():
        return "DALI is not installed (optional: pip install -c constraints.txt nvidia-dali-cuda130)"
    if variant == "dali" and recipe not in ("train", "eval", "clip", "clip-train", *OCR):
        return "no DALI pipeline is written for this recipe (torchvision's colour draws have no exact DALI " \
               "counterpart)"
    return None


def agreement(recipe, paths, variant="fused-loader", n=8):
    """The fused path beside torchvision on the same records: shapes, dtypes
    and labels always; the largest and mean absolute difference for the image
    recipes, deterministic ones (eval, ocr) as they are, random ones with
    torch seeded alike for both before each record (the same boxes, flips and
    colour draws). ``variant`` "fused-pickle": py-lmdb's pickles through
    record=pickle.loads."""
    import lmdbloader
    import torch
    if recipe == "coclr":
        reference = coclr_dataset(paths, CoclrDecode())
        fused = coclr_dataset(paths, fused_decode(recipe))
    elif variant == "fused-pickle":
        keys = pickle_keys(paths)
        reference = lmdbloader.LmdbDataset(paths["pylmdb"], keys=keys, decode=TorchvisionDecode(recipe, "pylmdb"))
        fused = lmdbloader.LmdbDataset(paths["pylmdb"], keys=keys, decode=fused_decode(recipe, record=pickle.loads))
    else:
        reference = lmdbloader.LmdbDataset(paths["corpus"], decode=TorchvisionDecode(recipe, "lmdbloader"))
        fused = lmdbloader.LmdbDataset(paths["corpus"], decode=fused_decode(recipe))
    compare = RECIPES[recipe]["corpus"] in ("images", "lines")
    worst, total, count = 0.0, 0.0, 0
    for i in range(min(n, len(reference))):
        if compare:
            torch.manual_seed(i)
        a, la = reference[i]
        if compare:
            torch.manual_seed(i)
        b, lb = fused[i]
        a, b = (list(x) if isinstance(x, (tuple, list)) else [x] for x in (a, b))  # one tensor a Crop
        if [(tuple(x.shape), x.dtype) for x in a] != [(tuple(x.shape), x.dtype) for x in b] or int(lb) != int(la):
            return {"ok": False, "why": f"record {i}: torchvision gives {[(x.dtype, list(x.shape)) for x in a]} "
                                        f"label {la}, the fused path {[(x.dtype, list(x.shape)) for x in b]} "
                                        f"label {lb}"}
        if compare:
            for x, y in zip(a, b):
                d = (x - y).abs()
                worst, total, count = max(worst, float(d.max())), total + float(d.sum()), count + d.numel()
    out = {"ok": True, "records": min(n, len(reference)), "shape": [list(x.shape) for x in a] if len(a) > 1 else
           list(a[0].shape), "dtype": str(a[0].dtype)}
    if compare:
        out.update(max_abs_diff=worst, mean_abs_diff=total / count, seeded=recipe not in DETERMINISTIC)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipes", default="train,eval,clip,coclr")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--images", type=int, default=None, help="default 2,048 (--demo: 1,024)")
    p.add_argument("--clips", type=int, default=1024)
    p.add_argument("--videos", type=int, default=384,
                   help="videos in the CoCLR-layout corpus (5 in 6 in the train split the coclr recipe reads)")
    p.add_argument("--rss-budget", default="64MiB", help="rss_budget of the coclr recipe's LmdbDataset")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default=os.path.join(HERE, "out", "image_corpora"),
                   help="where the generated corpora are cached")
    p.add_argument("--out", default=os.path.join(HERE, "out"))
    p.add_argument("--name", default="image_bench", help="the report's file name, without .json / .png")
    p.add_argument("--demo", action="store_true",
                   help="the demo: train recipe, py-lmdb beside the fused path in processes and in threads "
                        "(else variant 2), "
                        "1,024 images, one round; writes image_demo.json and .png")
    args = p.parse_args()
    if args.images is None:
        args.images = 1024 if args.demo else 2048
    recipes = args.recipes.split(",")
    variants = args.variants.split(",")
    demo_note = None
    if args.demo:
        recipes, args.repeats, args.name = ["train"], 1, "image_demo"
        fused = "fused-loader"
        demo_note = available("train", fused)
        variants = [BASELINE, "lmdb-tv"] if demo_note else [BASELINE, fused, "fused-threads"]
    for r in recipes:
        if r not in RECIPES:
            p.error(f"--recipes: unknown recipe {r!r} ({', '.join(RECIPES)})")
    for v in variants:
        if v not in VARIANTS:
            p.error(f"--variants: unknown variant {v!r} ({', '.join(VARIANTS)})")
    if BASELINE not in variants:
        variants.insert(0, BASELINE)  # the ratios are to it
    if args.epochs < 2 or args.repeats < 1 or args.images < args.batch or args.clips < args.batch:
        p.error("--epochs must be at least 2 (epochs 2+ are reported), --repeats at least 1, "
                "--images and --clips at least --batch")
    os.makedirs(args.out, exist_ok=True)

    import lmdbloader
    import torch
    import image_corpus
    corpora = {}
    for kind in ("images", "lines"):
        if any(RECIPES[r]["corpus"] == kind for r in recipes):
            corpora[kind] = image_corpus.images(args.workdir, args.images, args.seed, kind=kind)
    if any(RECIPES[r]["corpus"] == "clips" for r in recipes):
        corpora["clips"] = image_corpus.clips(args.workdir, args.clips, args.seed)
    if any(RECIPES[r]["corpus"] == "coclr" for r in recipes):
        corpora["coclr"] = image_corpus.coclr(args.workdir, args.videos, args.seed)
    report = {"torch": torch.__version__, "lmdbloader": lmdbloader.__version__, "workers": args.workers,
              "batch": args.batch, "epochs": args.epochs, "repeats": args.repeats, "cpus": os.cpu_count(),
              "rss_budget": args.rss_budget,
              "corpora": {k: {key: v[key] for key in ("root", "count", "mean_bytes", "corpus_bytes")}
                          for k, v in corpora.items()},
              "recipes": {}}
    try:
        import PIL
        report["pillow"] = PIL.__version__
        from torchvision_cpu import import_torchvision
        report["torchvision"] = import_torchvision().__version__
    except ImportError:
        pass
    if have_dali():
        import nvidia.dali
        report["dali"] = nvidia.dali.__version__
    if demo_note:
        print(f"note: {demo_note}: variant 2 ({VARIANTS['lmdb-tv']}) stands in for it", flush=True)

    with tempfile.TemporaryDirectory(dir=args.out) as tmp:
        for recipe in recipes:
            spec = RECIPES[recipe]
            paths = corpora[spec["corpus"]]
            skipped = {v: why for v in variants if (why := available(recipe, v))}
            todo = [v for v in variants if v not in skipped]
            notes = {v: f"skipped: {why}" for v, why in skipped.items()}
            if recipe == "clip" and "dali" in todo:
                notes["dali"] = ("frames read and decoded whole by fn.readers.sequence (CPU; deprecated, DALI's "
                                 "video readers take encoded video), one random_resized_crop box and one flip per "
                                 "clip; no labels")
            if recipe in ("clip-train", *OCR) and "dali" in todo:
                notes["dali"] = ("DALI's own antialiased cubic resize (not PIL's bicubic)" +
                                 (", its gray the JPEG's decoded luma" if recipe in OCR else "") +
                                 ": the same recipe, not the same pixels")
            check = {}
            for kind in ("fused-loader", "fused-pickle"):
                if not any(v == kind or (kind == "fused-loader" and v == "fused-collate") for v in todo):
                    continue
                try:
                    check[kind] = agreement(recipe, paths, kind)
                except Exception as e:  # noqa: BLE001 - reported, the runs still say more
                    check[kind] = {"ok": False, "why": f"{type(e).__name__}: {e}"}
                source = "py-lmdb's pickles, record=pickle.loads" if kind == "fused-pickle" else "the corpus"
                print(f"{recipe}: fused path beside torchvision ({source}): {check[kind]}", flush=True)
                if check[kind].get("why", "").startswith("record "):
                    # Not the same samples (shape, dtype or label): the rates would compare different work.
                    raise SystemExit(f"{recipe}: the fused path's samples differ from torchvision's: "
                                     f"{check[kind]['why']}")
            cost = None
            if "fused-pickle" in todo:
                cost = pickle_cost(paths)
                print(f"{recipe}: pickle.loads {cost['us_per_record']:.1f} us a record "
                      f"({cost['mean_record_bytes'] / 1000:.0f} KB on average)", flush=True)
            runs = {v: [] for v in todo}
            for _ in range(args.repeats):
                for v in todo:
                    warm(paths, v, recipe)
                    res = run_one({"recipe": recipe, "variant": v, "paths": paths, "batch": args.batch,
                                   "workers": args.workers, "epochs": args.epochs, "seed": args.seed,
                                   "rss_budget": args.rss_budget}, tmp)
                    runs[v].append(res)
                    if "error" in res:
                        print(f"{recipe:5s} {VARIANTS[v]:60s} failed: {res['error']}", flush=True)
                        continue
                    workers = ", ".join(f"{w['rss_mib']:.0f}/{w['pss_mib']:.0f}" for w in res["worker_peaks"])
                    print(f"{recipe:5s} {VARIANTS[v]:60s} {res['items_per_s']:6.0f} {spec['unit']}/s  "
                          f"worker RSS/PSS MiB {workers or '-'}  main {res['main_peak']['rss_mib']:.0f}/"
                          f"{res['main_peak']['pss_mib']:.0f}  /dev/shm peak {res['dev_shm_peak_mib']:.1f} MiB "
                          f"(whole filesystem {res['dev_shm_fs_peak_mib']:.1f})",
                          flush=True)
            table = {v: summarize(rs, runs[BASELINE]) for v, rs in runs.items()}
            if cost is not None and "error" not in table["fused-pickle"]:
                # A worker's time per sample at the measured rate, against the callable's share.
                per_item_us = args.workers / table["fused-pickle"]["items_per_s"] * 1e6
                cost["share_of_worker_time"] = cost["us_per_record"] / per_item_us
                notes["fused-pickle"] = (f"pickle.loads costs {cost['us_per_record']:.1f} us a record, "
                                         f"{100 * cost['share_of_worker_time']:.2f}% of a worker's "
                                         f"{per_item_us / 1000:.2f} ms a sample here")
            report["recipes"][recipe] = {"unit": spec["unit"], "table": table, "notes": notes,
                                         "fused_agreement": check, "pickle_loads": cost}
            print_table(recipe, table, notes, spec["unit"], args.repeats, args.epochs)
    if demo_note:
        report["note"] = demo_note
    with open(os.path.join(args.out, args.name + ".json"), "w") as f:
        json.dump(report, f, indent=1)
    plot(report, os.path.join(args.out, args.name + ".png"))
    if args.demo:
        print_demo(report, args)
    print(f"wrote {args.out}/{args.name}.json and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
