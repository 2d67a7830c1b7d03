"""Bad input raises the right Python exception with a message naming the file."""

import os
import pickle

import numpy as np
import pytest

import lmdbloader


@pytest.fixture
def corpus(tmp_path):
    path = str(tmp_path / "c")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(10):
            w.add(f"n{i}", {"x": i, "blob": b"b" * i}, label=i)
    return path


def test_reader_basics_and_pickling(corpus):
    r = lmdbloader.Reader(corpus, rss_budget="16MiB")
    assert len(r) == 10 and r.decode(3) == {"x": 3, "blob": b"bbb"}
    assert r.get(b"\0" * 7 + b"\x02") == r[2] and r.get(b"nope") is None
    assert r[-1] == r[9] and r.name(4) == "n4"
    assert r[np.int64(2)] == r[2] and r.get_batch(np.array([2, 9])) == [r[2], r[9]]
    with pytest.raises(TypeError, match="integers, not float"):
        r[2.0]
    assert list(r.column("label")) == list(range(10))
    r2 = pickle.loads(pickle.dumps(r))
    assert r2[5] == r[5] and r2.stats()["rss_budget"] == 16 << 20
    with lmdbloader.Reader(corpus, mode="mmap") as m:
        assert bytes(m.view(3)) == r[3]


def test_errors(corpus, tmp_path):
    with pytest.raises(OSError, match="/nonexistent"):
        lmdbloader.Reader("/nonexistent/db")
    junk = tmp_path / "junk"
    junk.write_bytes(b"x" * 20000)
    with pytest.raises(lmdbloader.CorruptedError, match="junk.*not an LMDB file"):
        lmdbloader.Reader(str(junk))
    with pytest.raises(TypeError):
        lmdbloader.Reader(corpus, budget="1GiB")
    with pytest.raises(ValueError, match="invalid byte size"):
        lmdbloader.Reader(corpus, rss_budget="lots")
    with pytest.raises(ValueError, match="mode"):
        lmdbloader.Reader(corpus, mode="fast")
    with pytest.raises(TypeError, match="index_dir must be a str or os.PathLike, got int"):
        lmdbloader.Reader(corpus, index_dir=5)
    (tmp_path / "idx").mkdir()
    assert len(lmdbloader.Reader(corpus, index_dir=tmp_path / "idx")) == 10  # a Path is a path
    r = lmdbloader.Reader(corpus)
    with pytest.raises(IndexError, match="out of range"):
        r[10]
    with pytest.raises(KeyError):
        r.index_of(b"missing")
    with pytest.raises(ValueError, match="views need mode=mmap"):
        r.view(0)
    r.close()
    with pytest.raises(ValueError, match="closed"):
        len(r)


def test_undecodable_record_names_file_and_record(tmp_path):
    path = str(tmp_path / "bad")
    with lmdbloader.CorpusWriter(path) as w:
        w.add("ok", {"a": 1})
        w.add("bad", b"\xc1\xc1\xc1")  # 0xc1 is never valid msgpack
    r = lmdbloader.Reader(path)
    with pytest.raises(lmdbloader.DecodeError, match=r"record 1 of .*bad"):
        r.decode(1)


def test_importing_lmdbloader_does_not_import_torch():
    import subprocess
    import sys
    code = "import sys, lmdbloader; lmdbloader.Reader; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unreadable_file_raises_permission_error_naming_it():
    import shutil
    import tempfile
    base = tempfile.mkdtemp()  # pytest's tmp_path is not traversable by others
    try:
        os.chmod(base, 0o755)
        path = os.path.join(base, "c")
        with lmdbloader.CorpusWriter(path) as w:
            w.add("n", {"x": 1})
        data = os.path.join(path, "data.mdb")
        os.chmod(data, 0)
        # Root reads any file: the check runs in a forked child that gives up root.
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                if os.geteuid() == 0:
                    os.setgroups([])
                    os.setgid(65534)
                    os.setuid(65534)
                try:
                    lmdbloader.Reader(path)
                    code = 1
                except PermissionError as e:
                    code = 0 if data in str(e) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        shutil.rmtree(base)


# A file truncated under a running job (rewritten in place: `cp` truncates its
# target first). Through a plain mapping the next read dies of SIGBUS; each
# case runs in a child process, so that a regression shows as a signal, not
# as the end of the test run.
TRUNCATED_UNDER_MAPPING = r'''
import os, sys
import lmdbloader
path, case = sys.argv[1], sys.argv[2]
data = os.path.join(path, "data.mdb")
if case == "dataloader":
    import torch
    from torch.utils.data import DataLoader
    ds = lmdbloader.LmdbDataset(path, mode="mmap", decode=len, views=True)
    loader = DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)
    assert sum(len(b) for b in loader) == len(ds)  # the workers are up, with their own SIGBUS handlers
    os.truncate(data, 8192)
    try:
        sum(len(b) for b in loader)
    except OSError as e:
        print("OSError", e)
    sys.exit(0)
r = lmdbloader.Reader(path, mode="mmap", index_dir="none")
last = len(r) - 1
if case == "fork":
    r[last]
    pid = os.fork()
    if pid == 0:
        import faulthandler
        faulthandler.enable()  # a SIGBUS handler installed after the Reader's, as a DataLoader worker's
        r[0]  # the first use in the child reopens
        os.truncate(data, 8192)
        try:
            r[last]
        except OSError as e:
            print("OSError", e, flush=True)
        os._exit(0)
    sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
elif case == "views":
    os.truncate(data, 8192)
    try:
        r.apply_batch([last], bytes, views=True)
    except OSError as e:
        print("OSError", e)
else:
    r[last]
    os.truncate(data, 8192)
    try:
        r[last]
    except OSError as e:
        print("OSError", e)
'''


@pytest.mark.parametrize("case", ["read", "views", "fork", "dataloader"])
def test_file_truncated_under_mapping_is_an_oserror_not_sigbus(tmp_path, case):
    import subprocess
    import sys
    path = str(tmp_path / "big")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(64):
            w.add(f"n{i}", os.urandom(50_000))
    out = subprocess.run([sys.executable, "-c", TRUNCATED_UNDER_MAPPING, path, case], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    assert "OSError" in out.stdout and "data.mdb" in out.stdout and "shrank under its mapping" in out.stdout, \
        out.stdout + out.stderr[-2000:]


def test_memory_tool_reports_bad_usage_before_running_anything(tmp_path):
    """python -m lmdbloader.memory: a missing command, a bad interval or an
    output folder that does not exist are usage errors (status 2) found
    before the command runs; a command that cannot start is 127; otherwise
    the command's own status comes back."""
    import subprocess
    import sys

    def run(*args):
        return subprocess.run([sys.executable, "-m", "lmdbloader.memory", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)

    marker = tmp_path / "ran"
    for args, why in (([], "usage"), (["--"], "no command"), (["--interval", "0", "--", "true"], "--interval"),
                      (["--out", str(tmp_path / "missing" / "m"), "--", "touch", str(marker)], "does not exist")):
        res = run(*args)
        assert res.returncode == 2 and why in res.stderr, (args, res.stderr)
    assert not marker.exists()
    res = run("--", str(tmp_path / "no-such-program"))
    assert res.returncode == 127 and "cannot run" in res.stderr and "No such file" in res.stderr, res.stderr
    res = run("--interval", "0.05", "--", sys.executable, "-c", "import time, sys; time.sleep(0.3); sys.exit(3)")
    assert res.returncode == 3 and (tmp_path / "memory.csv").exists(), res.stderr


@pytest.mark.parametrize("mode", ["pread", "mmap"])
def test_writer_commit_under_a_reader_without_lock_file_is_an_oserror(tmp_path, mode):
    """Without the lock file nothing keeps a writer from reusing the pages a
    reader indexed: after a commit every read is an OSError naming the file,
    never another transaction's bytes; with lock=True the reader keeps its
    snapshot, and views and DataLoader batches see the same error."""
    import lmdb

    path = str(tmp_path / "db")
    env = lmdb.open(path, map_size=1 << 26)
    with env.begin(write=True) as txn:
        for i in range(300):
            txn.put(b"%05d" % i, bytes([i % 251]) * 3000)
    plain = lmdbloader.Reader(path, mode=mode, index_dir="none")
    snapshot = lmdbloader.Reader(path, mode=mode, lock=True, index_dir="none")
    dataset = lmdbloader.LmdbDataset(path, mode=mode, decode=len, index_dir="none", views=mode == "mmap")
    assert plain[7] == bytes([7]) * 3000 and dataset.__getitems__([1, 2]) == [3000, 3000]
    for round_ in range(3):  # the third commit may reuse the pages the first freed
        with env.begin(write=True) as txn:
            for i in range(300):
                txn.put(b"%05d" % i, bytes([(i + round_ + 1) % 251]) * 3000)
    for read in (lambda: plain[7], lambda: plain.get_batch([1, 2, 3]), lambda: dataset[4],
                 lambda: dataset.__getitems__([5, 6])):
        with pytest.raises(OSError) as e:
            read()
        assert f"{path}/data.mdb: a writer committed to it since it was opened" in str(e.value)
        assert "lock=True" in str(e.value)
    assert [snapshot[i] for i in (0, 7, 299)] == [bytes([i % 251]) * 3000 for i in (0, 7, 299)]
    assert lmdbloader.Reader(path, mode=mode, index_dir="none")[7] == bytes([10]) * 3000
    env.close()


@pytest.mark.parametrize("name, value, message", [
    ("queue_depth", 0, "queue_depth must be between 1 and 4096, got 0"),
    ("mode", "fast", "mode must be one of auto, pread, mmap; got 'fast'"),
    ("cache", "keep", "cache must be one of auto, fill, exact, drop; got 'keep'"),
    ("io_engine", "aio", "io_engine must be one of auto, io_uring, threads, sync; got 'aio'"),
    ("rss_budget", "lots", "invalid byte size 'lots'"),
    ("mmap_window", "4KiB", "mmap_window must be at least 64KiB"),
    ("rss_budget", "100", "rss_budget of 100 bytes is below the floor of 1048576 bytes"),
])
def test_a_bad_option_is_the_same_error_from_python_and_the_command(corpus, name, value, message):
    import subprocess
    with pytest.raises(ValueError) as e:
        lmdbloader.Reader(corpus, **{name: value})
    assert message in str(e.value)
    res = subprocess.run(["lmdbloader", "scan", corpus, "--" + name.replace("_", "-"), str(value)],
                         capture_output=True, text=True)
    assert res.returncode == 2 and message in res.stderr, res.stderr
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'budget' \(options: rss_budget, mode"):
        lmdbloader.Reader(corpus, budget="1GiB")


@pytest.mark.parametrize("value, message", [
    ("100", "--rss-budget 100: rss_budget of 100 bytes is below the floor of 1048576 bytes"),
    ("lots", "--rss-budget lots: rss_budget: invalid byte size 'lots'"),
])
def test_a_bad_option_value_is_bad_usage_of_every_reading_command(corpus, value, message):
    """Exit status 2 naming the flag, before anything is opened, from each
    reading subcommand; from the environment's budget too."""
    import subprocess
    for command in ("get", "scan", "stat", "verify"):
        args = ["--index", "0"] if command == "get" else []
        res = subprocess.run(["lmdbloader", command, corpus, *args, "--rss-budget", value], capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 2 and f"lmdbloader {command}: {message}" in res.stderr, (command, res.stderr)
    res = subprocess.run(["lmdbloader", "stat", corpus], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "LMDBLOADER_RSS_BUDGET": value})
    assert res.returncode == 2 and "LMDBLOADER_RSS_BUDGET: " in res.stderr \
        and message.split(": ")[-1] in res.stderr, res.stderr
    res = subprocess.run(["lmdbloader", "stat", corpus, "--rss-budget", "1MiB"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr  # the floor itself is a budget


def test_the_budget_defaults_to_the_environment_in_python_and_the_command(corpus, monkeypatch):
    import json
    import subprocess
    monkeypatch.delenv("LMDBLOADER_RSS_BUDGET", raising=False)
    assert lmdbloader.Reader(corpus).rss_budget == 0
    monkeypatch.setenv("LMDBLOADER_RSS_BUDGET", "24MiB")
    assert lmdbloader.Reader(corpus).rss_budget == 24 << 20
    assert lmdbloader.Reader(corpus, rss_budget="8MiB").rss_budget == 8 << 20  # the keyword wins
    res = subprocess.run(["lmdbloader", "scan", corpus, "--json"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["rss_budget_bytes"] == 24 << 20
    monkeypatch.setenv("LMDBLOADER_RSS_BUDGET", "plenty")
    with pytest.raises(ValueError, match="LMDBLOADER_RSS_BUDGET: invalid byte size 'plenty'"):
        lmdbloader.Reader(corpus)


def test_read_into_fills_the_callers_buffers_and_names_a_wrong_one(corpus):
    r = lmdbloader.Reader(corpus)
    sizes = r.value_sizes([0, 3])
    out = [bytearray(s) for s in sizes]
    r.read_into([0, 3], out)
    assert [bytes(b) for b in out] == [r[0], r[3]]
    flat = np.zeros(sum(sizes) + 10, np.uint8)
    r.read_into([0, 3], flat, [10, 10 + sizes[0]])
    assert flat[10:10 + sizes[0]].tobytes() == r[0]
    with pytest.raises(TypeError, match="buffer 1 must support the buffer protocol .writable, C-contiguous., not bytes"):
        r.read_into([0, 3], [out[0], bytes(sizes[1])])
    with pytest.raises(TypeError, match="buffers must support .* not numpy.ndarray"):
        r.read_into([0, 3], np.zeros(2 * len(flat), np.uint8)[::2], [0, sizes[0]])
    with pytest.raises(ValueError, match=f"buffer 0 holds 5 bytes; record 0 has {sizes[0]}"):
        r.read_into([0], [bytearray(5)])
