"""Picklable datasets and transforms for DataLoader tests whose workers may be
started with spawn or forkserver (they import this module by name)."""

import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info


class Samples(Dataset):
    """Returns the samples it was given, by index."""

    def __init__(self, samples):
        self.samples = list(samples)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        return self.samples[i]


class Numbered(Dataset):
    """Sample i: a [rows, cols] float32 tensor of i, the label i, and i as a string."""

    def __init__(self, n, rows=64, cols=64):
        self.n, self.rows, self.cols = n, rows, cols

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": torch.full((self.rows, self.cols), float(i)), "label": i, "name": str(i)}


def first_byte_and_record(t):
    """An LmdbDataset transform: (record tensor, its first byte as an int)."""
    return t, int(t[0])


class Uneven(IterableDataset):
    """Worker k yields lengths[k] samples ({"x": a [rows] float32 tensor of
    the sample's number, "label": the number}), numbered from 1000 x k:
    workers that run out at different times."""

    def __init__(self, lengths, rows=4096):
        self.lengths, self.rows = list(lengths), rows

    def __iter__(self):
        info = get_worker_info()
        k = 0 if info is None else info.id
        for i in range(1000 * k, 1000 * k + self.lengths[k]):
            yield {"x": torch.full((self.rows,), float(i)), "label": i}
