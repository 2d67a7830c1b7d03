"""A file rewritten in place under its index is never read as other bytes.

`cp B A` and `rsync --inplace` write into A's inode: device and inode stay,
and the size, the transaction id, even the meta page can match A's, while
every offset the index holds now points into B's pages. `rsync -t` and
`tar -x` then put A's mtime back. Each case here rewrites a database that a
Reader indexed with another whose values lie elsewhere, and checks every
read against py-lmdb's read of the file as it is now: the same bytes, or a
CorruptedError naming the file; never other bytes.
"""

import os
import shutil
import subprocess
import sys
import textwrap

import lmdb
import pytest

import lmdbloader

RECORDS = 20


def write_db(path, size, subdir=True, records=RECORDS, tag=b"a"):
    """A py-lmdb database of one commit: `records` keys, values of `size`
    bytes that say which file they belong to."""
    env = lmdb.open(str(path), map_size=1 << 24, subdir=subdir)
    with env.begin(write=True) as txn:
        for i in range(records):
            txn.put(b"k%04d" % i, (tag + b"%04d:" % i) * (size // 6 + 1))
    env.close()
    return str(path)


def data_file(path):
    return os.path.join(path, "data.mdb") if os.path.isdir(path) else path


def pylmdb_values(path):
    env = lmdb.open(path, readonly=True, lock=False, subdir=os.path.isdir(path))
    with env.begin() as txn:
        out = [v for _, v in txn.cursor()]
    env.close()
    return out


def rewrite_in_place(target, source, keep_mtime=False):
    """cp source target: the same inode, B's bytes (rsync -t --inplace keeps A's mtime)."""
    before = os.stat(data_file(target))
    with open(data_file(source), "rb") as src, open(data_file(target), "r+b") as dst:
        dst.truncate(0)
        shutil.copyfileobj(src, dst)
    if keep_mtime:
        os.utime(data_file(target), ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(data_file(target)).st_ino == before.st_ino


def read_all_or_refused(reader, want):
    """Every record is want's or the read is refused; returns how many were refused."""
    refused = 0
    for i in range(len(reader)):
        try:
            got = reader[i]
        except lmdbloader.CorruptedError as e:
            assert "changed since it was indexed" in str(e) or "records" in str(e), e
            refused += 1
            continue
        assert i < len(want) and got == want[i], f"record {i}: other bytes"
    try:
        batch = reader.get_batch(list(range(len(reader))))
    except lmdbloader.CorruptedError:
        refused += 1
    else:
        assert batch == want[:len(batch)]
    return refused


@pytest.mark.parametrize("mode", ["pread", "mmap"])
def test_a_plain_lmdb_rewritten_by_one_of_the_same_size_and_txnid(tmp_path, mode):
    a = write_db(tmp_path / "a", 100)
    b = write_db(tmp_path / "b", 150, tag=b"b")
    assert os.path.getsize(data_file(a)) == os.path.getsize(data_file(b))
    r = lmdbloader.Reader(a, mode=mode, index_dir="none")
    assert r[3] == pylmdb_values(a)[3]
    rewrite_in_place(a, b)
    assert read_all_or_refused(r, pylmdb_values(a)) > 0
    # A Reader opened now reads the file as it is.
    assert lmdbloader.Reader(a, mode=mode, index_dir="none").get_batch(list(range(RECORDS))) == pylmdb_values(a)


def test_a_corpus_like_file_set_member_rewritten_between_epochs_reads_its_new_bytes(tmp_path):
    root = tmp_path / "set"
    root.mkdir()
    for f in range(12):
        write_db(root / f"part-{f:02d}.lmdb", 100 + f, subdir=False, tag=b"%c" % (97 + f))
    r = lmdbloader.Reader(str(root), index_dir=str(tmp_path / "idx"))
    files = sorted(str(p) for p in root.iterdir() if not p.name.endswith("-lock"))
    assert r.get_batch(list(range(len(r)))) == [v for p in files for v in pylmdb_values(p)]
    # Same record count, other offsets: indexed again at its next read.
    rewrite_in_place(files[5], write_db(tmp_path / "other.lmdb", 300, subdir=False, tag=b"z"))
    want = [v for p in files for v in pylmdb_values(p)]
    assert r.get_batch(list(range(len(r)))) == want
    assert [r[i] for i in range(len(r))] == want
    # Fewer records in the same file: refused, naming it.
    rewrite_in_place(files[7], write_db(tmp_path / "fewer.lmdb", 100, subdir=False, records=15, tag=b"y"))
    with pytest.raises(lmdbloader.CorruptedError, match="part-07.lmdb"):
        r.get_batch(list(range(len(r))))


REOPENED = textwrap.dedent("""
    import os, resource, shutil, sys
    import lmdb, lmdbloader
    root, other, idx = sys.argv[1:4]
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    files = sorted(os.path.join(root, n) for n in os.listdir(root) if not n.endswith("-lock"))
    def values(p):
        env = lmdb.open(p, readonly=True, lock=False, subdir=False)
        with env.begin() as txn:
            out = [v for _, v in txn.cursor()]
        env.close()
        return out
    r = lmdbloader.Reader(root, index_dir=idx)
    assert r.get_batch(list(range(len(r)))) == [v for p in files for v in values(p)]
    with open(other, "rb") as src, open(files[3], "r+b") as dst:
        dst.truncate(0)
        shutil.copyfileobj(src, dst)
    want = [v for p in files for v in values(p)]
    # Under 64 descriptors the set keeps few files open: the rewritten one is
    # opened again, and its held index is not trusted for it.
    for start in range(0, len(r), 7):
        got = r.get_batch(list(range(start, min(start + 7, len(r)))))
        assert got == want[start:start + 7], start
    print("ok", r.stats()["files_open"])
""")


def test_a_member_reopened_under_a_low_descriptor_limit_is_checked_for_writes(tmp_path):
    root = tmp_path / "set"
    root.mkdir()
    for f in range(40):
        write_db(root / f"part-{f:02d}.lmdb", 100 + f, subdir=False, tag=b"%c" % (65 + f))
    other = write_db(tmp_path / "other.lmdb", 400, subdir=False, tag=b"z")
    out = subprocess.run([sys.executable, "-c", REOPENED, str(root), other, str(tmp_path / "idx")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok")


def test_a_saved_index_is_not_trusted_for_a_file_rewritten_with_its_old_mtime(tmp_path):
    a = write_db(tmp_path / "a", 100)
    idx = str(tmp_path / "idx")
    r = lmdbloader.Reader(a, index_dir=idx)
    assert r.get_batch(list(range(RECORDS))) == pylmdb_values(a)
    assert "saved" in r.stats()["index_source"]
    del r
    rewrite_in_place(a, write_db(tmp_path / "b", 150, tag=b"b"), keep_mtime=True)
    # What a new process sees: the size, the inode, the mtime and the
    # transaction id as the saved index has them.
    fresh = lmdbloader.Reader(a, index_dir=idx)
    assert fresh.get_batch(list(range(RECORDS))) == pylmdb_values(a)
    assert not fresh.stats()["index_source"].startswith("loaded"), fresh.stats()["index_source"]


def test_a_file_written_under_a_lock_true_reader_is_its_snapshot_not_a_change(tmp_path):
    """lock=True holds LMDB's snapshot: a writer's commit is no rewrite."""
    a = write_db(tmp_path / "a", 100)
    r = lmdbloader.Reader(a, lock=True)
    before = r.get_batch(list(range(RECORDS)))
    env = lmdb.open(a, map_size=1 << 24)
    with env.begin(write=True) as txn:
        txn.put(b"k9999", b"new")
    env.close()
    assert r.get_batch(list(range(RECORDS))) == before
