"""Each damaged input and bad argument gets the right exception (or exit
status) and a message naming the file and the problem, never a crash."""

import json
import os
import struct
import subprocess
import sys

import lmdb
import numpy as np
import pytest

import lmdbloader
import lmdbloader.compat


def write_corpus(path, n=6, **manifest):
    with lmdbloader.CorpusWriter(path, manifest=manifest or None) as w:
        for i in range(n):
            w.add(f"n{i}", {"x": i}, label=i)
    return path


def edit_metadata(path, key, value, drop_manifest_checksum=True):
    """Rewrites a metadata value with py-lmdb (the way a damaged or hand-edited corpus looks)."""
    with lmdb.open(path, lock=False) as env, env.begin(write=True) as txn:
        txn.put(b"__lmdbloader__/" + key, value)
        if drop_manifest_checksum:
            txn.delete(b"__lmdbloader__/manifest.xxh3")


def manifest_of(path):
    with lmdb.open(path, readonly=True, lock=False) as env, env.begin() as txn:
        return json.loads(txn.get(b"__lmdbloader__/manifest"))


def test_empty_data_file_is_corrupted_error_naming_it(tmp_path):
    os.makedirs(tmp_path / "db")
    (tmp_path / "db" / "data.mdb").write_bytes(b"")
    with pytest.raises(lmdbloader.CorruptedError, match=r"db/data.mdb: not an LMDB file \(it is empty\)"):
        lmdbloader.Reader(str(tmp_path / "db"))


def test_last_page_past_the_file_is_corrupted_error_not_enomem(tmp_path):
    path = str(tmp_path / "db")
    with lmdb.open(path, map_size=1 << 20) as env, env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    data = tmp_path / "db" / "data.mdb"
    b = bytearray(data.read_bytes())
    newer = 4096 if struct.unpack_from("<Q", b, 4096 + 144)[0] > struct.unpack_from("<Q", b, 144)[0] else 0
    struct.pack_into("<Q", b, newer + 136, 1 << 40)
    data.write_bytes(bytes(b))
    with pytest.raises(lmdbloader.CorruptedError, match=r"data.mdb: truncated or damaged: meta page \d says the last page"):
        lmdbloader.Reader(path)


@pytest.mark.parametrize("edit,message", [
    (lambda m: b"{not json", "not a corpus manifest|manifest"),
    (lambda m: json.dumps({**m, "records": None}).encode(), "'records' is not a non-negative integer"),
    (lambda m: json.dumps({**m, "records": "6"}).encode(), "'records' is not a non-negative integer"),
    (lambda m: json.dumps({**m, "columns": {"label": {"dtype": "<U5"}}}).encode(), "column 'label' has no dtype of <i8 or <f8"),
    (lambda m: json.dumps({**m, "checksums": {**m["checksums"], "algorithm": "md5"}}).encode(), "checksum algorithm"),
])
def test_damaged_manifest_is_an_error_naming_the_file(tmp_path, edit, message):
    path = write_corpus(str(tmp_path / "c"))
    edit_metadata(path, b"manifest", edit(manifest_of(path)))
    with pytest.raises(lmdbloader.Error, match=f"corpus .*c/data.mdb: .*({message})"):
        lmdbloader.Reader(path)
    res = subprocess.run(["lmdbloader", "verify", path], capture_output=True, text=True)
    assert res.returncode == 1 and "data.mdb" in res.stderr, res.stderr


def test_plain_json_manifest_without_format_is_a_plain_lmdb(tmp_path):
    path = str(tmp_path / "db")
    with lmdb.open(path, map_size=1 << 20) as env, env.begin(write=True) as txn:
        txn.put(b"__lmdbloader__/manifest", b"[1, 2]")
        txn.put(b"a", b"1")
    r = lmdbloader.Reader(path)
    assert len(r) == 2 and r.manifest is None and r.get(b"__lmdbloader__/manifest") == b"[1, 2]"


def test_column_of_the_wrong_size_is_corrupted_error(tmp_path):
    path = write_corpus(str(tmp_path / "c"))
    edit_metadata(path, b"column/label", b"\x00" * 13, drop_manifest_checksum=False)
    with pytest.raises(lmdbloader.CorruptedError, match="c/data.mdb: column 'label' holds 13 bytes for 6 records"):
        lmdbloader.Reader(path)


def test_damaged_column_bytes_are_corrupted_error_on_read(tmp_path):
    path = write_corpus(str(tmp_path / "c"))
    edit_metadata(path, b"column/label", struct.pack("<6q", 9, 9, 9, 9, 9, 9), drop_manifest_checksum=False)
    r = lmdbloader.Reader(path)
    with pytest.raises(lmdbloader.CorruptedError, match="c/data.mdb: column/label is damaged"):
        r.column("label")


def test_huge_and_odd_arguments_get_python_errors_not_pybind_signature_errors(tmp_path):
    path = write_corpus(str(tmp_path / "c"))
    r = lmdbloader.Reader(path)
    for bad in (2**64, -2**64, 2**70, 6, -7):
        with pytest.raises(IndexError, match=f"index {bad} out of range for .*c \\(6 records\\)"):
            r[bad]
        with pytest.raises(IndexError, match="out of range"):
            r.get_batch([0, bad])
        with pytest.raises(IndexError, match="out of range"):
            r.decode_batch([bad])
    assert r.decode(np.uint64(2)) == r.decode(2)
    with pytest.raises(ValueError, match="rss_budget must be below 2\\*\\*64"):
        lmdbloader.Reader(path, rss_budget=2**64)
    assert lmdbloader.Reader(path, rss_budget=np.int64(1 << 24)).rss_budget == 1 << 24
    with pytest.raises(ValueError, match="rss_budget: byte size '0.4' is not a whole number of bytes"):
        lmdbloader.Reader(path, rss_budget="0.4")
    with pytest.raises(ValueError, match="rss_budget"):
        lmdbloader.Reader(path, rss_budget=1.5)
    with pytest.raises(lmdbloader.ConvertError, match="num_shards must be between 1 and 99999, got -1"):
        lmdbloader.convert(tmp_path, tmp_path / "x", kind="image_folder", num_shards=-1)
    with pytest.raises(lmdbloader.ConvertError, match="seed must be between"):
        lmdbloader.convert(tmp_path, tmp_path / "x", kind="image_folder", seed=2**64)
    r.close()
    assert r.path == path
    with pytest.raises(ValueError, match="closed"):
        r[0]


def _shard_set(tmp_path):
    src = tmp_path / "src"
    for c in range(2):
        os.makedirs(src / f"c{c}")
        for i in range(5):
            (src / f"c{c}" / f"{i}.jpg").write_bytes(b"img%d%d" % (c, i))
    out = tmp_path / "set"
    for k in range(2):
        subprocess.run(["lmdbloader", "convert", "--from", "image_folder", str(src), str(out),
                        "--num-shards", "2", "--shard-index", str(k), "--no-progress"], check=True)
    subprocess.run(["lmdbloader", "shard-list", str(out)], check=True)
    return str(out)


def test_stat_of_a_shard_set_sums_its_parts(tmp_path):
    path = _shard_set(tmp_path)
    res = subprocess.run(["lmdbloader", "stat", path, "--json"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    stat = json.loads(res.stdout)
    assert stat["records"] == 10 and stat["corpus"]
    env = lmdbloader.compat.open(path, readonly=True, lock=False)
    assert env.stat()["entries"] >= 10


def test_compat_cursor_misses_over_a_shard_set_move_on_without_error(tmp_path):
    # A failed lookup reads the tree's leaf layout to place the cursor as
    # liblmdb would; a shard set has no single tree, and that must not fail.
    # The answers are py-lmdb's over one LMDB holding the same keys.
    lmdb = pytest.importorskip("lmdb")
    path = _shard_set(tmp_path)
    env = lmdbloader.compat.open(path, readonly=True, lock=False)
    with env.begin() as txn:
        keys = [k for k, _ in txn.cursor()]
    assert len(keys) == 10
    single = lmdb.open(str(tmp_path / "single"), map_size=1 << 20)
    with single.begin(write=True) as txn:
        for k in keys:
            txn.put(k, b"")

    def moves(e):
        with e.begin() as txn:
            cur = txn.cursor()
            missing = keys[3] + b"\x00"
            return [cur.set_key(missing), cur.next(), cur.key(), cur.set_key(b"\xff"), cur.prev(), cur.key(),
                    cur.set_range(missing), cur.key()]

    assert moves(env) == moves(single)
    env.close()
    single.close()


def test_shard_set_with_more_parts_than_the_soft_descriptor_limit(tmp_path):
    """Each part holds a descriptor: a set larger than the soft limit (1,024 by
    default) opens by raising it to the hard limit, and where the hard limit
    is too low the error names the part and the limit."""
    import resource
    parts = 300
    os.makedirs(tmp_path / "set")
    for k in range(parts):
        with lmdbloader.CorpusWriter(tmp_path / "set" / f"part-{k:05d}-of-{parts:05d}") as w:
            w.add(f"r{k}", b"%05d" % k, label=k)
    subprocess.run(["lmdbloader", "shard-list", str(tmp_path / "set")], check=True, capture_output=True)
    script = ("import lmdbloader; r = lmdbloader.Reader(%r, index_dir='none'); "
              "assert [r[i] for i in range(len(r))] == [b'%%05d' %% k for k in range(%d)]; "
              "assert sorted(r.get_batch(list(range(%d)))) == [b'%%05d' %% k for k in range(%d)]"
              % (str(tmp_path / "set"), parts, parts, parts))

    def limit(soft, hard):
        return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 2 * parts:
        pytest.skip(f"hard descriptor limit {hard} is below what the test needs")
    ok = subprocess.run([sys.executable, "-c", script], preexec_fn=limit(128, 2 * parts), capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    low = subprocess.run(["lmdbloader", "scan", str(tmp_path / "set")], preexec_fn=limit(128, 128),
                         capture_output=True, text=True)
    assert low.returncode == 1
    assert "part-00" in low.stderr and "Too many open files" in low.stderr and "ulimit" in low.stderr, low.stderr


def test_shard_list_refuses_a_plain_lmdb_part(tmp_path):
    out = tmp_path / "set"
    os.makedirs(out)
    with lmdb.open(str(out / "part-00000-of-00001"), map_size=1 << 20) as env, env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    res = subprocess.run(["lmdbloader", "shard-list", str(out)], capture_output=True, text=True)
    assert res.returncode == 1 and "part-00000-of-00001: not an lmdbloader corpus" in res.stderr, res.stderr
    assert not (out / "shards.json").exists()


def test_get_output_into_a_missing_folder_says_why_and_leaves_nothing(tmp_path):
    path = write_corpus(str(tmp_path / "c"))
    target = tmp_path / "missing" / "out.bin"
    res = subprocess.run(["lmdbloader", "get", path, "--index", "1", "-o", str(target)], capture_output=True, text=True)
    assert res.returncode == 1 and "No such file or directory" in res.stderr and "missing/out.bin" in res.stderr
    ok = subprocess.run(["lmdbloader", "get", path, "--index", "1", "-o", str(tmp_path / "one.bin")])
    assert ok.returncode == 0 and (tmp_path / "one.bin").read_bytes() == lmdbloader.Reader(path)[1]


def test_a_fifo_under_a_data_index_or_shard_list_name_is_refused_without_waiting(tmp_path):
    """Opening a FIFO for reading waits for a writer: the open would hang.
    A FIFO as data.mdb or shards.json is refused naming it; one as the saved
    index is not trusted, and the index is rebuilt."""
    plain = tmp_path / "plain"
    os.makedirs(plain)
    os.mkfifo(plain / "data.mdb")
    corpus = write_corpus(str(tmp_path / "c"))
    os.unlink(os.path.join(corpus, "lmdbloader.idx"))
    os.mkfifo(os.path.join(corpus, "lmdbloader.idx"))
    shard_set = tmp_path / "set"
    os.makedirs(shard_set)
    os.mkfifo(shard_set / "shards.json")
    for path, name in ((plain, "data.mdb"), (shard_set, "shards.json")):
        res = subprocess.run(["lmdbloader", "stat", str(path)], capture_output=True, text=True, timeout=60)
        assert res.returncode == 1 and f"{name}: not a regular file (a FIFO)" in res.stderr, res.stderr
        probe = f"import lmdbloader\ntry:\n lmdbloader.Reader({str(path)!r})\nexcept ValueError as e:\n print(e)"
        res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
        assert f"{name}: not a regular file (a FIFO)" in res.stdout, res
    res = subprocess.run([sys.executable, "-c", f"import lmdbloader; print(len(lmdbloader.Reader({corpus!r})))"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == str(len(lmdbloader.Reader(corpus))), res


def test_get_refuses_a_negative_or_missing_position_with_usage_status(tmp_path):
    path = write_corpus(str(tmp_path / "c"))
    for bad in ["-1", "1.5", "", "0x10", " 3"]:
        res = subprocess.run(["lmdbloader", "get", path, "--index", bad], capture_output=True, text=True)
        assert res.returncode == 2 and f"--index must be a whole number, 0 or more, got '{bad}'" in res.stderr, res
        assert res.stdout == "", res
    # Past the end, also past 2^64 - 1: out of range, with the number as given (not a clamped one).
    for past in ["99999", "18446744073709551615", "99999999999999999999"]:
        res = subprocess.run(["lmdbloader", "get", path, "--index", past], capture_output=True, text=True)
        assert res.returncode == 1 and f"index {past} out of range for {path} (6 records)" in res.stderr, res.stderr
    res = subprocess.run(["lmdbloader", "get", path, "--key", "nosuch"], capture_output=True, text=True)
    assert res.returncode == 1 and f"key 'nosuch' not found in {path}" in res.stderr, res.stderr
    res = subprocess.run(["lmdbloader", "get", path, "--key-hex", "00ff"], capture_output=True, text=True)
    assert res.returncode == 1 and f"key 0x00ff not found in {path}" in res.stderr, res.stderr


@pytest.mark.parametrize("args, message", [
    (["bogus"], "unknown command 'bogus' (the commands: get, scan, stat, verify, convert, shard-list)"),
    (["scan", "{path}", "--batch", "0"], "--batch must be at least 1, got 0"),
    (["scan", "{path}", "--passes", "0"], "--passes must be at least 1, got 0"),
    (["scan", "{path}", "--order", "sideways"], "--order must be random or key, got 'sideways'"),
    (["scan", "{path}", "--queue-depth", "-1"], "--queue-depth"),
    (["scan", "{path}", "--batch", "99999999999"], "--batch"),
])
def test_command_usage_errors_exit_2_naming_the_option(tmp_path, args, message):
    path = write_corpus(str(tmp_path / "c"))
    res = subprocess.run(["lmdbloader"] + [a.format(path=path) for a in args], capture_output=True, text=True)
    assert res.returncode == 2 and message in res.stderr, res


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_get_to_a_full_disk_says_no_space(tmp_path):
    path = write_corpus(str(tmp_path / "c"))
    with open("/dev/full", "wb") as full:
        res = subprocess.run(["lmdbloader", "get", path, "--index", "1"], stdout=full, stderr=subprocess.PIPE, text=True)
    assert res.returncode == 1 and "No space left on device" in res.stderr, res.stderr


def test_json_output_survives_paths_that_are_not_utf8(tmp_path):
    path = os.path.join(os.fsencode(str(tmp_path)), b"d\xffb")
    with lmdb.open(path, map_size=1 << 20) as env, env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    for cmd in (b"stat", b"verify", b"scan"):
        res = subprocess.run([b"lmdbloader", cmd, path, b"--json"], capture_output=True)
        assert res.returncode == 0, res.stderr
        json.loads(res.stdout)


@pytest.mark.parametrize("mode", ["pread", "mmap"])
def test_damaged_record_is_corrupted_error_unless_checks_are_skipped(tmp_path, mode):
    path = str(tmp_path / "c")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(8):
            w.add(f"n{i}", {"image": bytes([i]) * 3000})
    data = tmp_path / "c" / "data.mdb"
    b = bytearray(data.read_bytes())
    at = b.find(bytes([5]) * 3000) + 1000
    b[at] ^= 0x40
    data.write_bytes(bytes(b))
    r = lmdbloader.Reader(path, mode=mode)
    with pytest.raises(lmdbloader.CorruptedError, match=r"record 5 of .*c/data.mdb is damaged: its checksum"):
        r[5]
    with pytest.raises(lmdbloader.CorruptedError, match="record 5 of"):
        r.decode_batch([4, 5])
    ds = lmdbloader.LmdbDataset(path, mode=mode)
    with pytest.raises(lmdbloader.CorruptedError, match="record 5 of"):
        ds.__getitems__([5])
    assert r[4] == lmdbloader.Reader(path, verify_checksums=False)[4]
    damaged = lmdbloader.LmdbDataset(path, mode=mode, verify_checksums=False)[5]["image"]
    assert damaged != bytes([5]) * 3000 and len(damaged) == 3000
    res = subprocess.run(["lmdbloader", "verify", path], capture_output=True, text=True)
    assert res.returncode == 1 and "record 5" in res.stderr
    res = subprocess.run(["lmdbloader", "get", path, "--index", "5", "--no-verify-checksums"], capture_output=True)
    assert res.returncode == 0
    # Checking once still catches damage on every read that would hand it out.
    import msgpack
    once = lmdbloader.LmdbDataset(path, mode=mode, verify_checksums="once", views=mode == "mmap",
                                  decode=lambda raw: msgpack.unpackb(raw)["image"])
    for _ in range(2):
        with pytest.raises(lmdbloader.CorruptedError, match="record 5 of"):
            once.__getitems__([4, 5])
    assert once.__getitems__([4, 6]) == [bytes([4]) * 3000, bytes([6]) * 3000]
    res = subprocess.run(["lmdbloader", "scan", path, "--verify-checksums-once"], capture_output=True, text=True)
    assert res.returncode == 1 and "record 5" in res.stderr


@pytest.mark.parametrize("mode", ["pread", "mmap"])
def test_a_paged_corpus_reads_its_checksums_from_the_file_and_catches_damage(tmp_path, mode):
    # Under a paged index a corpus's record checksums stay in the file (8
    # bytes a record never held): each read brings its record's sum with it.
    path = str(tmp_path / "c")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(600):
            w.add(f"n{i:04d}", {"image": bytes([i % 251]) * 3000})
    data = tmp_path / "c" / "data.mdb"
    b = bytearray(data.read_bytes())
    at = b.find(bytes([5]) * 3000) + 1000
    b[at] ^= 0x40
    data.write_bytes(bytes(b))
    index_dir = str(tmp_path / "idx")
    r = lmdbloader.Reader(path, mode=mode, index_mode="paged", index_dir=index_dir)
    stats = r.stats()
    assert stats["index_residence"] == "paged" and stats["checksum_bytes"] == 0
    with pytest.raises(lmdbloader.CorruptedError, match=r"record 5 of .*c/data.mdb is damaged: its checksum"):
        r[5]
    with pytest.raises(lmdbloader.CorruptedError, match="record 5 of"):
        r.get_batch([4, 5, 300])
    with pytest.raises(lmdbloader.CorruptedError, match="record 5 of"):
        lmdbloader.LmdbDataset(path, mode=mode, index_mode="paged", index_dir=index_dir).__getitems__([599, 5])
    held = lmdbloader.Reader(path, index_mode="resident", index_dir=index_dir)
    good = [i for i in range(600) if i != 5]
    assert r.get_batch(good) == held.get_batch(good)
    once = lmdbloader.Reader(path, mode=mode, index_mode="paged", index_dir=index_dir, verify_checksums="once")
    for _ in range(2):
        with pytest.raises(lmdbloader.CorruptedError, match="record 5 of"):
            once.get_batch([4, 5])
        assert once.get_batch([4, 6]) == held.get_batch([4, 6])


@pytest.mark.parametrize("value", ["false", "yes", ""])
def test_verify_checksums_refuses_strings_other_than_once(tmp_path, value):
    path = str(tmp_path / "c")
    with lmdbloader.CorpusWriter(path) as w:
        w.add("n", b"x")
    with pytest.raises(ValueError, match='verify_checksums must be True, False or "once"'):
        lmdbloader.Reader(path, verify_checksums=value)
