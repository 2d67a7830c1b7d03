"""Transient storage errors over the network file system emulation
(bench/netfs.c with --fail-control): a read that the storage fails with EIO
a few times is made again and returns every record as py-lmdb reads it, from
the same Reader; a failure that lasts is an OSError with errno EIO naming
the file, never "shrank", and once the storage answers again the same Reader
reads correctly. pread and mmap modes, the data's pages and the meta pages
that a plain LMDB's reads check after each batch."""

import errno
import os
import sys

import lmdb
import pytest

import lmdbloader

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import netfs  # noqa: E402

_reason = netfs.unavailable()
pytestmark = pytest.mark.skipif(_reason is not None, reason=f"cannot emulate a network file system: {_reason}")

RECORDS = 200
PAGE = 4096


def value(i):
    size = 20 + (i * 7919) % 9000  # inline and on overflow pages
    return (i.to_bytes(4, "little") * (size // 4 + 1))[:size]


@pytest.fixture(scope="module")
def mounted(tmp_path_factory):
    backing = tmp_path_factory.mktemp("eio-backing")
    with lmdb.open(str(backing / "db"), map_size=64 << 20) as env, env.begin(write=True) as txn:
        for i in range(RECORDS):
            txn.put(b"k%05d" % i, value(i))
    binary = netfs.build(str(tmp_path_factory.mktemp("eio-bin")))
    try:
        m = netfs.Mount(str(backing), binary=binary, latency_ms=0, in_flight=8, inject_errors=True)
    except RuntimeError as e:
        pytest.skip(f"this sandbox refuses FUSE mounts: {e}")
    yield m, str(backing)
    m.close()


def evicted(m, backing):
    data = m.path("db", "data.mdb")
    netfs.evict([data])
    netfs.evict([os.path.join(backing, "db", "data.mdb")])
    return data


WANT = [value(i) for i in range(RECORDS)]


@pytest.mark.parametrize("mode", ["pread", "mmap"])
@pytest.mark.parametrize("where", ["meta pages", "data pages"])
def test_two_failed_reads_then_the_same_reader_reads_every_record(mounted, tmp_path, mode, where):
    m, backing = mounted
    evicted(m, backing)
    r = lmdbloader.Reader(m.path("db"), mode=mode, index_dir=str(tmp_path))
    # Opening read the meta pages into the cache: gone again, so that the
    # reads below ask the storage.
    evicted(m, backing)
    before = m.stats()["read_errors"]
    span = (0, 2 * PAGE) if where == "meta pages" else (2 * PAGE, os.path.getsize(os.path.join(backing, "db", "data.mdb")))
    m.fail_next_reads(2, offset=span[0], length=span[1] - span[0])
    assert r.get_batch(list(range(RECORDS))) == WANT
    assert [r[i] for i in range(0, RECORDS, 7)] == WANT[::7]
    assert m.stats()["read_errors"] - before == 2, "the storage failed fewer reads than asked"


@pytest.mark.parametrize("mode", ["pread", "mmap"])
def test_a_lasting_failure_is_eio_naming_the_file_and_passes_when_the_storage_answers(mounted, tmp_path, mode):
    m, backing = mounted
    r = lmdbloader.Reader(m.path("db"), mode=mode, index_dir=str(tmp_path))
    evicted(m, backing)
    m.fail_next_reads(10_000)
    with pytest.raises(OSError) as caught:
        r.get_batch(list(range(RECORDS)))
    assert caught.value.errno == errno.EIO, caught.value
    assert "data.mdb" in str(caught.value) and "shrank" not in str(caught.value), caught.value
    m.fail_next_reads(0)  # the storage answers again
    assert r.get_batch(list(range(RECORDS))) == WANT
