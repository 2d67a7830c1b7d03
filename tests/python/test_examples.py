"""The examples run as their docstrings say (over a small corpus)."""

import os
import subprocess
import sys

import lmdbloader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_randaugment_after_the_fused_decode_and_mixup_on_the_batch(tmp_path):
    subprocess.run([sys.executable, os.path.join(ROOT, "examples", "make_image_folder.py"), str(tmp_path / "photos"),
                    "--images", "96"], check=True, capture_output=True)
    lmdbloader.convert(str(tmp_path / "photos"), str(tmp_path / "photos.lmdb"), kind="image_folder")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "randaugment.py"),
                           str(tmp_path / "photos.lmdb")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "batch 2: (32, 3, 224, 224) torch.float32, targets (32, 4)" in done.stdout, done.stdout
