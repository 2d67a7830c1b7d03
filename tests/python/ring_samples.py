"""Picklable datasets and transforms for DataLoader tests whose workers may be
started with spawn or forkserver (they import this module by name)."""

import torch
from torch.utils.data import Dataset


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
