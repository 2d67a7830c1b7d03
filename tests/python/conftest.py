"""Fixtures shared by the Python tests: generated corpora and memory probes.
The tests import this tree's package (tree_package.py says how)."""

import os
import zlib

import pytest

from tree_package import use_tree

TREE_PACKAGE = use_tree()

MiB = 1 << 20


def frame_bytes(video, frame, size):
    """Deterministic contents of one frame file."""
    seed = (video * 1000003 + frame).to_bytes(8, "little")
    block = zlib.crc32(seed).to_bytes(4, "little") * 16
    return (block * (size // len(block) + 1))[:size]


def write_video_folders(root, videos, frames, frame_size, classes=4):
    """root/class_k/video_i/frame_00001.jpg ..."""
    for v in range(videos):
        d = os.path.join(root, f"class_{v % classes}", f"video_{v:05d}")
        os.makedirs(d, exist_ok=True)
        for f in range(frames):
            with open(os.path.join(d, f"frame_{f + 1:05d}.jpg"), "wb") as out:
                out.write(frame_bytes(v, f, frame_size))


def warm_page_cache(path):
    """Drop the file from the page cache, then read it sequentially: the cache
    then holds large folios, the worst case for mapped readers."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        while os.read(fd, 4 * MiB):
            pass
    finally:
        os.close(fd)


def stop_and_resume(make_loader, stop_after):
    """Runs make_loader() through one epoch uninterrupted; then again, stopped
    after `stop_after` batches, its state_dict() loaded into a fresh loader
    that finishes the epoch. Returns (uninterrupted order, stopped + resumed
    order), flattened."""
    uninterrupted = [x for batch in make_loader() for x in batch.tolist()]
    first = make_loader()
    it = iter(first)
    head = [x for _, batch in zip(range(stop_after), it) for x in batch.tolist()]
    state = first.state_dict()
    del it, first
    resumed = make_loader()
    resumed.load_state_dict(state)
    tail = [x for batch in resumed for x in batch.tolist()]
    return uninterrupted, head + tail


def statm_rss(pid="self"):
    """The kernel's RSS count of a process, in bytes (/proc/<pid>/statm)."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture(scope="session")
def video_corpus(tmp_path_factory):
    """A 256 MiB corpus of video-style records (8 frames of 32 KiB each): 16x
    the 16 MiB budget the DataLoader tests use."""
    import lmdbloader
    root = tmp_path_factory.mktemp("video")
    write_video_folders(str(root / "frames"), videos=1024, frames=8, frame_size=32 * 1024)
    out = str(root / "corpus")
    lmdbloader.convert(str(root / "frames"), out, kind="video_folder")
    return out
