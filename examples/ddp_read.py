"""One rank of a distributed job reading a corpus or shard set with lmdbloader:
DistributedSampler over an LmdbDataset, persistent DataLoader workers, each
worker under its own memory budget. Launched by torchrun (see
scripts/slurm/train.sbatch); gloo on CPU, nccl where GPUs are.

    torchrun --standalone --nproc_per_node=2 examples/ddp_read.py DATA --out OUT

Writes OUT/rank<R>.json: the record names each epoch gave this rank, and each
worker's largest RSS growth as the kernel counts it (/proc/self/statm).
"""

import argparse
import json
import os

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

import lmdbloader

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class MeasuredDataset(lmdbloader.LmdbDataset):
    """Yields (record name, this worker's RSS growth since its first record)."""

    def _begin(self):
        if not hasattr(self, "_start"):  # before this worker opens anything
            self._start = rss_bytes()

    def _measured(self, records):
        grew = rss_bytes() - self._start
        return [(r["name"], os.getpid(), grew) for r in records]

    def __getitem__(self, index):
        self._begin()
        return self._measured([super().__getitem__(index)])[0]

    def __getitems__(self, indices):  # the DataLoader's batched fetch
        self._begin()
        return self._measured(super().__getitems__(indices))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--rss-budget", default="16MiB")
    args = ap.parse_args()

    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dataset = MeasuredDataset(args.data, rss_budget=args.rss_budget)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                        persistent_workers=args.workers > 0, collate_fn=lambda batch: batch)
    epochs, growth = [], {}
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        names = []
        for batch in loader:
            for name, pid, grew in batch:
                names.append(name)
                growth[pid] = max(growth.get(pid, 0), grew)
        epochs.append(names)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world": world, "epochs": epochs,
                   "worker_rss_growth": {str(k): v for k, v in growth.items()}}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
