"""Every valid LMDB file reads as py-lmdb reads it.

Databases are written by py-lmdb itself over every combination of the flags
it can set (named or main database, dupsort, dupfixed, integerkey,
integerdup, reverse_key) and over shapes that move records between LMDB's
page kinds: inline values, overflow values, duplicates inline in a node
(sub-pages, fixed-size P_LEAF2 ones included), duplicates in trees of their
own, 1-byte fixed duplicates, deletes that leave pages allocated past the
end of the file, several transactions, copies made by env.copy (plain and
compacted), files written with other page sizes. Every read path is compared with
py-lmdb's: Reader (by position, key, batch, view), compat (iteration both
ways, get, getmulti, stat). Each in LMDB 0.9's data format and in LMDB
1.0's (py-lmdb 3's lib_version=1). Nothing may be refused and nothing read
differently. A hardened page walker that refuses what liblmdb writes is a
bug, not caution.
"""

import itertools
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

lmdb = pytest.importorskip("lmdb")
import lmdbloader  # noqa: E402
import lmdbloader.compat as compat  # noqa: E402

EXAMPLES = int(os.environ.get("VALID_FILES_EXAMPLES", "300"))


def _flag_combinations():
    # py-lmdb sets no flags on the main database: flags go with a named one.
    combos = [(False, {})]
    for dupsort, integerkey, reverse_key, dupfixed, integerdup in itertools.product([False, True], repeat=5):
        if (dupfixed or integerdup) and not dupsort:
            continue
        if integerkey and reverse_key:
            continue  # liblmdb ignores MDB_REVERSEKEY beside MDB_INTEGERKEY
        flags = {"dupsort": dupsort, "integerkey": integerkey, "reverse_key": reverse_key}
        if dupsort:
            flags.update(dupfixed=dupfixed, integerdup=integerdup)
        combos.append((True, flags))
    return combos


FLAG_COMBINATIONS = _flag_combinations()


@st.composite
def database_specs(draw):
    named, flags = draw(st.sampled_from(FLAG_COMBINATIONS))
    key_size = draw(st.sampled_from([4, 8])) if flags.get("integerkey") else None
    if flags.get("integerdup"):
        value_size = draw(st.sampled_from([4, 8]))
    elif flags.get("dupfixed"):
        value_size = draw(st.sampled_from([1, 2, 3, 4, 8, 16, 100, 500]))
    else:
        value_size = None  # drawn per value
    keys = draw(st.sampled_from([0, 1, 2, 5, 20, 60, 200]))
    # Duplicates per key: a few stay in a sub-page, hundreds move to a tree of their own.
    dups = draw(st.sampled_from([1, 2, 3, 7, 40, 300])) if flags.get("dupsort") else 1
    deletes = draw(st.sampled_from([0.0, 0.3, 0.9]))
    commits = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    # Read as written, or as env.copy() writes it (mdb_env_copy), plain or
    # compacted (pages renumbered, no free pages).
    copy = draw(st.sampled_from([None, "plain", "compact"]))
    # LMDB 0.9's data format or LMDB 1.0's (py-lmdb 3 bundles both).
    lib_version = draw(st.sampled_from([0, 1]))
    return dict(flags=flags, named=named, key_size=key_size, value_size=value_size, keys=keys, dups=dups,
                deletes=deletes, commits=commits, seed=seed, copy=copy, lib_version=lib_version)


def _key(spec, k, rng):
    if spec["key_size"]:
        return struct.pack("=I" if spec["key_size"] == 4 else "=Q", k * 2654435761 % 2**32)
    return b"k%d" % k + rng.randbytes(rng.choice([0, 1, 5, 100]))


def _value(spec, rng, j):
    size = spec["value_size"]
    if spec["flags"].get("integerdup"):
        return struct.pack("=I" if size == 4 else "=Q", rng.randrange(2**(8 * size)))
    if size:
        return rng.randbytes(size)
    if spec["flags"].get("dupsort"):  # duplicates are keys of their own: 1..511 bytes
        return bytes([j % 256]) * rng.choice([1, 2, 30, 400])
    return bytes([j % 256]) * rng.choice([0, 1, 10, 1000, 2100, 5000, 20000])


def write_database(spec, path):
    import random

    rng = random.Random(spec["seed"])
    env = lmdb.open(path, max_dbs=4, map_size=1 << 28, lib_version=spec.get("lib_version", 0))
    name = b"data" if spec["named"] else None
    db = env.open_db(name, **spec["flags"]) if name else env.open_db(None)
    keys = [_key(spec, k, rng) for k in range(spec["keys"])]
    per_commit = max(1, len(keys) // spec["commits"] + 1)
    for start in range(0, max(len(keys), 1), per_commit):
        with env.begin(write=True, db=db) as txn:
            for k in keys[start:start + per_commit]:
                for j in range(spec["dups"]):
                    txn.put(k, _value(spec, rng, j), db=db)
    if spec["deletes"]:
        with env.begin(write=True, db=db) as txn:
            for k in keys:
                if rng.random() < spec["deletes"]:
                    if spec["flags"].get("dupsort") and rng.random() < 0.5:
                        cur = txn.cursor(db=db)
                        if cur.set_key(k):
                            cur.delete()  # one duplicate
                    else:
                        txn.delete(k, db=db)
    env.close()
    return name


def expected_items(path, name, flags):
    env = lmdb.open(path, readonly=True, lock=False, max_dbs=4)
    db = env.open_db(name, **flags, create=False) if name else env.open_db(None)
    with env.begin(db=db) as txn:
        items = list(txn.cursor())
        nodup = list(txn.cursor().iternext_nodup())
        backwards = list(txn.cursor().iterprev())
        stat = txn.stat(db)
        multi = None
        if flags.get("dupfixed"):
            multi = txn.cursor().getmulti(sorted({k for k, _ in items})[:5], dupdata=True)
    env.close()
    return items, nodup, backwards, stat, multi


def check_compat(path, name, flags, items, nodup, backwards, stat, multi, moves_by_key=True):
    env = compat.open(path, readonly=True, lock=False, max_dbs=4)
    try:
        db = env.open_db(name, **flags, create=False) if name else env.open_db(None)
        with env.begin(db=db) as txn:
            assert list(txn.cursor()) == items
            if moves_by_key:
                assert list(txn.cursor().iternext_nodup()) == nodup
            assert list(txn.cursor().iterprev()) == backwards
            assert txn.stat(db)["entries"] == stat["entries"]
            firsts = {}
            for k, v in items:
                firsts.setdefault(k, v)
            for k, v in firsts.items():
                assert txn.get(k) == v
            if multi is not None:
                assert txn.cursor().getmulti(sorted(firsts)[:5], dupdata=True) == multi
    finally:
        env.close()


def check_reader(path, name, items, mode):
    with lmdbloader.Reader(path, db=name.decode() if name else None, mode=mode, index_dir="none") as r:
        assert len(r) == len(items)
        assert [r[i] for i in range(len(r))] == [v for _, v in items]
        assert [r.key(i) for i in range(len(r))] == [k for k, _ in items]
        order = list(range(len(r)))[::-1]
        assert r.get_batch(order) == [items[i][1] for i in order]
        firsts = {}
        for k, v in items:
            firsts.setdefault(k, v)
        for k, v in list(firsts.items())[:20]:
            assert r.get(k) == v
        if mode == "mmap":
            assert [bytes(r.view(i)) for i in range(len(r))] == [v for _, v in items]


COPY_WITH_PYLMDB = r"""
import lmdb, sys
with lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=4) as env:
    env.copy(sys.argv[2], compact=sys.argv[3] == "compact")
"""


def check_database(spec):
    tmp = tempfile.mkdtemp(prefix="lmdbloader-valid-")
    try:
        path = os.path.join(tmp, "db")
        name = write_database(spec, path)
        if spec.get("copy"):
            copied = os.path.join(tmp, "copy")
            os.mkdir(copied)
            # In a child: liblmdb's copy itself crashes on some databases
            # (SIGSEGV in mdb_env_copy2, py-lmdb 3.0's liblmdb 0.9.36); those
            # are read as written.
            made = subprocess.run([sys.executable, "-c", COPY_WITH_PYLMDB, path, copied, spec["copy"]],
                                  capture_output=True)
            if made.returncode == 0:
                path = copied
        expected = expected_items(path, name, spec["flags"])
        check_compat(path, name, spec["flags"], *expected)
        for mode in ("pread", "mmap"):
            check_reader(path, name, expected[0], mode)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(database_specs())
def test_every_database_pylmdb_writes_reads_as_pylmdb_reads_it(spec):
    check_database(spec)


@pytest.mark.parametrize("lib_version", [0, 1])
@pytest.mark.parametrize("value_size", [1, 2, 3, 100])
def test_fixed_size_duplicates_in_sub_pages_read(value_size, lib_version):
    # 1-byte entries move a P_LEAF2 sub-page's mp_upper past its end: still valid.
    check_database(dict(flags={"dupsort": True, "dupfixed": True, "integerkey": False, "reverse_key": False},
                        named=True, key_size=None, value_size=value_size, keys=5, dups=3, deletes=0.0,
                        commits=1, seed=1, lib_version=lib_version))


# Every page kind in LMDB 1.0's format at least once: odd key lengths (1.0
# pads them), overflow values, sub-pages, trees of duplicates, named databases.
@pytest.mark.parametrize("named,flags,dups,value_size", [
    (False, {}, 1, None),
    (True, {"dupsort": False, "integerkey": True, "reverse_key": False}, 1, None),
    (True, {"dupsort": True, "dupfixed": False, "integerdup": False, "integerkey": False, "reverse_key": True}, 7, None),
    (True, {"dupsort": True, "dupfixed": False, "integerdup": False, "integerkey": False, "reverse_key": False}, 300, None),
    (True, {"dupsort": True, "dupfixed": True, "integerdup": True, "integerkey": False, "reverse_key": False}, 40, 8),
])
def test_lmdb_1_0_files_read_as_pylmdb_reads_them(named, flags, dups, value_size):
    for copy in (None, "compact"):
        check_database(dict(flags=flags, named=named, key_size=4 if flags.get("integerkey") else None,
                            value_size=value_size, keys=60, dups=dups, deletes=0.3, commits=3, seed=11, copy=copy,
                            lib_version=1))


def test_an_lmdb_1_0_file_under_lock_true_is_refused_naming_why(tmp_path):
    path = str(tmp_path / "db")
    with lmdb.open(path, map_size=1 << 22, lib_version=1) as env, env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    assert lmdbloader.Reader(path, index_dir="none")[0] == b"v"
    with pytest.raises(lmdbloader.UnsupportedError, match=r"data\.mdb with lock=True: an LMDB 1\.0 file"):
        lmdbloader.Reader(path, lock=True)


@pytest.mark.parametrize("what", ["encrypted", "checksums"])
def test_lmdb_1_0_encryption_and_page_checksums_are_refused_naming_them(tmp_path, what):
    """py-lmdb writes neither; liblmdb 1.0 marks them in the meta page (the
    MDB_ENCRYPT flag) and in page 0's last 2 bytes (the checksum size)."""
    path = str(tmp_path / "db")
    with lmdb.open(path, map_size=1 << 22, lib_version=1) as env, env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    with open(os.path.join(path, "data.mdb"), "r+b") as f:
        if what == "encrypted":
            for page in (0, 1):  # the free tree's md_flags: after the header, magic, version, address, map size
                f.seek(page * 4096 + 24 + 24 + 4)
                flags = struct.unpack("<H", f.read(2))[0]
                f.seek(page * 4096 + 24 + 24 + 4)
                f.write(struct.pack("<H", flags | 0x2000))
        else:
            f.seek(4096 - 2)
            f.write(struct.pack("<H", 16))
    with pytest.raises(lmdbloader.UnsupportedError, match="encrypted" if what == "encrypted" else "checksums"):
        lmdbloader.Reader(path, index_dir="none")


def test_meta_page_counting_pages_past_the_end_of_the_file_reads(tmp_path):
    # liblmdb counts pages a transaction allocated and freed again without
    # writing them (seen after deletes): the meta page's last page then lies
    # past the file's end. Made here by raising both meta pages' count, which
    # liblmdb itself reads without complaint; every page the trees reach is
    # still inside the file.
    spec = dict(flags={"dupsort": True, "dupfixed": False, "integerdup": False, "integerkey": False,
                       "reverse_key": False}, named=True, key_size=None, value_size=None, keys=40, dups=7,
                deletes=0.3, commits=2, seed=3)
    path = str(tmp_path / "db")
    name = write_database(spec, path)
    with open(os.path.join(path, "data.mdb"), "r+b") as f:
        for page in (0, 1):
            f.seek(page * 4096 + 136)
            last = struct.unpack("<Q", f.read(8))[0]
            f.seek(page * 4096 + 136)
            f.write(struct.pack("<Q", last + 9))
    expected = expected_items(path, name, spec["flags"])
    check_compat(path, name, spec["flags"], *expected)
    for mode in ("pread", "mmap"):
        check_reader(path, name, expected[0], mode)


def test_a_tree_reaching_past_the_end_of_the_file_is_truncation(tmp_path):
    spec = dict(flags={"dupsort": False, "integerkey": False, "reverse_key": False}, named=False, key_size=None,
                value_size=None, keys=60, dups=1, deletes=0.0, commits=1, seed=5)
    path = str(tmp_path / "db")
    write_database(spec, path)
    data = os.path.join(path, "data.mdb")
    os.truncate(data, os.path.getsize(data) - 4096)
    with pytest.raises(lmdbloader.CorruptedError, match=r"data\.mdb.*past the end of the file \(truncated"):
        lmdbloader.Reader(path, index_dir="none")


@pytest.mark.parametrize("sizes", [(1,), (2,), (3,), (5,), (6,), (4,), (8,), (4, 8)])
@pytest.mark.parametrize("dups", [False, True])
def test_integer_keys_and_duplicates_of_any_size_read_as_pylmdb_reads_them(tmp_path, sizes, dups):
    # lmdb.h wants them 4 or 8 bytes, all of one size; py-lmdb writes any, and
    # liblmdb orders them by bytes past the key: read in page order, never "damaged".
    import random
    rng = random.Random(len(sizes) * 10 + sizes[0])
    path = str(tmp_path / "db")
    env = lmdb.open(path, max_dbs=2, map_size=1 << 26)
    flags = dict(integerkey=True, dupsort=True, integerdup=True) if dups else dict(integerkey=True)
    db = env.open_db(b"ints", **flags)
    with env.begin(write=True, db=db) as txn:
        for _ in range(400):
            key = bytes(rng.randrange(256) for _ in range(rng.choice(sizes)))
            txn.put(key, bytes(rng.randrange(256) for _ in range(rng.choice(sizes))) if dups else b"v" * 50)
    env.close()
    expected = expected_items(path, b"ints", flags)
    # liblmdb's moves from key to key (MDB_NEXT_NODUP) compare duplicates of
    # the wrong size by bytes past them, and then visit a key twice: compared
    # only where the sizes are lmdb.h's.
    check_compat(path, b"ints", flags, *expected, moves_by_key=not dups or set(sizes) <= {4, 8})
    for mode in ("pread", "mmap"):
        check_reader(path, b"ints", expected[0], mode)


# LMDB's page size is the writer's OS page size: 4 KiB here, 16 KiB on some
# arm64 kernels, 64 KiB on others (liblmdb caps it at 32 KiB). Files written
# there must read here. py-lmdb writes them under a shim that makes sysconf
# report another page size (LD_PRELOAD, built with the system's C compiler).
PAGE_SIZE_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
long sysconf(int name) {
  static long (*real)(int);
  if (!real) real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
  const char* size = getenv("SHIM_PAGE_SIZE");
  return name == _SC_PAGESIZE && size ? atol(size) : real(name);
}
"""

WRITE_UNDER_SHIM = r"""
import lmdb, random, sys
path, named, dupsort = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
rng = random.Random(7)
env = lmdb.open(path, max_dbs=4, map_size=1 << 27)
db = env.open_db(b"data", dupsort=dupsort) if named else env.open_db(None)
with env.begin(write=True, db=db) as txn:
    for i in range(1500):
        for j in range(3 if dupsort else 1):
            size = rng.choice([0, 5, 300, 3000, 40000]) if not dupsort else rng.randrange(1, 200)
            txn.put(b"k%05d" % i, bytes([j]) + rng.randbytes(size), db=db)
print(env.stat()["psize"])
env.close()
"""


@pytest.fixture(scope="module")
def page_size_shim(tmp_path_factory):
    import subprocess
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the page-size shim")
    d = tmp_path_factory.mktemp("shim")
    (d / "shim.c").write_text(PAGE_SIZE_SHIM)
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(d / "shim.so"), str(d / "shim.c"), "-ldl"], check=True)
    return str(d / "shim.so")


@pytest.mark.parametrize("page_size", [8192, 16384, 32768, 65536])
@pytest.mark.parametrize("named,dupsort", [(False, False), (True, False), (True, True)])
def test_files_written_with_other_page_sizes_read_as_pylmdb_reads_them(tmp_path, page_size_shim, page_size,
                                                                       named, dupsort):
    import subprocess
    import sys
    path = str(tmp_path / "db")
    env = dict(os.environ, LD_PRELOAD=page_size_shim, SHIM_PAGE_SIZE=str(page_size))
    res = subprocess.run([sys.executable, "-c", WRITE_UNDER_SHIM, path, str(int(named)), str(int(dupsort))],
                         env=env, capture_output=True, text=True, check=True)
    assert int(res.stdout.split()[-1]) == min(page_size, 32768), res.stdout  # liblmdb's own cap
    name = b"data" if named else None
    flags = {"dupsort": True} if dupsort else {}
    expected = expected_items(path, name, flags)
    check_compat(path, name, flags, *expected)
    for mode in ("pread", "mmap"):
        check_reader(path, name, expected[0], mode)
