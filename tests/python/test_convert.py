"""lmdbloader convert: every source kind, read back through Reader and py-lmdb
byte for byte; interrupted runs leave nothing; shards read as one dataset."""

import json
import os
import signal
import struct
import subprocess
import time

import msgpack
import pytest

import lmdbloader

from conftest import frame_bytes, write_video_folders

lmdb = pytest.importorskip("lmdb")


def pylmdb_records(path, count):
    with lmdb.open(path, readonly=True, lock=False) as env, env.begin() as txn:
        return [txn.get(struct.pack(">Q", i)) for i in range(count)]


def check_both_ways(path):
    r = lmdbloader.Reader(path)
    ours = [r[i] for i in range(len(r))]
    assert ours == pylmdb_records(path, len(r))
    return r, ours


def test_image_folder(tmp_path):
    for cls in ("cat", "dog"):
        os.makedirs(tmp_path / "src" / cls)
        for i in range(3):
            (tmp_path / "src" / cls / f"{i}.jpg").write_bytes(f"{cls}{i}".encode() * 100)
    summary = lmdbloader.convert(tmp_path / "src", tmp_path / "out", kind="image_folder")
    assert summary["records"] == 6
    r, records = check_both_ways(str(tmp_path / "out"))
    decoded = [msgpack.unpackb(x) for x in records]
    assert [d["name"] for d in decoded] == [r.name(i) for i in range(6)]
    assert decoded[4] == {"image": b"dog1" * 100, "label": 1, "name": "dog/1.jpg"}
    assert list(r.column("label")) == [0, 0, 0, 1, 1, 1]
    assert r.manifest["label_names"] == ["cat", "dog"]


def test_video_folder_with_frame_step(tmp_path):
    write_video_folders(str(tmp_path / "src"), videos=5, frames=6, frame_size=100, classes=2)
    lmdbloader.convert(tmp_path / "src", tmp_path / "out", kind="video_folder", frame_step=2)
    r, records = check_both_ways(str(tmp_path / "out"))
    rec = msgpack.unpackb(records[0])
    assert rec["name"] == "class_0/video_00000"
    assert rec["frames"] == [frame_bytes(0, f, 100) for f in (0, 2, 4)]


def test_jsonl_with_extra_columns(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"A" * 10)
    (tmp_path / "b.bin").write_bytes(b"B" * 20)
    lines = [{"name": "x", "path": "a.bin", "label": 7, "weight": 0.5, "source": "web"},
             {"name": "y", "paths": ["a.bin", "b.bin"], "label": 2, "weight": 1.5, "source": "cam"}]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    lmdbloader.convert(tmp_path / "m.jsonl", tmp_path / "out", kind="jsonl", order="given")
    r, records = check_both_ways(str(tmp_path / "out"))
    assert msgpack.unpackb(records[1]) == {"frames": [b"A" * 10, b"B" * 20], "label": 2, "name": "y",
                                           "source": "cam", "weight": 1.5}
    assert list(r.column("label")) == [7, 2]
    assert list(r.column("weight")) == [0.5, 1.5]


def test_existing_lmdb_keeps_keys_as_names_and_values_as_they_are(tmp_path):
    src = str(tmp_path / "src")
    values = {f"key-{i}".encode(): msgpack.packb({"i": i, "data": os.urandom(i * 10)}) for i in range(50)}
    with lmdb.open(src, map_size=1 << 26) as env, env.begin(write=True) as txn:
        for k, v in values.items():
            txn.put(k, v)
    lmdbloader.convert(src, tmp_path / "out", kind="lmdb")
    r, records = check_both_ways(str(tmp_path / "out"))
    keys = sorted(values)
    assert records == [values[k] for k in keys]
    assert [r.name(i) for i in range(len(r))] == keys  # an LMDB's keys are bytes
    assert r.keyed_by_names and all(r.get(k) == values[k] for k in keys)


def test_bad_inputs_name_the_culprit_and_leave_nothing(tmp_path):
    (tmp_path / "m.jsonl").write_text('{"name": "a", "path": "a.bin"}\n{not json\n')
    (tmp_path / "a.bin").write_bytes(b"a")
    out = tmp_path / "out"
    with pytest.raises(lmdbloader.ConvertError, match=r"m.jsonl:2: not a JSON object"):
        lmdbloader.convert(tmp_path / "m.jsonl", out, kind="jsonl")
    assert not out.exists()
    (tmp_path / "m.jsonl").write_text('{"name": "a", "path": "../../etc/passwd"}\n')
    with pytest.raises(lmdbloader.ConvertError, match="outside"):
        lmdbloader.convert(tmp_path / "m.jsonl", out, kind="jsonl")
    (tmp_path / "m.jsonl").write_text('{"name": "a", "path": "a.bin"}\n{"name": "a", "path": "a.bin"}\n')
    with pytest.raises(lmdbloader.ConvertError, match="duplicate name 'a'"):
        lmdbloader.convert(tmp_path / "m.jsonl", out, kind="jsonl")
    (tmp_path / "m.jsonl").write_text('{"name": "a", "path": "a.bin"}\n{"name": "b", "path": "gone.bin"}\n')
    with pytest.raises(OSError, match="gone.bin"):
        lmdbloader.convert(tmp_path / "m.jsonl", out, kind="jsonl")
    assert not out.exists() and not list(tmp_path.glob("out.tmp-*"))
    summary = lmdbloader.convert(tmp_path / "m.jsonl", out, kind="jsonl", skip_bad=True)
    assert summary["records"] == 1 and "gone.bin" in summary["skipped"][0]
    os.makedirs(tmp_path / "empty")
    with pytest.raises(lmdbloader.ConvertError, match="no images found"):
        lmdbloader.convert(tmp_path / "empty", tmp_path / "o2", kind="image_folder")
    with pytest.raises(lmdbloader.ConvertError, match="exists"):
        lmdbloader.convert(tmp_path / "m.jsonl", out, kind="jsonl")
    proc = subprocess.run(["lmdbloader", "convert", "--from", "nope", "x", "y"], capture_output=True, text=True)
    assert proc.returncode == 1 and "--from nope: kind must be one of image_folder, video_folder, jsonl, lmdb" in proc.stderr


def test_a_file_bigger_than_a_record_can_hold_is_refused_not_cut(tmp_path):
    """LMDB stores values up to 2^32-1 bytes, and msgpack's bin length is 32
    bits: a 4.5 GiB file was once stored cut to its size modulo 2^32, and the
    conversion reported success. The file here is sparse, and refused from
    its size before a byte is read."""
    os.makedirs(tmp_path / "src" / "cls")
    with open(tmp_path / "src" / "cls" / "huge.jpg", "wb") as f:
        f.truncate(4500 << 20)
    (tmp_path / "src" / "cls" / "small.jpg").write_bytes(b"small")
    out = tmp_path / "out"
    with pytest.raises(lmdbloader.ConvertError, match=r"huge.jpg: 4718592000 bytes; a record holds at most 4294967295"):
        lmdbloader.convert(tmp_path / "src", out, kind="image_folder")
    assert not out.exists()
    proc = subprocess.run(["lmdbloader", "convert", "--from", "image_folder", str(tmp_path / "src"), str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "huge.jpg: 4718592000 bytes" in proc.stderr and not out.exists()
    summary = lmdbloader.convert(tmp_path / "src", out, kind="image_folder", skip_bad=True)
    assert summary["records"] == 1 and "huge.jpg" in summary["skipped"][0]
    r = lmdbloader.Reader(str(out))
    assert r.name(0) == "cls/small.jpg" and msgpack.unpackb(r[0])["image"] == b"small"


def test_a_manifest_naming_a_fifo_or_a_folder_is_refused_without_waiting(tmp_path):
    """Opening a FIFO for reading waits for a writer: the conversion would
    hang. Only regular files are records."""
    os.mkfifo(tmp_path / "pipe.jpg")
    os.makedirs(tmp_path / "dir.jpg")
    for target, kind in (("pipe.jpg", "a FIFO"), ("dir.jpg", "a directory")):
        (tmp_path / "m.jsonl").write_text(json.dumps({"name": "a", "path": target}) + "\n")
        proc = subprocess.run(["lmdbloader", "convert", "--from", "jsonl", str(tmp_path / "m.jsonl"),
                               str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1, proc.stderr
        assert f"{target}: not a regular file ({kind})" in proc.stderr and not (tmp_path / "out").exists()


def test_a_refused_record_leaves_the_writer_as_it_was(tmp_path):
    """A record refused for its columns or name changes nothing: the caller
    may skip it, and the columns stay aligned with the records."""
    path = str(tmp_path / "c")
    with lmdbloader.CorpusWriter(path) as w:
        w.add("a", b"1", label=1, y=0)
        with pytest.raises(ValueError, match="column 'x' that earlier records lack"):
            w.add("b", b"2", label=2, x=0)
        with pytest.raises(ValueError, match="duplicate name 'a'"):
            w.add("a", b"3", label=3, y=0)
        w.add("c", b"4", label=4, y=1)
    r = lmdbloader.Reader(path)
    assert [r[i] for i in range(len(r))] == [b"1", b"4"]
    assert list(r.column("label")) == [1, 4] and list(r.column("y")) == [0, 1]


def test_sigkill_midway_leaves_nothing_then_rerun_completes(tmp_path):
    write_video_folders(str(tmp_path / "src"), videos=400, frames=10, frame_size=64 * 1024)
    out = tmp_path / "out"
    cmd = ["lmdbloader", "convert", "--from", "video_folder", str(tmp_path / "src"), str(out), "--no-progress"]
    proc = subprocess.Popen(cmd)
    deadline = time.time() + 30
    while not list(tmp_path.glob("out.tmp-*")) and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    subprocess.run(cmd, check=True)
    r, _ = check_both_ways(str(out))
    assert len(r) == 400


def test_four_shards_read_as_one_dataset(tmp_path):
    write_video_folders(str(tmp_path / "src"), videos=37, frames=2, frame_size=50)
    for i in range(4):  # four independent jobs, as in a SLURM array
        subprocess.run(["lmdbloader", "convert", "--from", "video_folder", str(tmp_path / "src"),
                        str(tmp_path / "shards"), "--num-shards", "4", "--shard-index", str(i)], check=True)
    subprocess.run(["lmdbloader", "shard-list", str(tmp_path / "shards")], check=True)
    r = lmdbloader.Reader(str(tmp_path / "shards"))
    assert len(r) == 37
    names = [msgpack.unpackb(r[i])["name"] for i in range(len(r))]
    assert sorted(names) == sorted(set(names)) and len(set(names)) == 37
    assert [r.name(i) for i in range(37)] == names
    assert len(r.column("label")) == 37
    torch = pytest.importorskip("torch")
    ds = lmdbloader.LmdbDataset(str(tmp_path / "shards"))
    loader = torch.utils.data.DataLoader(ds, batch_size=5, num_workers=2, collate_fn=lambda b: b)
    assert sorted(rec["name"] for batch in loader for rec in batch) == sorted(names)


def test_verify_reports_a_manifest_that_miscounts_records(tmp_path):
    path = str(tmp_path / "c")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(3):
            w.add(f"n{i}", {"a": i})
    ok = subprocess.run(["lmdbloader", "verify", path], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    with lmdb.open(path, lock=False) as env, env.begin(write=True) as txn:
        manifest = json.loads(txn.get(b"__lmdbloader__/manifest"))
        manifest["records"] = 99
        txn.put(b"__lmdbloader__/manifest", json.dumps(manifest).encode())
    bad = subprocess.run(["lmdbloader", "verify", path], capture_output=True, text=True)
    assert bad.returncode == 1 and "the manifest is damaged (checksum mismatch)" in bad.stderr
    assert path in bad.stderr
    # Without its checksum the manifest is read, and its count checked.
    with lmdb.open(path, lock=False) as env, env.begin(write=True) as txn:
        txn.delete(b"__lmdbloader__/manifest.xxh3")
    bad = subprocess.run(["lmdbloader", "verify", path], capture_output=True, text=True)
    assert bad.returncode == 1 and "manifest says 99 records, the database holds 3" in bad.stderr


def _image_folder(root, tag, n=3):
    os.makedirs(root / "cls", exist_ok=True)
    for i in range(n):
        (root / "cls" / f"{i}.jpg").write_bytes(f"{tag}{i}".encode() * 50)


@pytest.mark.parametrize("point", ["writer-before-swap", "writer-after-swap"])
def test_overwrite_killed_at_the_swap_leaves_a_whole_corpus(tmp_path, point):
    _image_folder(tmp_path / "old", "old")
    _image_folder(tmp_path / "new", "new", n=5)
    out = tmp_path / "out"
    subprocess.run(["lmdbloader", "convert", "--from", "image_folder", str(tmp_path / "old"), str(out)], check=True)
    env = dict(os.environ, LMDBLOADER_TEST_KILL_AT=point)
    killed = subprocess.run(["lmdbloader", "convert", "--from", "image_folder", "--overwrite",
                             str(tmp_path / "new"), str(out)], env=env, capture_output=True)
    assert killed.returncode == -signal.SIGKILL
    r = lmdbloader.Reader(str(out))  # a whole corpus, old or new, checked by its checksums
    assert len(r) == (3 if point == "writer-before-swap" else 5)
    assert all(r.decode(i)["name"] for i in range(len(r)))
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith("out.")]
    assert leftovers, "the kill should have left the other corpus under a temporary name"
    # The next run removes what the killed one left, and completes.
    subprocess.run(["lmdbloader", "convert", "--from", "image_folder", "--overwrite",
                    str(tmp_path / "new"), str(out)], check=True)
    assert len(lmdbloader.Reader(str(out))) == 5
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("out.")] == []


@pytest.mark.parametrize("line,why", [
    ({"name": "a", "path": "f.bin", "image": "x"}, "field 'image' is reserved"),
    ({"name": "a", "path": "f.bin", "label": 2**64 - 1}, "'label' must be an integer between -2^53 and 2^53"),
    ({"name": "a", "path": "f.bin", "label": 2**60}, "'label' must be an integer between -2^53 and 2^53"),
    ({"name": "a", "path": "f.bin", "id": 2**60}, "field 'id' is an integer beyond 2^53"),
])
def test_jsonl_fields_that_cannot_be_stored_exactly_are_refused(tmp_path, line, why):
    (tmp_path / "f.bin").write_bytes(b"payload")
    (tmp_path / "m.jsonl").write_text(json.dumps(line) + "\n")
    res = subprocess.run(["lmdbloader", "convert", "--from", "jsonl", str(tmp_path / "m.jsonl"),
                          str(tmp_path / "out")], capture_output=True, text=True)
    assert res.returncode == 1, res.stderr
    assert why in res.stderr and "m.jsonl:1" in res.stderr
    assert not (tmp_path / "out").exists()


def test_names_that_are_not_utf8_are_refused_naming_the_path(tmp_path):
    src = os.fsencode(str(tmp_path / "src"))
    os.makedirs(os.path.join(src, b"cl\xffass"))
    with open(os.path.join(src, b"cl\xffass", b"a.jpg"), "wb") as f:
        f.write(b"x")
    res = subprocess.run([b"lmdbloader", b"convert", b"--from", b"image_folder", src,
                          os.fsencode(str(tmp_path / "out"))], capture_output=True)
    assert res.returncode == 1, res.stderr
    assert b"not valid UTF-8" in res.stderr and b"cl\xffass" in res.stderr
    assert not (tmp_path / "out").exists()


def test_a_negative_shard_index_is_refused(tmp_path):
    """-1 is the command's "every shard"; another negative index wrote every shard silently."""
    os.makedirs(tmp_path / "src" / "cls")
    (tmp_path / "src" / "cls" / "a.jpg").write_bytes(b"a")
    proc = subprocess.run(["lmdbloader", "convert", "--from", "image_folder", str(tmp_path / "src"), str(tmp_path / "out"),
                           "--num-shards", "3", "--shard-index", "-2"], capture_output=True, text=True)
    assert proc.returncode == 1 and "--shard-index -2: shard_index must be between -1 and 99998, got -2" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


def test_opening_shard_parts_without_a_shard_list_says_to_write_one(tmp_path):
    os.makedirs(tmp_path / "src" / "cls")
    (tmp_path / "src" / "cls" / "a.jpg").write_bytes(b"a")
    out = tmp_path / "out"
    lmdbloader.convert(tmp_path / "src", out, kind="image_folder", num_shards=2, shard_index=0)
    with pytest.raises(FileNotFoundError, match=r"holds shard parts but no shards.json: run `lmdbloader shard-list"):
        lmdbloader.Reader(str(out))
