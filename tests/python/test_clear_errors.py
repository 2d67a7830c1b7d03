"""Errors that were silent or unclear: each names the file or argument and
the reason, with the right exception, and nothing wrong is passed on."""

import json
import os
import shutil
import subprocess
import sys
import threading

import lmdb
import pytest

import lmdbloader
import lmdbloader.compat


def write_corpus(path, names=None):
    names = names or [f"n{i}" for i in range(6)]
    with lmdbloader.CorpusWriter(path) as w:
        for i, name in enumerate(names):
            w._w.add(name, b"record %d" % i, {"label": float(i)})  # bytes names reach the core as given
    return path


def test_a_changed_byte_of_the_names_is_corruption_not_another_name(tmp_path):
    path = write_corpus(str(tmp_path / "c"), ["alpha", "bravo", "charlie"])
    # Rewrite the names value with py-lmdb, one byte changed, checksums left as written.
    with lmdb.open(path, lock=False) as env, env.begin(write=True) as txn:
        blob = bytearray(txn.get(b"__lmdbloader__/names"))
        blob[blob.index(b"bravo")] = ord("B")
        txn.put(b"__lmdbloader__/names", bytes(blob))
    os.unlink(os.path.join(path, "lmdbloader.idx"))
    r = lmdbloader.Reader(path, index_dir="none")
    with pytest.raises(lmdbloader.CorruptedError, match=r"c/data\.mdb: names is damaged \(checksum mismatch\)"):
        r.name(1)
    with pytest.raises(lmdbloader.CorruptedError):
        r.name(0)  # any name: the whole value is wrong
    res = subprocess.run(["lmdbloader", "verify", path], capture_output=True, text=True)
    assert res.returncode == 1 and "names" in res.stderr


def test_checking_the_names_holds_a_piece_of_them_not_all(tmp_path):
    """The first name() checks the names' checksums: reading the values a
    piece at a time, not whole (60 MB of names held at once before), by the
    kernel's peak RSS of this process (VmHWM, reset just before)."""
    path = str(tmp_path / "c")
    # Written in another process: the writer's freed buffers would stay in this one's heap.
    subprocess.run([sys.executable, "-c", "import lmdbloader, sys\n"
                    "with lmdbloader.CorpusWriter(sys.argv[1]) as w:\n"
                    "    for i in range(300_000):\n"
                    "        w.add(f'{i:08d}-' + 'n' * 190, b'x')\n", path],  # 59 MB of names
                   check=True)
    r = lmdbloader.Reader(path, index_dir="none")
    r[0]

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pytest.skip("cannot reset the peak RSS here")
    before = status("VmRSS:")
    assert r.name(123_456) == "00123456-" + "n" * 190
    grew = status("VmHWM:") - before
    assert grew < 16 << 20, f"the first name() grew the peak RSS by {grew / 2**20:.1f} MiB"


def test_a_name_that_is_not_utf8_is_refused_when_written(tmp_path):
    # A corpus's names are text; a reader given one that is not (another
    # writer's) says which record of which file (tests/reader/corpus_integrity_test.cc).
    with lmdbloader.CorpusWriter(str(tmp_path / "c")) as w:
        with pytest.raises(ValueError, match="record 0: its name 0x626164fffe is not UTF-8 text .*keyed by names"):
            w._w.add(b"bad\xff\xfe", b"x", {})
        w.add("ok", b"x")
    assert lmdbloader.Reader(str(tmp_path / "c")).name(0) == "ok"


def test_lock_file_that_is_a_directory_or_a_dangling_link_is_named(tmp_path):
    path = str(tmp_path / "db")
    with lmdb.open(path) as env, env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    lock = os.path.join(path, "lock.mdb")
    os.unlink(lock)
    os.mkdir(lock)
    with pytest.raises(OSError, match=r"lock=True: the lock file .*db/lock\.mdb is a directory"):
        lmdbloader.Reader(path, lock=True, index_dir="none")
    os.rmdir(lock)
    os.symlink(str(tmp_path / "missing" / "lock.mdb"), lock)
    with pytest.raises(OSError, match=r"lock=True: the lock file .*db/lock\.mdb is a link to a missing file"):
        lmdbloader.Reader(path, lock=True, index_dir="none")
    os.unlink(lock)
    assert lmdbloader.Reader(path, lock=True, index_dir="none")[0] == b"v"


def test_bytes_and_pathlike_paths_that_are_not_utf8_open(tmp_path):
    raw = os.fsencode(str(tmp_path)) + b"/d\xff\xfeb"
    with lmdb.open(raw) as env, env.begin(write=True) as txn:
        txn.put(b"k", b"v")

    class Path:
        def __fspath__(self):
            return raw

    for p in (raw, Path(), os.fsdecode(raw)):
        with lmdbloader.Reader(p, index_dir="none") as r:
            assert r[0] == b"v"
    env = lmdbloader.compat.open(raw, readonly=True, lock=False)
    with env.begin() as txn:
        assert txn.get(b"k") == b"v"
    env.close()
    with pytest.raises(FileNotFoundError, match=r"d\\xff\\xfemissing"):
        lmdbloader.Reader(os.fsencode(str(tmp_path)) + b"/d\xff\xfemissing")
    with pytest.raises(TypeError, match="path must be a str, bytes or os.PathLike"):
        lmdbloader.Reader(3)


def test_rss_budget_reads_after_close(tmp_path):
    path = write_corpus(str(tmp_path / "c"))
    r = lmdbloader.Reader(path, rss_budget="32MiB")
    r.close()
    assert r.rss_budget == 32 << 20
    with pytest.raises(ValueError, match="closed"):
        len(r)


def test_jsonl_manifest_that_is_a_directory_says_so(tmp_path):
    os.mkdir(tmp_path / "manifest.jsonl")
    with pytest.raises(lmdbloader.ConvertError, match=r"manifest\.jsonl: not a regular file \(a directory\)"):
        lmdbloader.convert(str(tmp_path / "manifest.jsonl"), str(tmp_path / "out"), kind="jsonl")
    assert not (tmp_path / "out").exists()


def test_converting_a_dupsort_lmdb_names_the_source_and_why(tmp_path):
    src = str(tmp_path / "src")
    env = lmdb.open(src, max_dbs=2)
    db = env.open_db(b"d", dupsort=True)
    with env.begin(write=True, db=db) as txn:
        txn.put(b"k0", b"a")
        txn.put(b"k0", b"b")
    env.close()
    with pytest.raises(lmdbloader.ConvertError, match=r"src \(database 'd'\): holds sorted duplicates \(MDB_DUPSORT"):
        lmdbloader.convert(src, str(tmp_path / "out"), kind="lmdb", db="d")
    res = subprocess.run(["lmdbloader", "convert", "--from", "lmdb", "--db", "d", src, str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "MDB_DUPSORT" in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


@pytest.fixture
def small_file_system(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_during_convert_is_no_space_left_naming_the_path(tmp_path, small_file_system):
    manifest = tmp_path / "m.jsonl"
    with open(manifest, "w") as f:
        for i in range(40):
            (tmp_path / f"f{i}.bin").write_bytes(os.urandom(200_000))
            f.write(json.dumps({"name": f"n{i}", "path": str(tmp_path / f"f{i}.bin")}) + "\n")
    out = small_file_system / "out"
    with pytest.raises(OSError, match=r"small/out\.tmp-\d+: No space left on device") as e:
        lmdbloader.convert(str(manifest), str(out), kind="jsonl")
    assert e.value.errno == 28
    assert os.listdir(small_file_system) == []  # nothing half-written left behind


def shard_set(tmp_path, records, shards):
    """A shard set of `records` small records in `shards` parts, and its shard list."""
    src = tmp_path / "src.jsonl"
    with open(src, "w") as f:
        for i in range(records):
            (tmp_path / f"f{i}").write_bytes(b"x" * 10)
            f.write(json.dumps({"name": f"n{i}", "path": str(tmp_path / f"f{i}")}) + "\n")
    out = tmp_path / "set"
    lmdbloader.convert(str(src), str(out), kind="jsonl", num_shards=shards)
    return out


def test_shard_list_whose_total_disagrees_with_its_parts_is_corruption(tmp_path):
    out = shard_set(tmp_path, 10, 2)
    listing = json.loads((out / "shards.json").read_text())
    assert listing["records"] == 10
    assert len(lmdbloader.Reader(str(out))) == 10
    listing["records"] = 12
    (out / "shards.json").write_text(json.dumps(listing))
    with pytest.raises(lmdbloader.CorruptedError, match=r"shards\.json: it says 12 records in all, its parts add up to 10"):
        lmdbloader.Reader(str(out))


def test_shard_list_total_is_checked_against_parts_that_give_no_count(tmp_path):
    """Parts without "records" of their own: the total is checked against
    what the parts hold when they open (999 for 36 was accepted before)."""
    out = shard_set(tmp_path, 36, 3)
    listing = json.loads((out / "shards.json").read_text())
    for part in listing["shards"]:
        del part["records"]
    (out / "shards.json").write_text(json.dumps(listing))
    assert len(lmdbloader.Reader(str(out))) == 36  # the right total still opens
    listing["records"] = 999
    (out / "shards.json").write_text(json.dumps(listing))
    with pytest.raises(lmdbloader.CorruptedError, match=r"shards\.json: it says 999 records in all, its parts hold 36"):
        lmdbloader.Reader(str(out))
    res = subprocess.run(["lmdbloader", "stat", str(out)], capture_output=True, text=True)
    assert res.returncode == 1 and "999" in res.stderr


_FAILING_FSYNC = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <unistd.h>
/* Every fsync of the process fails as a failed write-back does. */
int fsync(int fd) { (void)fd; errno = EIO; return -1; }
"""


def test_a_saved_index_that_cannot_be_synced_is_reported_not_kept(tmp_path):
    """The saved record index goes through the one atomic-write routine:
    synced and closed with both checked. A write-back failure (fsync's EIO,
    put in front of libc here) is reported and leaves no index and no
    temporary file; its own copy of the routine renamed it into place."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the fsync shim")
    (tmp_path / "shim.c").write_text(_FAILING_FSYNC)
    shim = tmp_path / "shim.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(shim), str(tmp_path / "shim.c")], check=True)
    db = str(tmp_path / "db")
    with lmdb.open(db, map_size=1 << 24) as env, env.begin(write=True) as txn:
        for i in range(100):
            txn.put(b"k%03d" % i, b"v" * 100)
    index_dir = tmp_path / "index"
    probe = ("import lmdbloader, sys; r = lmdbloader.Reader(sys.argv[1], index_dir=sys.argv[2]); "
             "print(r.stats()['index_source'])")
    res = subprocess.run([sys.executable, "-c", probe, db, str(index_dir)], capture_output=True, text=True,
                         env={**os.environ, "LD_PRELOAD": str(shim)})
    assert res.returncode == 0, res.stderr
    assert "not saved" in res.stdout and "fsync" in res.stdout and "Input/output error" in res.stdout, res.stdout
    assert not index_dir.exists() or not any(index_dir.rglob("*")) or \
        all(p.is_dir() for p in index_dir.rglob("*")), list(index_dir.rglob("*"))
    # Without the shim the same open saves it.
    res = subprocess.run([sys.executable, "-c", probe, db, str(index_dir)], capture_output=True, text=True)
    assert "saved to" in res.stdout, res.stdout


def test_compat_readers_lists_transactions_as_pylmdb_does(tmp_path):
    path = str(tmp_path / "db")
    with lmdb.open(path) as env, env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    listings = []
    for mod in (lmdb, lmdbloader.compat):
        env = mod.open(path, readonly=True, max_spare_txns=1)
        seen = [env.readers()]
        a = env.begin()
        seen.append(env.readers())
        b = env.begin()
        seen.append(env.readers())
        a.abort()
        seen.append(env.readers())
        b.abort()
        seen.append(env.readers())  # b's slot is freed: one spare kept already
        c = env.begin()
        seen.append(env.readers())
        t = threading.Thread(target=lambda: seen.append(env.begin() and env.readers()))
        t.start()
        t.join()
        c.abort()
        env.close()
        listings.append(seen)
    def threads_numbered(listing):
        # Two runs' threads have different ids: number them by first appearance.
        names = {}
        out = []
        for text in listing:
            lines = []
            for line in text.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[0].isdigit():
                    parts[1] = str(names.setdefault(parts[1], len(names)))
                lines.append(" ".join(parts))
            out.append(lines)
        return out

    assert threads_numbered(listings[1]) == threads_numbered(listings[0])
    assert listings[0][0] != listings[0][1]  # py-lmdb's test_readers: a transaction shows


@pytest.mark.parametrize("suffix, says", [
    (".cpython-314t-x86_64-linux-gnu.so", "install the lmdbloader wheel made for it"),
    (".cpython-39-x86_64-linux-gnu.so", "install the lmdbloader wheel made for it"),
])
def test_an_extension_built_for_another_python_is_named(tmp_path, suffix, says):
    # The package as a wheel for another interpreter lays it out: the same
    # files, the extension under that interpreter's suffix (a GIL build's
    # cp314 extension under 3.14t looks the same from this side).
    package = os.path.dirname(lmdbloader.__file__)
    copy = tmp_path / "lmdbloader"
    shutil.copytree(package, copy, symlinks=False, ignore=shutil.ignore_patterns("__pycache__", "_core*"))
    core = [n for n in os.listdir(package) if n.startswith("_core")]
    assert len(core) == 1
    shutil.copy(os.path.join(package, core[0]), copy / ("_core" + suffix))
    done = subprocess.run([sys.executable, "-c", "import lmdbloader"], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: lmdbloader's compiled extension in ") and str(copy) in last, last
    assert "_core" + suffix in last and "built for another Python" in last and says in last, last
