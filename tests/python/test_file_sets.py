"""Many ordinary LMDB files read as one dataset: a folder, a glob, a list.

1,500 files written by py-lmdb (half folders holding data.mdb, half single
files), read under `ulimit -n 256` (a cluster's default is often 1,024) by a
Reader and by LmdbDataset through every DataLoader start method: every record
equal to py-lmdb's, in order.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap

import lmdb
import pytest

import lmdbloader

FILES = 1500
MiB = 1 << 20


def statm_rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

PER_FILE = 4


def value_of(f, r):
    return b"file %05d record %d " % (f, r) + bytes([f % 251]) * (r * 7)


@pytest.fixture(scope="module")
def file_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("set")
    for f in range(FILES):
        subdir = f % 2 == 0
        path = root / (f"chunk-{f:05d}" + ("" if subdir else ".lmdb"))
        env = lmdb.open(str(path), map_size=1 << 20, subdir=subdir)
        with env.begin(write=True) as txn:
            for r in range(PER_FILE):
                txn.put(b"%06d" % r, value_of(f, r))
        env.close()
    (root / "notes.txt").write_text("not a database")
    return str(root)


def pylmdb_records(paths):
    """Every value py-lmdb reads, file after file, in key order."""
    out = []
    for path in paths:
        env = lmdb.open(path, readonly=True, lock=False, subdir=os.path.isdir(path))
        with env.begin() as txn:
            out.extend(v for _, v in txn.cursor())
        env.close()
    return out


def test_a_folder_glob_and_list_read_every_record_in_order(file_set, tmp_path):
    paths = sorted(glob.glob(os.path.join(file_set, "chunk-*")))
    paths = [p for p in paths if not p.endswith("-lock")]
    assert len(paths) == FILES
    expected = pylmdb_records(paths)
    for source in (file_set, os.path.join(file_set, "chunk-*"), paths):
        before = statm_rss()
        r = lmdbloader.Reader(source, index_dir=str(tmp_path / "idx"), rss_budget="16MiB")
        assert len(r) == FILES * PER_FILE
        for first in range(0, len(r), 1000):  # compared, then let go
            assert r.get_batch(range(first, min(first + 1000, len(r)))) == expected[first:first + 1000]
        # 1,500 files' descriptors and indexes under the budget, by the kernel's count.
        grown = statm_rss() - before
        assert grown < 16 * MiB + 8 * MiB, grown
        stats = r.stats()
        assert stats["files"] == FILES and stats["files_open"] <= 64
        assert r.get(b"000002") == value_of(0, 2)  # keys are each file's own: the first holding it


SCRIPT = textwrap.dedent("""
    import os, resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    import torch, lmdbloader
    root, method, index_dir, files, per = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])

    def value_of(f, r):
        return b"file %05d record %d " % (f, r) + bytes([f % 251]) * (r * 7)

    ds = lmdbloader.LmdbDataset(root, decode="raw", rss_budget="32MiB", index_dir=index_dir)
    workers = 0 if method == "none" else 2
    kwargs = dict(multiprocessing_context=method, persistent_workers=True) if workers else {}
    # default_collate leaves a batch of bytes a list of them.
    loader = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=workers, **kwargs)
    got = [v for batch in loader for v in batch]
    want = [value_of(f, r) for f in range(files) for r in range(per)]
    assert got == want, next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
    print("ok", len(got), len(os.listdir("/proc/self/fd")))
""")


@pytest.mark.parametrize("method", ["none", "fork", "spawn", "forkserver"])
def test_a_folder_of_1500_files_under_ulimit_256_through_each_start_method(file_set, tmp_path, method):
    out = subprocess.run([sys.executable, "-c", SCRIPT, file_set, method, str(tmp_path / "idx"), str(FILES),
                          str(PER_FILE)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    ok, count, fds = out.stdout.split()
    assert ok == "ok" and int(count) == FILES * PER_FILE
    assert int(fds) < 128, out.stdout


def test_bad_sets_say_which_file_and_what(tmp_path, file_set):
    (tmp_path / "empty").mkdir()
    with pytest.raises(OSError, match="nor is .*empty a set of databases"):
        lmdbloader.Reader(str(tmp_path / "empty"))
    with pytest.raises(OSError, match="no file matches"):
        lmdbloader.Reader(str(tmp_path / "empty" / "*.lmdb"))
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in range(3):
        env = lmdb.open(str(bad / f"part-{f}.lmdb"), map_size=1 << 20, subdir=False)
        with env.begin(write=True) as txn:
            txn.put(b"k", b"v%d" % f)
        env.close()
    (bad / "part-1.lmdb").write_bytes(b"j" * 9000)
    with pytest.raises(lmdbloader.CorruptedError, match="part-1.lmdb"):
        lmdbloader.Reader(str(bad))
    r = lmdbloader.Reader(str(bad), skip_bad_files=True, index_dir=str(tmp_path / "idx"))
    assert r.get_batch([0, 1]) == [b"v0", b"v2"] and r.stats()["files_skipped"] == 1
    with pytest.raises(ValueError, match="mode='mmap'"):
        lmdbloader.Reader(str(bad), skip_bad_files=True, mode="mmap")
    with pytest.raises(ValueError, match="at least one path"):
        lmdbloader.Reader([])
    with pytest.raises(TypeError, match="path must be"):
        lmdbloader.Reader([str(bad), 3])


def test_the_locality_sampler_and_rank_split_read_whole_files(file_set, tmp_path):
    # Positions run on from file to file (record_positions), so a block, and
    # a window of blocks, holds records of few files: each rank of a split
    # reads whole files, not one record of each.
    ds = lmdbloader.LmdbDataset(file_set, decode="raw", index_dir=str(tmp_path / "idx"))
    n = len(ds)
    seen = []
    for rank in range(2):
        sampler = lmdbloader.LocalitySampler(ds, block_bytes="64KiB", window=2, seed=1, num_replicas=2, rank=rank)
        order = list(sampler)
        seen += order
        files_per_batch = [len({i // PER_FILE for i in order[b:b + 64]}) for b in range(0, len(order), 64)]
        assert max(files_per_batch) <= 32, files_per_batch[:10]  # 64 records of a shuffle would touch ~64 files
    assert sorted(seen) == list(range(n))


def write_lmdb(path, records, subdir=True):
    env = lmdb.open(str(path), map_size=1 << 22, subdir=subdir)
    with env.begin(write=True) as txn:
        for k, v in records:
            txn.put(k, v)
    env.close()
    return str(path)


def mixed_set(root):
    """a.lmdb (a single file, 30 records), b.lmdb/ (a folder, 40), c.mdb (a single file, 50)."""
    root.mkdir()
    for name, n, subdir in (("a.lmdb", 30, False), ("b.lmdb", 40, True), ("c.mdb", 50, False)):
        write_lmdb(root / name, [(b"%04d" % r, b"%s %d" % (name.encode(), r)) for r in range(n)], subdir)
    return root


def test_every_layout_of_a_member_is_read_and_files_says_where(tmp_path):
    root = mixed_set(tmp_path / "set")
    (root / "logs").mkdir()  # a folder that does not look like a database is not the set's
    r = lmdbloader.Reader(str(root), index_dir=str(tmp_path / "idx"))
    assert len(r) == 120 and r.stats()["files_skipped"] == 0
    assert r.files == ((str(root / "a.lmdb"), 0, 30), (str(root / "b.lmdb"), 30, 40), (str(root / "c.mdb"), 70, 50))
    assert r[30] == b"b.lmdb 0" and r[119] == b"c.mdb 49"
    assert r.index_of(b"0005") == 5 and r.index_of(b"0005", file=2) == 75
    with pytest.raises(KeyError):
        r.index_of(b"0045", file=1)  # b.lmdb holds 40
    with pytest.raises(IndexError, match="file 3 out of range: 3 files"):
        r.index_of(b"0001", file=3)
    assert r.where(75) == f"record 75 of {root} (record 5 of {root / 'c.mdb'})"
    assert lmdbloader.Reader(str(root / "b.lmdb")).files == ()


@pytest.mark.parametrize("damage, named, error, what, left", [
    (lambda root: (root / "x.lmdb").mkdir(), "x.lmdb", OSError,
     "x.lmdb looks like an LMDB folder but holds no data.mdb", 120),
    (lambda root: os.unlink(root / "b.lmdb" / "data.mdb"), "b.lmdb", OSError, "b.lmdb/data.mdb: No such file", 80),
    (lambda root: (root / "d.lmdb").write_bytes(b""), "d.lmdb", lmdbloader.CorruptedError, "d.lmdb", 120),
    (lambda root: (root / "c.mdb").write_bytes(b"j" * 9000), "c.mdb", lmdbloader.CorruptedError, "c.mdb", 70),
])
def test_a_member_that_looks_like_a_database_and_is_none_is_named_or_skipped(tmp_path, damage, named, error, what,
                                                                                 left):
    root = mixed_set(tmp_path / "set")
    damage(root)
    for source in (str(root), str(root / "*")):
        with pytest.raises(error, match=what):
            lmdbloader.Reader(source, index_dir=str(tmp_path / "idx"))
        r = lmdbloader.Reader(source, index_dir=str(tmp_path / "idx"), skip_bad_files=True)
        assert len(r) == left and r.stats()["files_skipped"] == 1
        assert named not in [os.path.basename(p) for p, _, _ in r.files]
        assert r.get_batch([0, len(r) - 1]) == [b"a.lmdb 0", b"c.mdb 49" if named != "c.mdb" else b"b.lmdb 39"]


# OCR sets as deep-text-recognition-benchmark releases them: MJ/{MJ_test,
# MJ_train, MJ_valid}, each a folder LMDB that create_lmdb_dataset.py wrote.
def write_ocr_set(path, name, n, num_samples=None):
    records = [(b"image-%09d" % k, b"jpeg of %s %d" % (name.encode(), k)) for k in range(1, n + 1)]
    records += [(b"label-%09d" % k, f"{name}-{k}".encode()) for k in range(1, n + 1)]
    records.append((b"num-samples", str(n if num_samples is None else num_samples).encode()))
    return write_lmdb(path, records)


@pytest.mark.parametrize("sizes", [(10, 20, 30), (10, 30, 20), (20, 10, 30), (20, 30, 10), (30, 10, 20),
                                   (30, 20, 10)])
def test_a_folder_of_ocr_sets_reads_each_with_its_own_count(tmp_path, sizes):
    root = tmp_path / "MJ"
    root.mkdir()
    names = ["MJ_test", "MJ_train", "MJ_valid"]  # sorted: the order read
    for name, n in zip(names, sizes):
        write_ocr_set(root / name, name, n)
    want = []
    for name in names:
        alone = lmdbloader.LmdbDataset(str(root / name), samples="ocr", decode="raw", index_dir="none")
        want += [alone[i] for i in range(len(alone))]
    assert len(want) == 60
    ds = lmdbloader.LmdbDataset(str(root), samples="ocr", decode="raw", index_dir=str(tmp_path / "idx"))
    assert len(ds) == 60
    assert [ds[i] for i in range(60)] == want
    order = [(7 * i) % 60 for i in range(60)]
    assert ds.__getitems__(order) == [want[i] for i in order]
    assert ds[-1] == want[-1] and ds[sizes[0]] == (b"jpeg of MJ_train 1", "MJ_train-1")
    if sizes != (10, 20, 30):
        return
    # Through a spawned worker: the samples' per-file ints pickle with the dataset.
    import torch.utils.data
    loader = torch.utils.data.DataLoader(ds, batch_size=16, num_workers=1, multiprocessing_context="spawn")
    images, labels = [], []
    for batch_images, batch_labels in loader:
        images += batch_images
        labels += batch_labels
    assert list(zip(images, labels)) == want


def test_a_set_whose_count_lies_is_named(tmp_path):
    root = tmp_path / "MJ"
    root.mkdir()
    write_ocr_set(root / "MJ_test", "MJ_test", 10)
    write_ocr_set(root / "MJ_train", "MJ_train", 20, num_samples=25)
    write_ocr_set(root / "MJ_valid", "MJ_valid", 30)
    with pytest.raises(KeyError, match=f"{root / 'MJ_train'}: no key b'image-000000025', which sample 24 needs: "
                                       "the count record 'num-samples' says 25 samples"):
        lmdbloader.LmdbDataset(str(root), samples="ocr", decode="raw", index_dir="none")
    write_ocr_set(root / "MJ_train", "MJ_train", 20, num_samples=15)
    with pytest.raises(ValueError, match=f"{root / 'MJ_train'}: the count record 'num-samples' says 15 samples, "
                                         "yet key b'image-000000016'"):
        lmdbloader.LmdbDataset(str(root), samples="ocr", decode="raw", index_dir="none")
    shutil.rmtree(root / "MJ_train")
    write_lmdb(root / "MJ_train", [(b"other", b"x")])  # an LMDB of another kind among them
    with pytest.raises(KeyError, match=f"{root / 'MJ_train'} has no count record 'num-samples'"):
        lmdbloader.LmdbDataset(str(root), samples="ocr", decode="raw", index_dir="none")


def test_a_set_of_ocr_sets_is_named_and_read_through_a_glob_or_list(tmp_path):
    # deep-text-recognition-benchmark's training/{MJ/{MJ_test, MJ_train, MJ_valid}, ST}: a set is one
    # folder deep, so MJ is named rather than passed over (ST alone would be a short dataset).
    root = tmp_path / "training"
    (root / "MJ").mkdir(parents=True)
    for name, n in (("MJ_test", 4), ("MJ_train", 5), ("MJ_valid", 6)):
        write_ocr_set(root / "MJ" / name, name, n)
    write_ocr_set(root / "ST", "ST", 7)
    with pytest.raises(OSError, match=f"{root / 'MJ'} holds databases of its own, .* name them with a glob"):
        lmdbloader.LmdbDataset(str(root), samples="ocr", decode="raw", index_dir="none")
    skipped = lmdbloader.LmdbDataset(str(root), samples="ocr", decode="raw", index_dir="none", skip_bad_files=True)
    assert len(skipped) == 7 and skipped.reader.stats()["files_skipped"] == 1
    listed = [str(p) for p in sorted((root / "MJ").iterdir())] + [str(root / "ST")]
    ds = lmdbloader.LmdbDataset(listed, samples="ocr", decode="raw", index_dir="none")
    assert len(ds) == 22 and ds[4] == (b"jpeg of MJ_train 1", "MJ_train-1") and ds[21] == (b"jpeg of ST 7", "ST-7")
    glob_ds = lmdbloader.LmdbDataset(str(root / "MJ" / "MJ_*"), samples="ocr", decode="raw", index_dir="none")
    assert len(glob_ds) == 15 and glob_ds[14] == (b"jpeg of MJ_valid 6", "MJ_valid-6")
    # An int count is each file's.
    three = lmdbloader.KeyedSamples(["image-{:09d}", "label-{:09d}"], count=3, start=1, text=(1,))
    first_three = lmdbloader.LmdbDataset(str(root / "MJ"), samples=three, decode="raw", index_dir="none")
    assert len(first_three) == 9 and first_three[3] == (b"jpeg of MJ_train 1", "MJ_train-1")


def run_command(*args):
    return subprocess.run(["lmdbloader", *map(str, args)], capture_output=True, text=True, timeout=120)


def test_every_reading_command_takes_a_folder_a_glob_and_a_list(tmp_path):
    root = mixed_set(tmp_path / "set")
    paths = [root / "c.mdb", root / "a.lmdb"]
    for source in ([root], [root / "*"], paths):
        res = run_command("stat", *source, "--json", "--index-dir", tmp_path / "idx")
        assert res.returncode == 0, res.stderr
        stat = json.loads(res.stdout)
        records = 80 if source == paths else 120
        data = [root / "c.mdb", root / "a.lmdb"] + ([] if source == paths else [root / "b.lmdb" / "data.mdb"])
        assert stat["records"] == records and stat["file_bytes"] == sum(os.path.getsize(p) for p in data), stat
        assert stat["files"] == (2 if source == paths else 3) and stat["value_bytes"]["max"] == len(b"b.lmdb 39")
        res = run_command("stat", *source)
        assert res.returncode == 0 and f"records         {records}\n" in res.stdout, res
        assert f"files           {stat['files']}\n" in res.stdout, res.stdout
        res = run_command("verify", *source)
        assert res.returncode == 0 and f"OK, {records} records read in {stat['files']} files" in res.stdout, res
        res = run_command("scan", *source, "--json", "--rss-budget", "16MiB", "--index-dir", tmp_path / "idx")
        assert res.returncode == 0 and json.loads(res.stdout)["records"] == records, res.stderr
    res = run_command("get", *paths, "--index", "50")
    assert res.returncode == 0 and res.stdout == "a.lmdb 0", res
    res = run_command("get", root, "--key", "0035", "--index-dir", tmp_path / "idx")
    assert res.returncode == 0 and res.stdout == "b.lmdb 35", res


def test_a_command_over_a_set_names_its_bad_member(tmp_path):
    root = mixed_set(tmp_path / "set")
    (root / "x.lmdb").mkdir()
    for command in ("stat", "scan", "get", "verify"):
        args = ["--index", "0"] if command == "get" else []
        res = run_command(command, root, *args, "--index-dir", tmp_path / "idx")
        assert res.returncode == 1 and "x.lmdb looks like an LMDB folder but holds no data.mdb" in res.stderr, \
            (command, res.stderr)
    os.rmdir(root / "x.lmdb")
    (root / "b.lmdb" / "data.mdb").write_bytes(b"j" * 9000)
    res = run_command("verify", root / "*.*", "--json")
    report = json.loads(res.stdout)
    assert res.returncode == 1 and not report["ok"] and report["records"] == 80 and report["files"] == 3, res
    assert any(str(root / "b.lmdb") in p for p in report["problems"]), report
    res = run_command("stat", root)
    assert res.returncode == 1 and str(root / "b.lmdb") in res.stderr, res.stderr
    res = run_command("stat", root, "--skip-bad-files", "--json", "--index-dir", tmp_path / "idx")
    assert res.returncode == 0 and json.loads(res.stdout)["records"] == 80, res.stderr
