"""The budget over atomistic corpora: a DataLoader with 2 persistent workers
over samples="deepmd" and samples="aselmdb" stays under its budget by the
kernel's count (each worker's /proc/<pid>/statm), while the same job over
the owners' readers (DeePMD-kit's LmdbDataReader, ase_db_backends'
LMDBDatabase, each opened in the worker as py-lmdb 3 requires) grows with
the file."""

import functools
import os

import numpy as np
import pytest
import torch.utils.data

import lmdbloader
from atomistic_corpora import ase_reader, deepmd_reader, write_aselmdb, write_deepmd
from conftest import MiB, statm_rss, warm_page_cache
from lmdbloader.memory import children

BUDGET = 4 * MiB
SLACK = 4 * MiB  # a batch in flight, and what decoding leaves in the worker's heap (measured: 1.8 MiB in all)


class OwnersDataset(torch.utils.data.Dataset):
    """The owners' reader as a training script wraps it: opened lazily in
    the process that reads (py-lmdb 3 refuses a file its parent opened)."""

    def __init__(self, path, kind, count):
        self.path, self.kind, self.count = path, kind, count
        self.reader = None

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        if self.reader is None:
            self.reader = deepmd_reader(self.path) if self.kind == "deepmd" else ase_reader(self.path)
        if self.kind == "deepmd":
            return float(self.reader[i]["energy"][0])
        return float(self.reader._get_row_by_index(i).energy)


def record_start(folder, worker_id):
    with open(os.path.join(folder, str(os.getpid())), "w") as f:
        f.write(str(statm_rss()))


def energy(sample):
    value = sample["energies"] if "energies" in sample else sample["energy"]
    return float(np.asarray(value).reshape(-1)[0])


def worker_growth(dataset, folder, epochs):
    """Each worker's peak RSS growth over the epochs, and the energies read."""
    os.makedirs(folder)
    loader = torch.utils.data.DataLoader(dataset, batch_size=16, shuffle=True, num_workers=2,
                                         persistent_workers=True, collate_fn=lambda batch: batch,
                                         worker_init_fn=functools.partial(record_start, folder))
    peak, energies, me = {}, [], os.getpid()
    for _ in range(epochs):
        for n, batch in enumerate(loader):
            energies += batch
            if n % 4 == 0:
                for pid in children(me):
                    try:
                        peak[pid] = max(peak.get(pid, 0), statm_rss(pid))
                    except (FileNotFoundError, ProcessLookupError):
                        pass
    del loader
    return {int(name): peak.get(int(name), 0) - int(open(os.path.join(folder, name)).read())
            for name in os.listdir(folder)}, energies


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("atomistic-budget")
    # 16-17 MiB each: 4x the budget, written in about 6 s.
    deepmd = write_deepmd(root / "frames.lmdb", [(300, 300), (300, 400), (200, 500)])
    ase = write_aselmdb(root / "rows.aselmdb", 700, atoms=(300, 420))
    return {"deepmd": deepmd, "aselmdb": ase}


@pytest.mark.parametrize("kind", ["deepmd", "aselmdb"])
def test_workers_stay_under_budget_while_the_owners_readers_grow(corpora, tmp_path, kind):
    path = corpora[kind]
    data = os.path.join(path, "data.mdb") if kind == "deepmd" else path
    size = os.path.getsize(data)
    assert size > 3 * BUDGET, f"{data}: {size / MiB:.1f} MiB"
    warm_page_cache(data)
    ds = lmdbloader.LmdbDataset(path, samples=kind, rss_budget=BUDGET, index_dir="none", transform=energy)
    growth, ours = worker_growth(ds, str(tmp_path / "ours"), epochs=2)
    assert len(growth) == 2
    for pid, g in growth.items():
        assert g <= BUDGET + SLACK, f"worker {pid} grew {g / MiB:.1f} MiB (budget {BUDGET / MiB} + {SLACK / MiB})"

    if kind == "deepmd" and deepmd_reader(path) is None:
        pytest.skip("deepmd-kit's LmdbDataReader does not import here")
    warm_page_cache(data)
    owners = OwnersDataset(path, kind, len(ds))
    theirs_growth, theirs = worker_growth(owners, str(tmp_path / "theirs"), epochs=1)
    assert sorted(theirs) == sorted(ours[:len(ds)])  # the same records
    # Each maps what it touched: most of the file (measured 15-17 MiB), past the bound.
    assert min(theirs_growth.values()) > 1.5 * (BUDGET + SLACK), \
        f"the owners' workers grew only {[g / MiB for g in theirs_growth.values()]} MiB"
