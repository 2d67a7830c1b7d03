"""Copy-on-read: labels come out as a read-only numpy array; reading every one
of them in forked workers copies nothing into the workers' private memory."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

import lmdbloader  # noqa: E402
from lmdbloader.memory import process_memory  # noqa: E402

from conftest import MiB  # noqa: E402

N = 1_000_000


@pytest.fixture(scope="module")
def label_corpus(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("labels") / "corpus")
    with lmdbloader.CorpusWriter(path) as w:
        for i in range(N):
            w.add(f"r{i}", b"", label=i % 1000)
    return path


class LabelDataset(torch.utils.data.Dataset):
    def __init__(self, path):
        self.ds = lmdbloader.LmdbDataset(path, decode="raw")

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        return int(self.ds.column("label")[i])

    def __getitems__(self, indices):
        labels = self.ds.column("label")
        return [int(labels[i]) for i in indices]


def uss_growth_worker(ds, out):
    before = process_memory()["uss"]
    total = sum(ds[i] for i in range(len(ds)))  # every index: a full epoch's reads
    out.put((process_memory()["uss"] - before, total))


def test_column_is_a_read_only_numpy_array(label_corpus):
    ds = lmdbloader.LmdbDataset(label_corpus, decode="raw")
    labels = ds.column("label")
    assert isinstance(labels, np.ndarray) and labels.dtype == np.int64 and len(labels) == N
    assert not labels.flags.writeable
    assert labels[123456] == 456
    with pytest.raises(KeyError):
        ds.column("nope")


def test_workers_reading_every_label_do_not_copy_them(label_corpus):
    import multiprocessing as mp
    ds = LabelDataset(label_corpus)
    ds[0]  # the parent uses the column too (e.g. for a sampler)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    workers = [ctx.Process(target=uss_growth_worker, args=(ds, out)) for _ in range(2)]
    for w in workers:
        w.start()
    results = [out.get(timeout=300) for _ in workers]
    for w in workers:
        w.join()
    expected_total = sum(i % 1000 for i in range(N))
    for growth, total in results:
        assert total == expected_total
        assert growth <= 8 * MiB, f"a worker's USS grew {growth / MiB:.1f} MiB"

    # The control: the same reads from a Python list built in the parent copy
    # the list's objects into each worker (reference counts are writes).
    labels_list = [int(x) for x in ds.ds.column("label")]
    out2 = ctx.Queue()
    p = ctx.Process(target=uss_growth_worker, args=(labels_list_dataset(labels_list), out2))
    p.start()
    growth, _ = out2.get(timeout=300)
    p.join()
    assert growth > 8 * MiB, f"the Python-list control grew only {growth / MiB:.1f} MiB"


class labels_list_dataset:
    def __init__(self, labels):
        self.labels = labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.labels[i]


def test_dataloader_reads_column_in_workers(label_corpus):
    loader = DataLoader(LabelDataset(label_corpus), batch_size=4096, num_workers=2,
                        collate_fn=lambda b: sum(b))
    assert sum(loader) == sum(i % 1000 for i in range(N))
