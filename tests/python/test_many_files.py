"""100,000 LMDB files read as one dataset under `ulimit -n 256`.

Corpora are moving to 10^5-10^6 shards. The files here are copies of one
py-lmdb file (subdir=False, one record) with the value's bytes changed in
place, so each is a valid LMDB with content of its own, written in seconds.
py-lmdb reads a sample of them (the oracle: it walks each file's tree
itself); lmdbloader reads all of them, in order, in a child whose descriptor
limit is 256, and the kernel's count of that child's memory grows by a few
dozen bytes a file at open, not by a Part a file.
"""

import os
import shutil
import subprocess
import sys
import textwrap

import lmdb

FILES = 100_000
KEY = b"record00"


def value_of(i):
    return b"file %011d" % i  # 16 bytes, as the template's


def write_files(root):
    """FILES copies of a one-record py-lmdb file, file i holding value_of(i)."""
    template = os.path.join(root, "template")
    env = lmdb.open(template, subdir=False, lock=False, map_size=1 << 20)
    with env.begin(write=True) as txn:
        txn.put(KEY, value_of(0))
    env.close()
    with open(template, "rb") as f:
        data = bytearray(f.read())
    os.remove(template)
    at = data.find(value_of(0))
    assert at > 0 and data.count(value_of(0)) == 1, "the template holds its value once"
    folder = os.path.join(root, "set")
    os.mkdir(folder)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for i in range(FILES):
        data[at:at + 16] = value_of(i)
        fd = os.open(os.path.join(folder, "shard-%06d.lmdb" % i), flags, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    return folder


CHILD = textwrap.dedent("""
    import os, resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    import lmdbloader

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    folder, files = sys.argv[1], int(sys.argv[2])
    before = rss()
    r = lmdbloader.Reader(folder, index_dir="none", rss_budget="64MiB")
    opened = rss() - before
    assert len(r) == files, len(r)
    for first in range(0, files, 4096):
        got = r.get_batch(range(first, min(first + 4096, files)))
        want = [b"file %011d" % i for i in range(first, first + len(got))]
        if got != want:
            k = next(k for k, (a, b) in enumerate(zip(got, want)) if a != b)
            sys.exit(f"record {first + k}: {got[k]!r}, expected {want[k]!r}")
    stats = r.stats()
    print(opened, stats["files"], stats["files_open"], len(os.listdir("/proc/self/fd")))
""")


def test_100000_files_read_in_order_as_py_lmdb_reads_them_under_ulimit_256(tmp_path):
    try:
        folder = write_files(str(tmp_path))
        names = sorted(os.listdir(folder))
        assert len(names) == FILES
        # py-lmdb on a sample: what each file holds, by its own walk.
        for i in list(range(0, FILES, 997)) + [FILES - 1]:
            env = lmdb.open(os.path.join(folder, names[i]), subdir=False, readonly=True, lock=False)
            with env.begin() as txn:
                assert list(txn.cursor()) == [(KEY, value_of(i))], names[i]
            env.close()
        out = subprocess.run([sys.executable, "-c", CHILD, folder, str(FILES)], capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        opened, files, files_open, fds = (int(x) for x in out.stdout.split())
        assert files == FILES
        assert files_open <= 64 and fds < 128, out.stdout
        # One Part a file (688 bytes and two path strings) cost 868 bytes a
        # file; the columns of paths and counts cost about 40.
        assert opened / FILES < 256, f"the open grew RSS by {opened / FILES:.0f} bytes a file"
    finally:
        shutil.rmtree(tmp_path / "set", ignore_errors=True)
