"""What scripts/check_install.sh runs with the installed wheel, where
Debian's liblmdb, liburing and libjpeg are hidden: a py-lmdb database with
packed-integer keys read and converted, an image folder converted, and the
images loaded by lmdbloader.DataLoader with ImageDecode in 2 workers, each
compared with what py-lmdb gives and what PIL gives for torchvision's
evaluation recipe.

Usage: wheel_check.py WORKDIR ENGINE, ENGINE the io engine that "auto" must
pick: "io_uring", or "threads" where the system refuses io_uring."""

import io
import os
import struct
import subprocess
import sys

import lmdb
import msgpack
import numpy as np
import torch
from PIL import Image

import lmdbloader

work, engine = sys.argv[1], sys.argv[2]
assert lmdbloader.__file__.startswith(sys.prefix), f"lmdbloader imported from {lmdbloader.__file__}"

# A py-lmdb database keyed by packed integers (struct.pack(">Q", i)), values
# of many sizes, some past a 4 KiB page (overflow pages).
src = os.path.join(work, "packed.lmdb")
rng = np.random.default_rng(7)
values = {struct.pack(">Q", i * 3): rng.bytes(int(rng.integers(0, 9000))) for i in range(300)}
with lmdb.open(src, map_size=1 << 26, subdir=True) as env, env.begin(write=True) as txn:
    for k, v in values.items():
        txn.put(k, v)

reader = lmdbloader.Reader(src, io_engine="auto")
assert len(reader) == len(values)
assert list(reader.keys()) == sorted(values), "keys differ from py-lmdb's"
for k, v in values.items():
    assert reader.get(k) == v, f"record {k.hex()} differs from py-lmdb's"
batch = reader.get_batch(list(range(len(values))))
assert batch == [values[k] for k in sorted(values)]
stats = reader.stats()
assert stats["io_engine"] == engine, stats
if engine == "threads":
    assert stats["io_fallback"], "no reason given for the fallback"
print(f"py-lmdb database: {len(values)} records read, io_engine {stats['io_engine']}"
      + (f" ({stats['io_fallback']})" if stats["io_fallback"] else ""))

# The command from the wheel converts it; its records are py-lmdb's values.
out = os.path.join(work, "packed.corpus")
subprocess.run(["lmdbloader", "convert", "--from", "lmdb", src, out, "--overwrite"],
               check=True, stdout=subprocess.DEVNULL)
subprocess.run(["lmdbloader", "verify", out], check=True, stdout=subprocess.DEVNULL)
corpus = lmdbloader.Reader(out)
assert len(corpus) == len(values)
# Records are stored as they were, found by their original keys.
assert [corpus[i] for i in range(len(corpus))] == [values[k] for k in sorted(values)]
for k, v in values.items():
    assert corpus.get(k) == v, f"converted record {k.hex()} differs from py-lmdb's"

# An image folder: 2 classes of JPEGs, converted by the package's converter.
folder = os.path.join(work, "photos")
images = {}
for i in range(24):
    d = os.path.join(folder, f"class_{i % 2}")
    os.makedirs(d, exist_ok=True)
    y, x = np.mgrid[0:90 + i, 0:120 + 2 * i].astype(np.float32)
    arr = np.stack([128 + 100 * np.sin(x / 9 + i), 128 + 100 * np.cos(y / 7), (x + y) % 256], -1)
    buf = io.BytesIO()
    Image.fromarray(arr.astype(np.uint8)).save(buf, format="JPEG", quality=90)
    name = os.path.join(d, f"{i:02d}.jpg")
    with open(name, "wb") as f:
        f.write(buf.getvalue())
photos = os.path.join(work, "photos.corpus")
lmdbloader.convert(folder, photos, kind="image_folder")

# Evaluation recipe (no random draw), uint8: the wheel's libjpeg-turbo and
# resampling against PIL, as torchvision's Resize(55) + CenterCrop(48) do it
# on a PIL image (torchvision itself is left out: its import alone costs
# seconds).


def reference(data, resize=55, size=48):
    image = Image.open(io.BytesIO(data)).convert("RGB")
    w, h = image.size
    nw, nh = (resize, int(resize * h / w)) if w <= h else (int(resize * w / h), resize)
    image = image.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
    crop = np.asarray(image.crop((left, top, left + size, top + size)))
    return torch.from_numpy(crop.copy()).permute(2, 0, 1)


ds = lmdbloader.LmdbDataset(photos, decode=lmdbloader.ImageDecode(
    48, train=False, dtype=torch.uint8))
loader = lmdbloader.DataLoader(ds, batch_size=8, num_workers=2)
raw = lmdbloader.Reader(photos)
seen = 0
for batch_images, labels in loader:
    assert batch_images.shape[1:] == (3, 48, 48) and batch_images.dtype == torch.uint8
    for j in range(len(labels)):
        record = msgpack.unpackb(raw[seen])
        assert int(labels[j]) == record["label"]
        ref = reference(record["image"])
        diff = (batch_images[j].float() - ref.float()).abs().mean().item()
        assert diff <= 2.0, f"record {seen}: {diff:.2f} levels from PIL's"
        seen += 1
assert seen == len(ds) == 24
print(f"image folder: {seen} images through lmdbloader.DataLoader + ImageDecode in 2 workers")
