#!/usr/bin/env bash
# The main job: sets everything up, then runs the same DataLoader job over
# py-lmdb and over lmdbloader on a generated 1 GiB corpus and shows the
# per-worker RSS of each (bench/out/dataloader_bench.png).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 bench/dataloader_bench.py "$@"
