#!/usr/bin/env bash
# The main job: sets everything up, then runs the same DataLoader job over
# py-lmdb and over lmdbloader on a generated 1 GiB corpus and shows the
# per-worker RSS of each (bench/out/dataloader_bench.png). Then the image
# job, shorter: the ImageNet training recipe over generated JPEG photographs,
# py-lmdb + torchvision beside lmdbloader's fused decode path, images/s,
# per-worker RSS and /dev/shm (bench/out/image_demo.png).
# PYTHON names the interpreter (default python3), as for scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=${PYTHON:-python3}
$PY bench/dataloader_bench.py "$@"
$PY bench/image_bench.py --demo
