"""A file set's saved listing: the second open reads no member.

Opening a set needs every member's record count; the first open reads each
member's meta pages and saves the counts with each member's identity beside
the record indexes (index_dir). Later opens take them from there while the
folder's stat is unchanged, so a member broken after the listing was saved
still opens, and only its own read fails, naming it. A member rewritten in
place is never read at the positions of its old count.
"""

import os
import pickle
import shutil
import subprocess
import sys
import time

import lmdb
import pytest

import lmdbloader

FILES = 60


def write_member(path, i, count):
    env = lmdb.open(path, subdir=False, lock=False, map_size=1 << 20)
    with env.begin(write=True) as txn:
        for r in range(count):
            txn.put(b"k%04d" % r, b"file %d record %d" % (i, r))
    env.close()


def settle(folder):
    # A folder changed within the last second is not trusted to a listing
    # (a change in the same clock tick would not move its times).
    past = time.time() - 10
    os.utime(folder, (past, past))


def make_set(root, files=FILES):
    folder = os.path.join(root, "set")
    os.mkdir(folder)
    for i in range(files):
        write_member(os.path.join(folder, "chunk-%04d.lmdb" % i), i, 1 + i % 4)
    settle(folder)
    return folder


def py_lmdb_records(folder):
    """Every value of every member, in the set's order, as py-lmdb walks them."""
    out = []
    for name in sorted(os.listdir(folder)):
        env = lmdb.open(os.path.join(folder, name), subdir=False, readonly=True, lock=False)
        with env.begin() as txn:
            out.extend(v for _, v in txn.cursor())
        env.close()
    return out


def source(r):
    return r.stats()["index_source"]


def test_the_second_open_reads_no_member_and_a_broken_one_fails_at_its_read(tmp_path):
    folder = make_set(str(tmp_path))
    cache = str(tmp_path / "cache")
    first = lmdbloader.Reader(folder, index_dir=cache)
    assert "saved to" in source(first)
    want = py_lmdb_records(folder)
    r = lmdbloader.Reader(folder, index_dir=cache)
    assert "saved listing" in source(r)
    assert len(r) == len(want)
    assert r.get_batch(range(len(r))) == want
    # Member 5's data replaced in place by bytes that are no LMDB: a walk
    # would refuse the set at open; the listing's open succeeds.
    broken = os.path.join(folder, "chunk-0005.lmdb")
    with open(broken, "r+b") as f:
        f.write(b"\xff" * 8192)
    r = lmdbloader.Reader(folder, index_dir=cache)
    assert len(r) == len(want)
    at = sum(1 + i % 4 for i in range(5))
    assert r[at - 1] == want[at - 1]
    with pytest.raises(lmdbloader.CorruptedError, match="chunk-0005.lmdb.*listing is deleted"):
        r[at]
    with pytest.raises(lmdbloader.CorruptedError, match="chunk-0005.lmdb"):
        lmdbloader.Reader(folder, index_dir=cache)
    skipped = lmdbloader.Reader(folder, index_dir=cache, skip_bad_files=True)
    assert len(skipped) == len(want) - 2


@pytest.mark.parametrize("same_count", [False, True])
def test_a_member_copied_over_in_place_is_never_read_at_old_positions(tmp_path, same_count):
    folder = make_set(str(tmp_path))
    cache = str(tmp_path / "cache")
    lmdbloader.Reader(folder, index_dir=cache)
    # `cp other.lmdb chunk-0002.lmdb`: the same inode, other records.
    other = str(tmp_path / "other.lmdb")
    write_member(other, 99, 3 if same_count else 7)
    shutil.copyfile(other, os.path.join(folder, "chunk-0002.lmdb"))
    want = py_lmdb_records(folder)
    r = lmdbloader.Reader(folder, index_dir=cache)
    assert "saved listing" in source(r)
    if same_count:
        assert r.get_batch(range(len(r))) == want
    else:
        with pytest.raises(lmdbloader.CorruptedError, match="chunk-0002.lmdb.*listing"):
            r.get_batch(range(len(r)))
    again = lmdbloader.Reader(folder, index_dir=cache)
    assert "meta pages" in source(again)
    assert again.get_batch(range(len(again))) == want


def test_members_added_deleted_or_renamed_are_seen_through_the_folder(tmp_path):
    folder = make_set(str(tmp_path))
    cache = str(tmp_path / "cache")
    changes = [lambda: os.remove(os.path.join(folder, "chunk-0000.lmdb")),
               lambda: write_member(os.path.join(folder, "chunk-9999.lmdb"), 9999, 2),
               lambda: os.rename(os.path.join(folder, "chunk-0001.lmdb"), os.path.join(folder, "chunk-5000.lmdb"))]
    for change in changes:
        assert "saved to" in source(lmdbloader.Reader(folder, index_dir=cache))
        change()
        r = lmdbloader.Reader(folder, index_dir=cache)
        assert "meta pages" in source(r)
        assert r.get_batch(range(len(r))) == py_lmdb_records(folder)
        settle(folder)


CHILD = """
import pickle, sys
import lmdbloader
r = pickle.loads(sys.stdin.buffer.read())  # as a spawned or forkserver worker gets its Reader
print(r.stats()["index_source"])
print(r[len(r) - 1].decode())
"""


def test_a_reader_pickled_to_a_new_process_reopens_from_the_listing(tmp_path):
    folder = make_set(str(tmp_path))
    cache = str(tmp_path / "cache")
    lmdbloader.Reader(folder, index_dir=cache)
    r = lmdbloader.Reader(folder, index_dir=cache)
    out = subprocess.run([sys.executable, "-c", CHILD], input=pickle.dumps(r), capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got_source, last = out.stdout.decode().splitlines()
    assert "saved listing" in got_source
    assert last.encode() == r[len(r) - 1]
