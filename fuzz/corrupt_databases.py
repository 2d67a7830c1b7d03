"""Corruption fuzzer over whole database files.

Writes corpora (lmdbloader.CorpusWriter) and foreign LMDBs (py-lmdb: small
and overflow values, named, integerkey and dupsort databases), then, case by
case, damages a copy (bit flips, byte runs, truncation, page swaps, zeroed
pages, random page-header fields, meta-page fields, or a damaged saved index
beside an intact file) and opens and reads everything in a fresh process:
through Python (a forked child: Reader in pread or mmap mode, every record by
position, in batches, decoded; foreign LMDBs also through lmdbloader.compat,
cursor moves after misses and a compacting copy) or through the command line (`lmdbloader
verify`, `lmdbloader scan --mode mmap`). Each case ends as one of:

  read      the damage missed what was read, or the reader coped: all reads fine
  error     a clear error (lmdbloader.Error, OSError, KeyError, IndexError, ValueError; exit status 1)
  wrong     a corpus record came back with bytes other than the ones written (must be 0)
  plain     a damaged corpus read as a plain LMDB, every record right (reported apart)
  unexpected  any other Python exception (must be 0)
  crash     killed by a signal (must be 0)
  hang      no answer within --timeout seconds (must be 0)

    python3 fuzz/corrupt_databases.py --cases 10000 [--seed 1] [--cli-every 10]

Exits 1 when any case crashed, hung, returned wrong bytes or raised an
unexpected exception; the inputs of such cases are kept under --keep.
"""

import argparse
import collections
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import lmdb
import msgpack

import lmdbloader

PAGE = 4096
OK_EXCEPTIONS = (lmdbloader.Error, OSError, KeyError, IndexError, ValueError)


def build_bases(root, rng):
    """{name: (dir, expected records or None)}; corpora know their records."""
    os.makedirs(root)
    bases = {}
    for n, (lo, hi) in {"corpus_small": (50, 1500), "corpus_overflow": (3000, 20000)}.items():
        path = os.path.join(root, n)
        records = []
        with lmdbloader.CorpusWriter(path) as w:
            for i in range(40 if "small" in n else 12):
                rec = {"image": rng.randbytes(rng.randint(lo, hi)), "label": i % 4, "name": f"{n}/{i}"}
                w.add(f"{n}/{i}", rec, label=i % 4)
                records.append(msgpack.packb(rec))
        bases[n] = (path, records)
    foreign = {
        "plain_small": dict(records=[(b"key%05d" % i, rng.randbytes(rng.randint(0, 300))) for i in range(300)]),
        "plain_overflow": dict(records=[(b"k%d" % i, rng.randbytes(rng.randint(2000, 30000))) for i in range(10)]),
        "named": dict(records=[(b"n%d" % i, rng.randbytes(50)) for i in range(60)], db=b"named"),
        "integerkey": dict(records=[(struct.pack("=Q", i * 977), b"v%d" % i) for i in range(200)], flags=dict(integerkey=True)),
        "dupsort": dict(records=[(b"k%d" % (i % 7), b"dup%04d" % i) for i in range(300)], flags=dict(dupsort=True)),
    }
    # Each in LMDB 0.9's data format and in LMDB 1.0's (py-lmdb 3's lib_version=1).
    foreign.update({n + "_lmdb10": dict(spec, lib_version=1) for n, spec in list(foreign.items())})
    for n, spec in foreign.items():
        path = os.path.join(root, n)
        with lmdb.open(path, map_size=1 << 24, max_dbs=2, lib_version=spec.get("lib_version", 0)) as env:
            db = env.open_db(spec.get("db", b"flagged"), **spec.get("flags", {})) if ("db" in spec or "flags" in spec) else None
            with env.begin(write=True, db=db) as txn:
                for k, v in spec["records"]:
                    txn.put(k, v, db=db)
        bases[n] = (path, None)
    return bases  # corpora carry lmdbloader.idx beside their data (the "index" mutation)


def mutate(data, rng):
    """(kind, damaged bytes) of the data file."""
    b = bytearray(data)
    pages = len(b) // PAGE
    kind = rng.choice(["flip", "flip", "run", "truncate", "swap", "zero", "header", "meta", "node"])
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == "run":
        i = rng.randrange(len(b))
        n = rng.randint(1, 256)
        b[i:i + n] = rng.randbytes(min(n, len(b) - i))
    elif kind == "truncate":
        del b[rng.randrange(len(b)):]
    elif kind == "swap" and pages > 3:
        x, y = rng.randrange(2, pages), rng.randrange(2, pages)
        b[x * PAGE:(x + 1) * PAGE], b[y * PAGE:(y + 1) * PAGE] = b[y * PAGE:(y + 1) * PAGE], b[x * PAGE:(x + 1) * PAGE]
    elif kind == "zero" and pages > 2:
        x = rng.randrange(2, pages)
        b[x * PAGE:(x + 1) * PAGE] = bytes(PAGE)
    elif kind == "header" and pages > 2:  # a page's pgno, flags, lower/upper
        x = rng.randrange(2, pages)
        off, size = rng.choice([(0, 8), (10, 2), (12, 2), (14, 2), (12, 4)])
        b[x * PAGE + off:x * PAGE + off + size] = rng.randbytes(size)
    elif kind == "meta":  # a field of a meta page: map size, trees, last page, txn id
        m = rng.randrange(2) * PAGE
        off = rng.choice([32, 40, 44, 46, 48, 80, 88, 92, 94, 96, 120, 128, 136, 144])
        size = 2 if off in (44, 46, 92, 94) else 8 if off != 40 and off != 88 else 4
        b[m + off:m + off + size] = rng.choice([rng.randbytes(size), b"\xff" * size, bytes(size)])
    elif kind == "node" and pages > 2:  # a node of some page: sizes, flags, key size, child page
        x = rng.randrange(2, pages)
        lower = struct.unpack_from("<H", b, x * PAGE + 12)[0]
        if 16 < lower < PAGE:
            k = rng.randrange((lower - 16) // 2)
            ptr = struct.unpack_from("<H", b, x * PAGE + 16 + 2 * k)[0]
            if ptr + 8 <= PAGE:
                f = rng.randrange(4) * 2
                b[x * PAGE + ptr + f:x * PAGE + ptr + f + 2] = rng.randbytes(2)
    else:
        i = rng.randrange(len(b))
        b[i] ^= 0xff
        kind = "flip"
    return kind, bytes(b)


def read_everything(path, mode, expected):
    """Runs in the child. Exit status: 0 read, 1 clear error, 3 wrong bytes, 4 unexpected exception."""
    try:
        r = lmdbloader.Reader(path, mode=mode)
        n = len(r)
        records = [r[i] for i in range(n)]
        if records != r.get_batch(list(range(n))):
            os._exit(3)
        if expected is not None:
            # Record i is the value under key i, whatever the reader took the file for.
            for i in range(n):
                key = r.key(i)
                if len(key) == 8 and struct.unpack(">Q", key)[0] < len(expected) and \
                        records[i] != expected[struct.unpack(">Q", key)[0]]:
                    os._exit(3)
            if r.manifest is None:
                os._exit(1 if n == 0 else 5)  # read as a plain LMDB: reported apart
            r.decode_batch(list(range(n)))
            for i in range(n):
                r.name(i)
            r.column("label")
        else:
            for i in range(n):
                try:
                    r.decode(i)
                except lmdbloader.DecodeError:
                    pass
            for i in range(n):
                r.get(r.key(i))
            through_compat(path)
        os._exit(0)
    except OK_EXCEPTIONS:
        os._exit(1)
    except BaseException:  # noqa: BLE001 - the finding itself
        import traceback
        traceback.print_exc()
        os._exit(4)


def through_compat(path):
    """py-lmdb's API over a foreign LMDB: a walk, misses followed by moves
    (they read the leaf layout), and a compacting copy (liblmdb, in a child
    process, after the checked reader)."""
    import lmdbloader.compat as compat
    env = compat.open(path, readonly=True, lock=False, max_dbs=4, subdir=os.path.isdir(path))
    with env.begin() as txn:
        cur = txn.cursor()
        keys = [k for k, _ in cur]
        for k in keys[::max(1, len(keys) // 8)]:
            if cur.set_key(k + b"\x00"):
                cur.next()
            cur.next()
            cur.prev()
    out = tempfile.mkdtemp(prefix="compat-copy-")
    try:
        env.copy(out, compact=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    env.close()


def run_python(path, mode, expected, timeout):
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        read_everything(path, mode, expected)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "hang"
        time.sleep(0.001)
    if os.WIFSIGNALED(status):
        return "crash"
    return {0: "read", 1: "error", 3: "wrong", 4: "unexpected", 5: "plain"}.get(os.WEXITSTATUS(status), "unexpected")


def run_cli(path, mode, timeout):
    """pread: `verify`, then a default `scan` (batches prefetched on a second
    thread); mmap: `scan --mode mmap`. The worst outcome counts."""
    commands = ([["lmdbloader", "verify", path], ["lmdbloader", "scan", path]] if mode == "pread"
                else [["lmdbloader", "scan", path, "--mode", "mmap"]])
    worst = "read"
    for cmd in commands:
        try:
            res = subprocess.run(cmd, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "hang"
        if res.returncode < 0:
            return "crash"
        outcome = {0: "read", 1: "error"}.get(res.returncode, "unexpected")
        if outcome == "unexpected":
            return outcome
        worst = "error" if outcome == "error" else worst
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cli-every", type=int, default=10, help="every k-th case goes through the command line")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--keep", default="fuzz-findings", help="where inputs of bad cases are copied")
    ap.add_argument("--json", help="write the counts here")
    args = ap.parse_args()
    if args.cases < 1 or args.cli_every < 1 or args.timeout <= 0:
        ap.error("--cases, --cli-every and --timeout must be positive")
    rng = random.Random(args.seed)
    root = tempfile.mkdtemp(prefix="lmdbloader-fuzz-")
    # Indexes the readers build go here, not into the user's cache.
    os.environ["LMDBLOADER_INDEX_DIR"] = os.path.join(root, "index-cache")
    counts = collections.Counter()
    by_kind = collections.defaultdict(collections.Counter)
    bad = []
    start = time.monotonic()
    try:
        bases = build_bases(os.path.join(root, "bases"), rng)
        def saved_index(p):
            idx = os.path.join(p, "lmdbloader.idx")
            return open(idx, "rb").read() if os.path.exists(idx) else None
        pristine = {n: (open(os.path.join(p, "data.mdb"), "rb").read(), saved_index(p),
                        os.stat(os.path.join(p, "data.mdb")))
                    for n, (p, _) in bases.items()}
        case_dir = os.path.join(root, "case")
        for case in range(args.cases):
            name = rng.choice(sorted(bases))
            data, index, st = pristine[name]
            shutil.rmtree(case_dir, ignore_errors=True)
            os.makedirs(case_dir)
            data_path = os.path.join(case_dir, "data.mdb")
            if index is not None and rng.random() < 0.2:  # the saved index damaged, the data intact
                kind = "index"
                idx = bytearray(index)
                for _ in range(rng.randint(1, 4)):
                    idx[rng.randrange(len(idx))] ^= 1 << rng.randrange(8)
                with open(data_path, "wb") as f:
                    f.write(data)
                with open(os.path.join(case_dir, "lmdbloader.idx"), "wb") as f:
                    f.write(idx)
                # Same size and mtime as when indexed; device and inode differ
                # (a copy), and the index's checksum no longer matches: either
                # way it must be rebuilt, never trusted.
                os.utime(data_path, ns=(st.st_atime_ns, st.st_mtime_ns))
            else:
                kind, damaged = mutate(data, rng)
                with open(data_path, "wb") as f:
                    f.write(damaged)
            mode = "mmap" if case % 2 else "pread"
            via_cli = case % args.cli_every == args.cli_every - 1
            expected = bases[name][1]
            outcome = run_cli(case_dir, mode, args.timeout) if via_cli else run_python(case_dir, mode, expected, args.timeout)
            counts[outcome] += 1
            by_kind[kind][outcome] += 1
            if outcome in ("crash", "hang", "wrong", "unexpected", "plain"):
                keep = os.path.join(args.keep, f"case{case}-{name}-{kind}-{mode}-{'cli' if via_cli else 'python'}-{outcome}")
                shutil.copytree(case_dir, keep, dirs_exist_ok=True)
                bad.append(keep)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    seconds = time.monotonic() - start
    report = {"cases": args.cases, "seed": args.seed, "seconds": round(seconds, 1), "outcomes": dict(counts),
              "by_mutation": {k: dict(v) for k, v in sorted(by_kind.items())}, "kept": bad}
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
