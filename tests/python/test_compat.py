"""lmdbloader.compat runs py-lmdb style code unchanged and returns exactly
what py-lmdb returns."""

import os
import pickle

import pytest

lmdb = pytest.importorskip("lmdb")
import lmdbloader  # noqa: E402
import lmdbloader.compat as compat  # noqa: E402


@pytest.fixture
def foreign(tmp_path):
    path = str(tmp_path / "db")
    env = lmdb.open(path, map_size=1 << 28, max_dbs=2)
    records = {f"video_{i:04d}".encode(): bytes([i % 251]) * (i * 37 % 5000) for i in range(500)}
    with env.begin(write=True) as txn:
        for k, v in records.items():
            txn.put(k, v)
        named = env.open_db(b"extra", txn=txn)
        txn.put(b"a", b"1", db=named)
    env.close()
    return path, records


class VideoDataset:
    """The common pattern: open in each worker, txn.get by key."""

    def __init__(self, path, keys, lmdb_module):
        self.path, self.keys, self.lmdb, self.env = path, keys, lmdb_module, None

    def __getitem__(self, i):
        if self.env is None:
            self.env = self.lmdb.open(self.path, readonly=True, lock=False, readahead=False, meminit=False)
        with self.env.begin(write=False) as txn:
            return txn.get(self.keys[i])


def test_same_dataset_code_returns_the_same_bytes(foreign):
    path, records = foreign
    keys = sorted(records)
    ours, theirs = VideoDataset(path, keys, compat), VideoDataset(path, keys, lmdb)
    for i in range(len(keys)):
        assert ours[i] == theirs[i] == records[keys[i]]


def test_cursors_match_pylmdb(foreign):
    path, _ = foreign
    a = compat.open(path, readonly=True, lock=False)
    b = lmdb.open(path, readonly=True, lock=False)
    with a.begin() as ta, b.begin() as tb:
        assert list(ta.cursor()) == list(tb.cursor())
        assert list(ta.cursor().iterprev(values=False)) == list(tb.cursor().iterprev(values=False))
        ca, cb = ta.cursor(), tb.cursor()
        for probe in [b"video_0100", b"video_01005", b"zzz", b"", b"video_0499"]:
            assert ca.set_range(probe) == cb.set_range(probe)
            assert ca.item() == cb.item()
            if probe:  # py-lmdb rejects an empty key in set_key
                assert ca.set_key(probe) == cb.set_key(probe)
                assert ca.key() == cb.key() and ca.value() == cb.value()
        assert ca.first() and cb.first() and ca.prev() == cb.prev()
        assert ca.item() == cb.item()
        assert ca.last() and cb.last() and ca.next() == cb.next()
        assert ta.get(b"missing", b"dflt") == tb.get(b"missing", b"dflt") == b"dflt"
        assert ca.get(b"video_0007") == cb.get(b"video_0007")
    assert a.stat()["entries"] == b.stat()["entries"]
    assert a.info()["last_txnid"] == b.info()["last_txnid"]


def test_named_database(foreign):
    path, _ = foreign
    env = compat.open(path, readonly=True, lock=False, max_dbs=2)
    db = env.open_db(b"extra")
    with env.begin(db=db) as txn:
        assert txn.get(b"a") == b"1"
    with pytest.raises(compat.NotFoundError, match="MDB_NOTFOUND"):
        env.open_db(b"absent", create=False)
    with pytest.raises(compat.ReadonlyError, match="mdb_dbi_open: Permission denied"):
        env.open_db(b"absent")  # create=True on a read-only environment, as py-lmdb


def test_budget_from_keyword_and_environment(foreign, monkeypatch):
    path, _ = foreign
    env = compat.open(path, lock=False, rss_budget="32MiB")
    assert env.open_db().reader.stats()["rss_budget"] == 32 << 20
    monkeypatch.setenv("LMDBLOADER_RSS_BUDGET", "48MiB")
    env = compat.open(path, lock=False)
    assert env.open_db().reader.stats()["rss_budget"] == 48 << 20


def test_unsupported_calls_raise_clear_errors(foreign):
    path, _ = foreign
    env = compat.open(path, lock=False)
    with pytest.raises(lmdbloader.ReadonlyError, match="read-only environment"):
        env.begin(write=True)
    txn = env.begin()
    for call in (lambda: txn.put(b"k", b"v"), lambda: txn.delete(b"k"), lambda: txn.cursor().put(b"k", b"v"),
                 lambda: txn.drop(env.open_db())):
        with pytest.raises(lmdbloader.ReadonlyError):
            call()
    with pytest.raises(TypeError):
        compat.open(path, no_such_option=True)
    with pytest.raises(TypeError, match="pickled"):
        pickle.dumps(env)
    # As in LMDB, the flags of an existing database win over those asked for.
    assert compat.open(path, lock=False, max_dbs=2).open_db(b"extra", dupsort=True).flags()["dupsort"] is False


def test_read_only_opens_write_nothing_into_the_dataset_directory(foreign, tmp_path, monkeypatch):
    path, records = foreign
    monkeypatch.setenv("LMDBLOADER_INDEX_DIR", str(tmp_path / "cache"))
    before = sorted(os.listdir(path))
    env = compat.open(path, readonly=True, lock=False)
    with env.begin() as txn:
        assert [txn.get(k) for k in records] == list(records.values())
    env.close()
    # The index compat built went to the cache directory, where the next open finds it.
    assert lmdbloader.Reader(path).stats()["index_source"].startswith("loaded from " + str(tmp_path / "cache"))
    assert sorted(os.listdir(path)) == before
    # Asking for it puts it there.
    lmdbloader.Reader(path, index_dir=path)
    assert len(os.listdir(path)) == len(before) + 1


def every_item(path):
    """All items of every database of an environment, read by py-lmdb (a
    named database's entry in the main database by its name only: its value
    is the tree's header, page numbers included)."""
    env = lmdb.open(path, readonly=True, lock=False, max_dbs=4)
    out = {None: []}
    with env.begin() as txn:
        for name, value in txn.cursor():
            try:
                db = env.open_db(name, txn=txn, create=False)
            except lmdb.Error:
                out[None].append((name, value))  # a plain key of the main database
                continue
            out[None].append((name, None))
            out[name] = list(txn.cursor(db=db))
    env.close()
    return out


@pytest.fixture
def with_free_pages(tmp_path):
    """Main and named (dupsort) databases, overflow values, and free pages
    left by deletions, so that a compacting copy has something to leave out."""
    path = str(tmp_path / "src")
    env = lmdb.open(path, map_size=1 << 28, max_dbs=4)
    dups = env.open_db(b"dups", dupsort=True)
    with env.begin(write=True) as txn:
        for i in range(3000):
            txn.put(b"k%05d" % i, os.urandom(20 if i % 7 else 9000))
            txn.put(b"d%02d" % (i % 40), b"%06d" % i, db=dups)
    with env.begin(write=True) as txn:
        for i in range(0, 3000, 2):
            txn.delete(b"k%05d" % i)
    env.close()
    return path


@pytest.mark.parametrize("compact", [False, True])
def test_copy_matches_pylmdb(with_free_pages, tmp_path, compact):
    src = with_free_pages
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    env = compat.open(src, readonly=True, lock=False, max_dbs=4)
    env.copy(str(ours), compact=compact)
    with open(ours / "fd.mdb", "wb") as f:
        env.copyfd(f.fileno(), compact=compact)
    ref = lmdb.open(src, readonly=True, lock=False, max_dbs=4)
    ref.copy(str(theirs), compact=compact)
    ref.close()
    assert sorted(os.listdir(ours)) == ["data.mdb", "fd.mdb"]
    if not compact:  # the pages in use, byte for byte
        assert (ours / "data.mdb").read_bytes() == (theirs / "data.mdb").read_bytes()
    else:  # liblmdb's own layout: the same items, the free pages left out
        source_size = os.path.getsize(os.path.join(src, "data.mdb"))
        assert os.path.getsize(ours / "data.mdb") == os.path.getsize(theirs / "data.mdb") < source_size
    expected = every_item(src)
    assert every_item(str(ours)) == expected
    assert (ours / "fd.mdb").read_bytes() == (ours / "data.mdb").read_bytes()
    assert len(expected[b"dups"]) == 3000


def test_copy_errors_match_pylmdb(with_free_pages, tmp_path):
    src = with_free_pages
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "data.mdb").write_bytes(b"keep me")
    env = compat.open(src, readonly=True, lock=False)
    ref = lmdb.open(src, readonly=True, lock=False)
    calls = [lambda e: e.copy(str(tmp_path / "missing")), lambda e: e.copy(str(tmp_path / "taken")),
             lambda e: e.copy(), lambda e: e.copy(str(tmp_path), txn=e.begin()), lambda e: e.copyfd(-1),
             lambda e: e.copyfd(987654)]
    for call in calls:
        with pytest.raises(Exception) as ours:
            call(env)
        with pytest.raises(Exception) as theirs:
            call(ref)
        assert (type(ours.value).__name__, str(ours.value)) == (type(theirs.value).__name__, str(theirs.value))
    assert (tmp_path / "taken" / "data.mdb").read_bytes() == b"keep me"
    env.close()
    with pytest.raises(compat.Error):
        env.copy(str(tmp_path))


def test_compacting_copy_of_a_damaged_file_is_an_error_and_leaves_nothing(with_free_pages, tmp_path):
    src = with_free_pages
    env = compat.open(src, readonly=True, lock=False, max_dbs=4)  # the main tree is intact
    # Damage a page of the named database's tree: liblmdb's compacting copy
    # would follow it; the checked reader stops first.
    raw = lmdb.open(src, readonly=True, lock=False, max_dbs=4)
    with raw.begin() as txn:
        root = txn.stat(raw.open_db(b"dups", txn=txn, create=False))
    raw.close()
    assert root["leaf_pages"] > 1
    data = os.path.join(src, "data.mdb")
    blob = bytearray(open(data, "rb").read())
    # The named tree's pages hold keys b"dNN": damage every such leaf's node offsets.
    page = 4096
    damaged = 0
    for at in range(2 * page, len(blob), page):
        if blob[at + 10] & 0x02 and b"d0" in blob[at:at + page]:  # P_LEAF holding dup keys
            blob[at + 16:at + 18] = b"\xff\xff"
            damaged += 1
    assert damaged
    open(data, "wb").write(bytes(blob))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(lmdbloader.CorruptedError, match="data.mdb"):
        env.copy(str(out), compact=True)
    assert os.listdir(out) == []


@pytest.mark.skipif(not hasattr(lmdb.Environment, "lib_version"), reason="py-lmdb before 3.0 has one engine")
def test_lib_version_and_lmdb_1_0_files(tmp_path):
    """py-lmdb 3 bundles LMDB 0.9 and 1.0 engines; compat reads both formats
    and answers lib_version= (and lib_version()) as py-lmdb 3 does."""
    plain, newer = str(tmp_path / "plain"), str(tmp_path / "newer")
    for path, engine in ((plain, 0), (newer, 1)):
        with lmdb.open(path, map_size=1 << 20, lib_version=engine) as env, env.begin(write=True) as txn:
            txn.put(b"k", b"v")

    def opened(module, path, **kw):
        with module.open(path, readonly=True, lock=False, **kw) as env, env.begin() as txn:
            return env.lib_version()[0], txn.get(b"k")

    for path in (plain, newer):
        for kw in ({}, {"lib_version": 0}, {"lib_version": 1}, {"lib_version": -1}, {"lib_version": 7}):
            assert _outcome(lambda: opened(compat, path, **kw)) == _outcome(lambda: opened(lmdb, path, **kw)), kw
    assert opened(compat, newer) == (1, b"v")
    assert compat.version(lib_version=0) == compat.version()
    assert compat.version(lib_version=1) == lmdb.version(lib_version=1)
    with pytest.raises(compat.Error, match="lib_version=2: this build has no LMDB 2.x engine"):
        compat.version(lib_version=2)
    r = lmdbloader.Reader(newer, index_dir="none")
    assert (r[0], r.stats()["lmdb_format"]) == (b"v", 3)
    for name in ("ProblemError", "BadChecksumError", "CryptoFailError", "EnvEncryptionError"):
        assert issubclass(getattr(compat, name), compat.Error)


def test_compat_has_every_public_name_of_pylmdb():
    """Code written against the installed py-lmdb finds every name it may use."""
    pairs = [(lmdb, compat)] + [(getattr(lmdb, c), getattr(compat, c)) for c in ("Environment", "Transaction", "Cursor")]
    missing = [f"{theirs.__name__}.{name}" for theirs, ours in pairs for name in dir(theirs)
               if not name.startswith("_") and name != "cpython" and not hasattr(ours, name)]
    assert missing == []


def test_nested_transactions_are_refused_as_pylmdb_refuses_them(foreign):
    path, _ = foreign

    def nested(module):
        outcomes = []
        with module.open(path, readonly=True, lock=False) as env:
            parent = env.begin()
            for call in (lambda: env.begin(parent=parent), lambda: env.begin(parent=parent, write=True),
                         lambda: module.Transaction(env, parent=parent), lambda: env.begin(parent="txn")):
                outcomes.append(_outcome(lambda: type(call()).__name__))
            parent.abort()
            outcomes.append(_outcome(lambda: type(env.begin(parent=parent)).__name__))
        return outcomes

    assert nested(compat) == nested(lmdb)


def _outcome(call):
    try:
        result = call()
    except Exception as e:  # the comparison is the point: any exception, by type and message
        return type(e).__name__, str(e)
    return "ok", bytes(result) if isinstance(result, memoryview) else result


def test_key_value_and_db_arguments_are_checked_as_pylmdb_checks_them(tmp_path):
    """Every call that takes a key, value or db handle, given keys of every
    kind (buffer-protocol objects py-lmdb accepts, types it refuses, None,
    empty, present and missing) and handles of the wrong type or of another
    environment: the same result or exception type and message as py-lmdb.
    Write calls included: py-lmdb checks their arguments and looks the key up
    before liblmdb refuses the write."""
    import array
    import numpy as np

    paths = []
    for name in ("a", "b"):
        path = str(tmp_path / name)
        env = lmdb.open(path, map_size=1 << 24, max_dbs=2)
        dups = env.open_db(b"dups", dupsort=True)
        with env.begin(write=True) as txn:
            for i in range(50):
                txn.put(b"k%05d" % i, b"v" * i)
                txn.put(b"d%02d" % (i % 5), b"%03d" % i, db=dups)
        env.close()
        paths.append(path)
    keys = [5, None, 1.5, [b"k00001"], "k00001", np.bytes_(b"k00001"), array.array("b", b"k00002"),
            np.frombuffer(b"k00003", dtype=np.uint8), np.frombuffer(b"k00001k00002", dtype=np.uint8)[::2],
            memoryview(b"k00001k00002")[::2], bytearray(b"k00004"), b"", b"k00005", b"missing",
            b"d01", b"x" * 600]
    results = {}
    for module in (lmdb, compat):
        env = module.open(paths[0], readonly=True, lock=False, max_dbs=2)
        other = module.open(paths[1], readonly=True, lock=False, max_dbs=2)
        handles = {"main": env.open_db(), "dups": env.open_db(b"dups"), "foreign": other.open_db(b"dups"),
                   "int": 3, "str": "dups", "bytes": b"dups"}
        out = results[module] = []
        for db_name in ("main", "dups"):
            db = handles[db_name]
            txn = env.begin(db=db)
            cur = txn.cursor()
            calls = {
                "get": lambda k: txn.get(k), "cursor.get": lambda k: cur.get(k),
                "set_key": lambda k: cur.set_key(k), "set_range": lambda k: cur.set_range(k),
                "set_key_dup": lambda k: cur.set_key_dup(k, b"001"),
                "pop": lambda k: txn.pop(k), "cursor.pop": lambda k: cur.pop(k),
                "put": lambda k: txn.put(k, b"v"), "put(value=k)": lambda k: txn.put(b"k", k),
                "cursor.put": lambda k: cur.put(k, b"v"), "replace": lambda k: txn.replace(k, b"v"),
                "cursor.replace": lambda k: cur.replace(k, b"v"), "delete": lambda k: txn.delete(k),
                "putmulti": lambda k: cur.putmulti([(k, b"v")]), "cursor.delete": lambda k: cur.delete(),
                "key": lambda k: cur.key(), "value": lambda k: cur.value(),
            }
            for key in keys:
                for name, call in calls.items():
                    out.append((db_name, name, repr(key)[:40], _outcome(lambda: call(key))))
            for handle_name, handle in handles.items():
                for name, call in {
                    "begin": lambda h: env.begin(db=h).get(b"k00001"), "get": lambda h: txn.get(b"d01", db=h),
                    "cursor": lambda h: txn.cursor(db=h).first(), "stat": lambda h: txn.stat(h)["entries"],
                    "drop": lambda h: txn.drop(h), "put": lambda h: txn.put(b"k", b"v", db=h),
                    "pop": lambda h: txn.pop(b"d01", db=h), "Cursor": lambda h: module.Cursor(h, txn).first(),
                    "Transaction": lambda h: module.Transaction(env, db=h).get(b"k00001"),
                }.items():
                    out.append((db_name, name, handle_name, _outcome(lambda: call(handle))))
        for name, call in {"Transaction()": lambda: module.Transaction(), "Transaction(5)": lambda: module.Transaction(5),
                           "Cursor(None, txn)": lambda: module.Cursor(None, env.begin()),
                           "Cursor(db, 5)": lambda: module.Cursor(env.open_db(), 5),
                           "putmulti([])": lambda: env.begin().cursor().putmulti([]),
                           "putmulti([list])": lambda: env.begin().cursor().putmulti([[b"a", b"b"]]),
                           "drop()": lambda: env.begin().drop(None)}.items():
            out.append(("", name, "", _outcome(call)))
        env.close()
        other.close()
    mismatches = [(a, b) for a, b in zip(results[lmdb], results[compat]) if a != b]
    assert len(results[lmdb]) == len(results[compat]) > 500
    assert not mismatches, mismatches[:5]


def test_open_and_iteration_arguments_are_parsed_as_pylmdb_parses_them(tmp_path):
    """py-lmdb compares an integer argument with 0 and its limit before taking
    it as an integer, lets None keep a default (flags too), refuses
    max_readers=0 from liblmdb, and an iterator asked for neither keys nor
    values yields keys; its handles cannot be pickled. Each call, through
    py-lmdb and through compat, must give the same result or exception."""
    import pickle

    path = str(tmp_path / "db")
    env = lmdb.open(path, map_size=1 << 24, max_dbs=2)
    dups = env.open_db(b"dups", dupsort=True)
    with env.begin(write=True) as txn:
        for i in range(20):
            txn.put(b"k%03d" % i, b"v%d" % i)
            txn.put(b"d%d" % (i % 4), b"%03d" % i, db=dups)
    env.close()
    values = [-1, 0, 1, 2**31 - 1, 2**31, 2**64 - 1, 2**64, 1.5, "3", b"1", None, True, False]
    results = {}
    for module in (lmdb, compat):
        out = results[module] = []
        for name in ("map_size", "max_readers", "max_dbs", "max_spare_txns", "mode", "meminit",
                     "subdir", "lock", "readahead", "create"):
            for value in values:
                if name == "max_dbs" and value == 2**31 - 1:
                    continue  # liblmdb allocates tables of max_dbs entries: depends on the machine's memory
                def opened():
                    e = module.open(path, readonly=True, **{name: value})
                    e.close()
                    return "opened"
                out.append((name, repr(value), _outcome(opened)))
        env = module.open(path, readonly=True, lock=False, max_dbs=2)
        for value in values:
            out.append(("copyfd", repr(value), _outcome(lambda: env.copyfd(value, txn=env.begin()))))
            if value != 2**64 - 1:  # a map that size fails and closes the environment: last
                out.append(("set_mapsize", repr(value), _outcome(lambda: env.set_mapsize(value))))
        out.append(("open_db(create=None)", "", _outcome(lambda: env.open_db(b"nosuch", create=None))))
        txn = env.begin(db=env.open_db(b"dups"))
        for keys in (True, False, None):
            for values_ in (True, False, None):
                for name in ("iternext", "iternext_dup", "iternext_nodup", "iterprev", "iterprev_dup",
                             "iterprev_nodup"):
                    cur = txn.cursor()
                    cur.set_key(b"d2")
                    out.append((name, keys, values_,
                                _outcome(lambda: list(getattr(cur, name)(keys=keys, values=values_)))))
        for handle in (env, txn, txn.cursor(), env.open_db()):
            out.append(("pickle", type(handle).__name__, _outcome(lambda: pickle.dumps(handle))))
        out.append(("set_mapsize", "2**64-1", _outcome(lambda: env.set_mapsize(2**64 - 1))))
        out.append(("stat after", "", _outcome(lambda: env.stat())))
        env.close()
    expected_differences = {("pickle", "Environment")}  # compat's message says what to do instead
    mismatches = [(a, b) for a, b in zip(results[lmdb], results[compat])
                  if a != b and a[:2] not in expected_differences]
    assert len(results[lmdb]) == len(results[compat]) > 200
    assert not mismatches, mismatches[:5]


def test_getmulti_and_open_db_names_match_pylmdb(tmp_path):
    """getmulti with dupfixed_bytes returns what MDB_GET_MULTIPLE returns: each
    leaf page of a key's duplicates packed and cut into dupfixed_bytes pieces
    (a remainder dropped per page), MDB_INCOMPATIBLE on a database that is not
    MDB_DUPFIXED; its argument errors are TypeErrors. open_db takes the name
    as a C string (it ends at the first NUL; empty is MDB_BAD_VALSIZE) and
    checks txn's type. Compared with py-lmdb, duplicates spanning many pages
    included."""
    path = str(tmp_path / "db")
    env = lmdb.open(path, map_size=1 << 27, max_dbs=4)
    fixed = env.open_db(b"fixed", dupsort=True, dupfixed=True)
    dups = env.open_db(b"dups", dupsort=True)
    with env.begin(write=True) as txn:
        for g in range(4):
            for i in range(g * 1500 + 3):  # up to 4,503 duplicates: many leaf pages
                txn.put(b"g%d" % g, b"%06d" % i, db=fixed)
            txn.put(b"g%d" % g, b"%03d" % g, db=dups)
        txn.put(b"plain", b"v")
    env.close()

    def plain(x):  # py-lmdb's memoryviews die with the transaction: copied at once
        if isinstance(x, memoryview):
            return bytes(x)
        if isinstance(x, (list, tuple)):
            return type(x)(plain(i) for i in x)
        return x
    results = {}
    for module in (lmdb, compat):
        env = module.open(path, readonly=True, lock=False, max_dbs=3)
        out = results[module] = []
        for name in ("fixed", "dups", None):
            db = env.open_db(name.encode()) if name else env.open_db()
            for buffers in (False, True):
                txn = env.begin(db=db, buffers=buffers)
                for size in (None, 0, 1, 5, 6, 7, 13, 6000, 100000, -1, "6"):
                    for dupdata, keyfixed in ((True, False), (True, True), (False, False), (False, True)):
                        cur = txn.cursor()
                        out.append((name, buffers, size, dupdata, keyfixed, _outcome(lambda: plain(cur.getmulti(
                            [b"g0", b"g3", b"zz", b"g2", b"plain"], dupdata=dupdata, dupfixed_bytes=size,
                            keyfixed=keyfixed))), _outcome(lambda: plain((cur.key(), cur.value())))))
                cur = txn.cursor()
                out.append((name, "values=False", _outcome(lambda: plain(cur.getmulti([b"g1"], values=False))),
                            _outcome(lambda: plain(cur.getmulti([b"g1"], values=False, dupdata=True)))))
        for name in (b"", b"\0", b"dups\0zz", b"nosuch\0", bytearray(b"fixed"), b"plain"):
            out.append(("open_db", name, _outcome(lambda: env.open_db(name).flags())))
        for txn in (5, "x", env.begin()):
            out.append(("open_db(txn=)", type(txn).__name__, _outcome(lambda: env.open_db(b"dups", txn=txn).flags())))
        env.close()
        small = module.open(path, readonly=True, lock=False, max_dbs=0)
        out.append(("max_dbs=0", _outcome(lambda: small.open_db(b""))))
        small.close()
    mismatches = [(a, b) for a, b in zip(results[lmdb], results[compat]) if a != b]
    assert len(results[lmdb]) == len(results[compat]) > 250
    assert not mismatches, [m[0][-1:] + m[1][-1:] for m in mismatches[:3]]
