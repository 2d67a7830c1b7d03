"""Many ranks: a shard set written by four independent conversion jobs (the
SLURM array script, run in parallel), read by torchrun with 2 ranks x 2
persistent workers under DistributedSampler (the SLURM launch script): per
epoch the ranks' records are disjoint and cover the set, and every worker
stays under its budget by the kernel's count. And a StatefulDataLoader
stopped mid-epoch resumes with exactly the uninterrupted order."""

import json
import os
import shutil
import subprocess

import pytest

torch = pytest.importorskip("torch")

import lmdbloader  # noqa: E402

from conftest import MiB, stop_and_resume  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUDGET = 16 * MiB
SLACK = 32 * MiB  # batches in flight, the interpreter's own growth


def image_folder(root, classes=4, per_class=50):
    for c in range(classes):
        os.makedirs(root / f"class{c}")
        for i in range(per_class):
            (root / f"class{c}" / f"{i:03d}.jpg").write_bytes(bytes([c, i % 256]) * (1000 + 37 * i))
    return classes * per_class


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="needs torchrun")
def test_torchrun_two_ranks_read_a_shard_set_written_by_four_parallel_jobs(tmp_path):
    n = image_folder(tmp_path / "src")
    out = tmp_path / "set"
    env = dict(os.environ, SRC=str(tmp_path / "src"), OUT=str(out), KIND="image_folder",
               SLURM_ARRAY_TASK_COUNT="4")
    jobs = [subprocess.Popen(["bash", os.path.join(ROOT, "scripts/slurm/convert_shards.sbatch")],
                             env=dict(env, SLURM_ARRAY_TASK_ID=str(k)), stderr=subprocess.PIPE)
            for k in range(4)]
    for job in jobs:
        assert job.wait(timeout=300) == 0, job.stderr.read().decode()
    subprocess.run(["bash", os.path.join(ROOT, "scripts/slurm/shard_list.sbatch")], env=env, check=True)
    assert len(lmdbloader.Reader(str(out))) == n

    results = tmp_path / "run"
    launch = subprocess.run(
        ["bash", os.path.join(ROOT, "scripts/slurm/train.sbatch"), "--epochs", "2", "--workers", "2",
         "--rss-budget", str(BUDGET)],
        env=dict(os.environ, DATA=str(out), OUT=str(results), NPROC_PER_NODE="2", OMP_NUM_THREADS="1"),
        capture_output=True, text=True, timeout=600)
    assert launch.returncode == 0, launch.stderr[-3000:]
    ranks = [json.loads((results / f"rank{r}.json").read_text()) for r in range(2)]
    assert all(r["world"] == 2 for r in ranks)
    everything = {lmdbloader.Reader(str(out)).decode(i)["name"] for i in range(n)}
    for epoch in range(2):
        a, b = (set(r["epochs"][epoch]) for r in ranks)
        assert len(a) == len(ranks[0]["epochs"][epoch]) and len(b) == len(ranks[1]["epochs"][epoch])
        assert not a & b, f"epoch {epoch}: ranks share {len(a & b)} records"
        assert a | b == everything
    assert ranks[0]["epochs"][0] != ranks[0]["epochs"][1], "set_epoch should reshuffle"
    growth = [g for r in ranks for g in r["worker_rss_growth"].values()]
    assert len(growth) == 4, "2 ranks x 2 persistent workers"
    assert max(growth) <= BUDGET + SLACK, [g / MiB for g in growth]


def test_stateful_dataloader_resumes_mid_epoch_with_the_uninterrupted_order(tmp_path):
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    path = str(tmp_path / "c")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(103):
            w.add(f"r{i}", {"x": i})

    def loader():
        ds = lmdbloader.LmdbDataset(path, transform=lambda rec: rec["x"])
        return sdl.StatefulDataLoader(ds, batch_size=4, shuffle=True, num_workers=2,
                                      generator=torch.Generator().manual_seed(7))

    uninterrupted, resumed = stop_and_resume(loader, stop_after=9)
    assert sorted(uninterrupted) == list(range(103))
    assert resumed == uninterrupted
