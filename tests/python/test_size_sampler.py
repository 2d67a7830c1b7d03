"""SizeBatchSampler: batches by size (atoms a frame), filled up to max_size
(fairchem's max_atoms) or of equal sizes (DeePMD-kit's grouping): every
sample exactly once an epoch across ranks, no batch over max_size, the same
batches for the same seed, resume exact, and the bad inputs."""

import numpy as np
import pytest
import torch.utils.data
from hypothesis import given, settings
from hypothesis import strategies as st

import lmdbloader
from atomistic_corpora import write_aselmdb

MODES = [dict(max_size=60), dict(max_size=60, equal_sizes=True), dict(batch_size=5, equal_sizes=True)]


def epoch(sizes, ranks, **kwargs):
    """Each rank's batches of one epoch."""
    out = []
    for rank in range(ranks):
        sampler = lmdbloader.SizeBatchSampler(sizes, num_replicas=ranks, rank=rank, **kwargs)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        out.append(batches)
    return out


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 60), min_size=0, max_size=300), ranks=st.integers(1, 5),
       mode=st.sampled_from(range(len(MODES))), seed=st.integers(0, 2 ** 32 - 1))
def test_every_sample_once_an_epoch_across_ranks_and_no_batch_over(sizes, ranks, mode, seed):
    sizes = np.array(sizes, dtype=np.int64)
    kwargs = MODES[mode]
    per_rank = epoch(sizes, ranks, seed=seed, **kwargs)
    seen = sorted(i for batches in per_rank for batch in batches for i in batch)
    assert seen == list(range(len(sizes)))
    if len({len(batches) for batches in per_rank}) != 1:  # only when no batch was left to split
        assert all(len(batch) == 1 for batches in per_rank for batch in batches), [len(b) for b in per_rank]
    for batches in per_rank:
        for batch in batches:
            assert batch
            if "max_size" in kwargs:
                assert sizes[batch].sum() <= kwargs["max_size"] or len(batch) == 1
            if kwargs.get("equal_sizes"):
                assert len(set(sizes[batch].tolist())) == 1
                if "batch_size" in kwargs:
                    assert len(batch) <= kwargs["batch_size"]


def test_filled_batches_are_full_and_equal_sizes_batch_as_deepmd():
    sizes = np.random.default_rng(0).integers(1, 40, 2000)
    sampler = lmdbloader.SizeBatchSampler(sizes, max_size=200, seed=1)
    batches = list(sampler)
    # Greedy filling: a batch stops only where the next sample would not fit.
    order = [i for b in batches for i in b]
    for batch, after in zip(batches, batches[1:]):
        assert sizes[batch].sum() + sizes[after[0]] > 200
    assert len(order) == 2000
    equal = list(lmdbloader.SizeBatchSampler(sizes, max_size=200, equal_sizes=True, seed=1))
    for batch in equal:
        size = sizes[batch[0]]
        assert len(batch) <= max(1, 200 // size)
    per_size = {}
    for batch in equal:
        per_size.setdefault(int(sizes[batch[0]]), []).append(len(batch))
    for size, counts in per_size.items():  # all full but one per size
        assert sum(c != max(1, 200 // size) for c in counts) <= 1, (size, counts)


def test_the_same_seed_gives_the_same_batches_and_epochs_differ():
    sizes = np.random.default_rng(1).integers(1, 30, 500)
    for kwargs in MODES:
        a = lmdbloader.SizeBatchSampler(sizes, seed=7, **kwargs)
        b = lmdbloader.SizeBatchSampler(sizes, seed=7, **kwargs)
        assert list(a) == list(b)
        first = list(a)
        a.set_epoch(1)
        assert list(a) != first
        assert list(lmdbloader.SizeBatchSampler(sizes, seed=8, **kwargs)) != first
    ordered = list(lmdbloader.SizeBatchSampler(sizes, max_size=60, shuffle=False))
    assert [i for b in ordered for i in b] == list(range(500))


@pytest.mark.parametrize("kwargs", MODES)
def test_resume_yields_exactly_the_rest_of_the_epoch(kwargs):
    sizes = np.random.default_rng(2).integers(1, 30, 600)
    full = lmdbloader.SizeBatchSampler(sizes, seed=3, num_replicas=2, rank=1, **kwargs)
    full.set_epoch(4)
    expected = list(full)
    interrupted = lmdbloader.SizeBatchSampler(sizes, seed=3, num_replicas=2, rank=1, **kwargs)
    interrupted.set_epoch(4)
    it = iter(interrupted)
    head = [next(it) for _ in range(7)]
    state = interrupted.state_dict()
    resumed = lmdbloader.SizeBatchSampler(sizes, seed=3, num_replicas=2, rank=1, **kwargs)
    resumed.load_state_dict(state)
    assert head + list(resumed) == expected
    assert list(resumed) == expected  # the next iteration is the whole epoch again
    with pytest.raises(ValueError, match="seed 3"):
        lmdbloader.SizeBatchSampler(sizes, seed=4, **kwargs).load_state_dict(state)


def test_a_sample_larger_than_max_size_is_refused_or_alone():
    sizes = np.array([5, 80, 5, 5, 90, 5])
    with pytest.raises(ValueError, match=r"2 samples are larger than max_size=60.*sample 1 of size 80.*alone"):
        lmdbloader.SizeBatchSampler(sizes, max_size=60)
    for kwargs in (dict(), dict(equal_sizes=True)):
        batches = list(lmdbloader.SizeBatchSampler(sizes, max_size=60, oversize="alone", **kwargs))
        assert sorted(i for b in batches for i in b) == list(range(6))
        assert [1] in batches and [4] in batches
        assert all(sizes[b].sum() <= 60 for b in batches if b not in ([1], [4]))


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="max_size is needed"):
        lmdbloader.SizeBatchSampler([1, 2])
    with pytest.raises(ValueError, match="needs batch_size or max_size"):
        lmdbloader.SizeBatchSampler([1, 2], equal_sizes=True)
    with pytest.raises(ValueError, match="one integer per record"):
        lmdbloader.SizeBatchSampler(np.ones(3), max_size=4)
    with pytest.raises(ValueError, match="negative size"):
        lmdbloader.SizeBatchSampler([1, -2], max_size=4)
    with pytest.raises(ValueError, match="rank must be in"):
        lmdbloader.SizeBatchSampler([1, 2], max_size=4, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="oversize"):
        lmdbloader.SizeBatchSampler([1, 2], max_size=4, oversize="skip")


def test_a_dataloader_over_aselmdb_batches_by_atoms(tmp_path):
    path = write_aselmdb(tmp_path / "rows.aselmdb", 200, atoms=(1, 20), deleted=(7, 150))
    ds = lmdbloader.LmdbDataset(path, samples="aselmdb", rss_budget="8MiB")
    sizes = ds.sizes()
    assert not sizes.flags.writeable and sizes.dtype == np.int64
    seen = []
    for rank in range(2):
        sampler = lmdbloader.SizeBatchSampler(ds, max_size=64, seed=0, num_replicas=2, rank=rank)
        loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler, num_workers=2,
                                             collate_fn=lambda rows: [(r["id"], len(r["numbers"])) for r in rows])
        for batch in loader:
            assert sum(n for _, n in batch) <= 64
            seen += [i for i, _ in batch]
    assert sorted(seen) == [i for i in range(1, 201) if i not in (7, 150)]


@pytest.mark.parametrize("workers", [0, 2])
def test_statefuldataloader_resumes_the_batches_exactly(workers):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    sizes = np.random.default_rng(2).integers(1, 30, 500)
    numbers = list(range(500))

    def loader():
        sampler = lmdbloader.SizeBatchSampler(sizes, max_size=60, seed=3)
        sampler.set_epoch(2)
        return stateful.StatefulDataLoader(numbers, batch_sampler=sampler, num_workers=workers)
    expected = [b.tolist() for b in loader()]
    first = loader()
    it = iter(first)
    head = [next(it).tolist() for _ in range(9)]
    state = first.state_dict()
    del it
    again = loader()
    again.load_state_dict(state)
    assert head + [b.tolist() for b in again] == expected
