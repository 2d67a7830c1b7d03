"""CoCLR's two-clip input for the image bench's ``coclr`` recipe: the split
its CSV files name, its frame sampler and per-frame transform, the dataset
CoCLR writes over py-lmdb, and the same work as a decode of lmdbloader's."""

from image_recipes import COCLR_CLIPS, COCLR_FRAMES, COCLR_SCALE, COCLR_SIZE, MEAN, RATIO, STD, pil_rgb


def coclr_split(paths, split="train"):
    """The split's videos as CoCLR's dataset reads them: (names "class/video",
    frame counts, labels), from the CSV ("frame/class/video/,frames") and
    ClassInd.txt beside the LMDB."""
    import csv
    with open(paths["classes"]) as f:
        classes = [line.strip() for line in f if line.strip()]
    names, vlens, labels = [], [], []
    with open(paths[f"{split}_csv"], newline="") as f:
        for path, vlen in csv.reader(f):
            parts = path.split("/")  # a trailing "/": the class is parts[-3], the video parts[-2]
            names.append(f"{parts[-3]}/{parts[-2]}")
            vlens.append(int(vlen))
            labels.append(classes.index(parts[-3]))
    return names, vlens, labels


def coclr_clips(frames, clips=COCLR_CLIPS, size=COCLR_SIZE):
    """CoCLR's per-frame transform of ``clips`` clips given as one list of PIL
    frames: for each clip one box (drawn as RandomResizedCrop draws it, scale
    COCLR_SCALE) and one flip shared by its frames, then per frame
    resized_crop, hflip, ToTensor, Normalize -> [clips, T, C, H, W].
    (CoCLR resizes with PIL's bicubic filter and normalizes on the GPU; this
    uses the bilinear filter both variants share and normalizes here.)"""
    from torchvision_cpu import import_torchvision
    import_torchvision()
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    per = len(frames) // clips
    out = []
    for c in range(clips):
        part = frames[c * per:(c + 1) * per]
        top, left, h, w = T.RandomResizedCrop.get_params(part[0], COCLR_SCALE, RATIO)
        flip = torch.rand(1).item() < 0.5
        tensors = []
        for f in part:
            f = F.resized_crop(f, top, left, h, w, [size, size])
            if flip:
                f = F.hflip(f)
            tensors.append(F.normalize(F.to_tensor(f), MEAN, STD))
        out.append(torch.stack(tensors))
    return torch.stack(out)


def coclr_frame_sampler(total, frames=COCLR_FRAMES, ds=1):
    """CoCLR's frame_sampler in training: ``frames`` indices ``ds`` apart from
    a random start, padded on the left with frame 0 when the video is short."""
    import numpy as np
    if total - frames * ds <= 0:
        sequence = np.arange(frames) * ds + np.random.choice(range(ds), 1)
        index = np.zeros_like(sequence)
        sequence = sequence[sequence < total]
        index[-len(sequence):] = sequence
        return index
    start = np.random.choice(range(total - frames * ds), 1)
    return np.arange(frames) * ds + start


class CoclrDataset:
    """What CoCLR's UCF101LMDB_2CLIP does, over its layout: the split's videos
    from the CSV, the key of video "class/video" its position in __order__ as
    9 ASCII digits, msgpack.loads of the record (the list of JPEG frames), two
    clips' frame indices drawn independently, PIL for each frame, the
    per-frame transform (:func:`coclr_clips`). The environment is opened as
    CoCLR opens it (subdir=False, readonly, lock=False, readahead=False,
    meminit=False) but lazily in each worker (CoCLR opens it in __init__ and
    uses it after fork, which LMDB's caveats forbid)."""

    def __init__(self, paths):
        import lmdb
        import msgpack
        self.path = paths["lmdb"]
        with lmdb.open(self.path, subdir=False, readonly=True, lock=False, readahead=False,
                       meminit=False) as env, env.begin() as txn:
            order = msgpack.loads(txn.get(b"__order__"))
        video_id = {name: "%09d" % k for k, name in enumerate(order)}
        names, vlens, labels = coclr_split(paths)
        self.videos = [(video_id[n], v, lab) for n, v, lab in zip(names, vlens, labels)]
        self.env = None

    def __len__(self):
        return len(self.videos)

    def __getitem__(self, i):
        import lmdb
        import msgpack
        import numpy as np
        key, vlen, label = self.videos[i]
        if self.env is None:
            self.env = lmdb.open(self.path, subdir=False, readonly=True, lock=False, readahead=False, meminit=False)
        with self.env.begin(write=False) as txn:
            raw = msgpack.loads(txn.get(key.encode("ascii")))
        index = np.concatenate([coclr_frame_sampler(vlen) for _ in range(COCLR_CLIPS)])
        return coclr_clips([pil_rgb(raw[j]) for j in index]), label

    def __getstate__(self):
        return {"path": self.path, "videos": self.videos, "env": None}


class CoclrDecode:
    """CoclrDataset's work on a record's bytes (msgpack list of frames) ->
    the [clips, T, C, H, W] tensor: LmdbDataset(decode=CoclrDecode()) with
    keys= and targets= from the split."""

    def __call__(self, raw):
        import msgpack
        import numpy as np
        frames = msgpack.loads(raw)
        index = np.concatenate([coclr_frame_sampler(len(frames)) for _ in range(COCLR_CLIPS)])
        return coclr_clips([pil_rgb(frames[j]) for j in index])


def coclr_dataset(paths, decode, **reader_options):
    """LmdbDataset over the CoCLR-layout LMDB: the train split's videos (keys
    from __order__, read through lmdbloader) and labels."""
    import lmdbloader
    import msgpack
    order = msgpack.unpackb(lmdbloader.Reader(paths["lmdb"]).get(b"__order__"))
    key_of = {name: b"%09d" % k for k, name in enumerate(order)}
    names, _, labels = coclr_split(paths)
    return lmdbloader.LmdbDataset(paths["lmdb"], keys=[key_of[n] for n in names], targets=labels, decode=decode,
                                  **reader_options)
