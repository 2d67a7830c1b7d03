"""What scripts/check_wheels.sh runs with each wheel of the set where an
interpreter of its version and architecture runs here (a fresh virtual
environment, a chroot, or qemu-user): no torch, only what the wheel needs
(numpy, msgpack) and the references (py-lmdb, Pillow).

- the version: lmdbloader.__version__, the installed metadata and
  `lmdbloader --version` agree with the wheel's;
- a py-lmdb database read by Reader (keys, single reads, a batch) and by
  lmdbloader.compat, and converted and verified by the wheel's command;
- a JPEG decoded by the wheel's libjpeg-turbo against Pillow's decode;
- none of Debian's liblmdb, liburing, libjpeg can be loaded.

Usage: wheel_smoke.py WORKDIR VERSION COMMAND...: COMMAND the wheel's
lmdbloader command, with what runs it (qemu-aarch64 -L SYSROOT ...)."""

import ctypes
import io
import os
import subprocess
import sys
from importlib import metadata

import lmdb
import numpy as np
from PIL import Image

import lmdbloader
import lmdbloader.compat
from lmdbloader import _core

work, version, command = sys.argv[1], sys.argv[2], sys.argv[3:]
where = os.path.dirname(lmdbloader.__file__)
assert not os.path.exists(os.path.join(where, "..", "CMakeLists.txt")), f"imported from the source: {where}"

for name in ("liblmdb.so.0", "liburing.so.2", "libjpeg.so.62"):
    try:
        ctypes.CDLL(name)
    except OSError:
        continue
    raise AssertionError(f"{name} loads here: the check would not show the wheel carries its own")

printed = subprocess.run(command + ["--version"], check=True, capture_output=True, text=True).stdout.strip()
found = (lmdbloader.__version__, metadata.version("lmdbloader"), printed)
assert found == (version, version, f"lmdbloader {version}"), found

# A py-lmdb database, values of many sizes, some past a 4 KiB page.
src = os.path.join(work, "src.lmdb")
rng = np.random.default_rng(11)
values = {b"%06d" % (i * 7): rng.bytes(int(rng.integers(0, 9000))) for i in range(200)}
with lmdb.open(src, map_size=1 << 25) as env, env.begin(write=True) as txn:
    for k, v in values.items():
        txn.put(k, v)
keys = sorted(values)

reader = lmdbloader.Reader(src, io_engine="auto")
assert len(reader) == len(values) and list(reader.keys()) == keys
assert all(reader.get(k) == values[k] for k in keys)
assert reader.get_batch(list(range(len(keys)))) == [values[k] for k in keys]
engine = reader.stats()["io_engine"]
assert engine in ("io_uring", "threads"), engine

env = lmdbloader.compat.open(src, readonly=True, lock=False)
with env.begin() as txn:
    assert list(txn.cursor()) == [(k, values[k]) for k in keys]
    assert txn.get(keys[5]) == values[keys[5]] and txn.get(b"absent") is None
env.close()

out = os.path.join(work, "src.corpus")
subprocess.run(command + ["convert", "--from", "lmdb", src, out, "--overwrite"], check=True,
               stdout=subprocess.DEVNULL)
subprocess.run(command + ["verify", out], check=True, stdout=subprocess.DEVNULL)
corpus = lmdbloader.Reader(out)
assert [corpus[i] for i in range(len(corpus))] == [values[k] for k in keys]

# A JPEG: the wheel's libjpeg-turbo (SIMD: SSE2/AVX2 or NEON) against Pillow's.
y, x = np.mgrid[0:75, 0:101].astype(np.float32)
pixels = np.stack([128 + 100 * np.sin(x / 7), 128 + 100 * np.cos(y / 5), (3 * x + y) % 256], -1)
buf = io.BytesIO()
Image.fromarray(pixels.astype(np.uint8)).save(buf, format="JPEG", quality=92)
jpeg = buf.getvalue()
assert tuple(_core.image_sizes([jpeg])[0]) == (101, 75, "jpeg")
decoded = np.zeros((75, 101, 3), np.uint8)
_core.decode_crops([jpeg], [(0, (0, 0, 101, 75), False, None, 0, 0, None)], [(decoded, 101, 75)], "HWC", "uint8")
reference = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))
diff = np.abs(decoded.astype(np.int16) - reference).mean()
assert diff <= 1.0, f"{diff:.2f} levels from Pillow's decode"

print(f"{os.path.basename(sys.executable)} {sys.version.split()[0]} ({os.uname().machine}): "
      f"lmdbloader {version}, {len(keys)} py-lmdb records read (io_engine {engine}), compat, "
      f"convert + verify, a JPEG within {diff:.2f} levels of Pillow's")
