"""Samples made of several records, named by key patterns: :class:`KeyedSamples`.

Many LMDB corpora store a sample as several records whose keys differ by a
pattern and share a number. The OCR layout that ``create_lmdb_dataset.py``
writes (deep-text-recognition-benchmark, parseq, ABINet) is the common one:
``image-%09d`` (the encoded image) and ``label-%09d`` (its text, UTF-8) for
samples 1..N, and ``num-samples`` holding N in ASCII decimal.
``LmdbDataset(path, samples="ocr")`` reads it as (image, label) samples.

No list of keys is built: a sample's keys are formatted when it is read, so
a dataset of 16M samples holds a few ints in Python, and forked DataLoader
workers have nothing to copy.
"""

import numbers
import re
import string

import numpy as np

from .errors import DecodeError

# "{:09d}", "{0:d}", "{}": one number, as a bytes %-pattern formats it faster.
_SIMPLE_FIELD = re.compile(r"[0-9]*d")


class KeyedSamples:
    """Sample ``i`` of a dataset is the records whose keys are ``patterns``
    formatted with the number ``start + i``, for ``i`` in ``range(count)``.

    ``patterns``: a sequence of patterns, one per record of a sample, each a
    ``str.format`` pattern (``"image-{:09d}"``) or a %-pattern
    (``"image-%09d"``, or bytes ``b"image-%09d"``) of one integer; str keys
    are encoded as UTF-8. ``count``: the number of samples, an int, or the
    key (str or bytes) of a record that holds it in ASCII decimal (as
    ``num-samples``). ``start``: the number of sample 0 (1 in the OCR
    layout). ``text``: the slots (indices into ``patterns``) whose records
    are returned as str decoded from UTF-8 instead of bytes; the first slot
    goes through the dataset's ``decode=`` and cannot be text.

    Through ``LmdbDataset(path, samples=...)`` sample ``i`` is the tuple
    ``(first, *others)``: ``first`` is the first record through ``decode=``
    (``"raw"``, ``"tensor"``, ``"msgpack"``, a callable, or an
    :class:`lmdbloader.ImageDecode` / :class:`lmdbloader.ClipDecode` with its
    ``record=`` and ``field=`` as for any record) and then ``transform=``;
    the others are bytes, or str in ``text`` slots. With one pattern the
    sample is the record alone, as without ``samples``. An image decoder's
    own target (``ImageDecode(target=)``) is not looked for when a sample has
    several records: the other records stand for it. A DataLoader's batch
    is then ``[firsts, *others]`` as ``default_collate`` makes it: str and
    bytes records as tuples (the OCR layout: ``[images, labels]``).

    Checked when the dataset opens, in this order: the count record exists
    (KeyError naming the file and key) and holds a decimal number
    (ValueError); each pattern's first key exists (KeyError naming the file:
    the pattern matches nothing); each pattern's last key exists (KeyError
    naming the file, the key and the count: a count larger than the records
    present is refused, never read as a shorter dataset); and, for a count
    read from a record, that no pattern has a key for sample ``count`` (a
    count smaller than the records present; ValueError, pass ``count`` as an
    int to read fewer on purpose). A sample missing in the middle raises
    KeyError naming the file and key when it is read.

    Over a set of files (a folder of OCR sets, as deep-text-recognition-
    benchmark's ``MJ/{MJ_train, MJ_valid, MJ_test}``, which its
    ``hierarchical_dataset`` concatenates) each file holds samples of its
    own, numbered from ``start`` with its own count (an int ``count`` is
    each file's): the dataset is the files' samples one after the other, in
    the set's order, and the checks above run on every file at open, each
    error naming its file. That opens each file's index once at open.

    Cost per sample, on top of reading its records (``get_batch`` reads a
    batch's records, every slot, in one call; ``"msgpack"`` takes two, the
    first records decoded in C++, the others read): per record one Python
    format (0.16 us; a ``str.format`` pattern of one plain integer field is
    run as the bytes %-pattern that formats alike, others cost 0.3 us) and
    one key check. Where the slot's keys lie contiguously in key order
    (zero-padded numbers, as in the OCR layout: found at open, the last key
    ``count - 1`` after the first), sample ``i``'s record is guessed at the
    first sample's position plus ``i`` and the key there is read and compared
    (``Reader.key``, 0.6 us) before it is trusted; else, or when it differs,
    the key is looked up (``Reader.index_of``, 1.6 us at 2M keys, random
    order). Measured on the OCR layout with 1M samples (2M records), random
    batches of 256, Python 3.11 on a loaded 2-core machine: 1.8 us a sample
    for its positions (4.1 us with lookups only), beside 1.7 us for
    ``get_batch`` of its two small records: small next to a JPEG decode.
    The dataset holds no per-sample state; pickling carries this
    configuration and the few ints found when it was checked.
    """

    def __init__(self, patterns, count, *, start=0, text=()):
        if isinstance(patterns, (str, bytes)) or not _is_sequence(patterns) or not patterns:
            raise TypeError(f"patterns must be a non-empty sequence of key patterns; got {patterns!r:.80}")
        self.patterns = tuple(patterns)
        if isinstance(count, bool) or not isinstance(count, (numbers.Integral, str, bytes)):
            raise TypeError(f"count must be an int or the key (str or bytes) of the count record; got {count!r}")
        if isinstance(count, numbers.Integral) and count < 0:
            raise ValueError(f"count must be at least 0; got {count}")
        self.count = int(count) if isinstance(count, numbers.Integral) else count
        if isinstance(start, bool) or not isinstance(start, numbers.Integral):
            raise TypeError(f"start must be an int; got {start!r}")
        if start < 0:
            raise ValueError(f"start must be at least 0; got {start}")
        self.start = int(start)
        if isinstance(text, (str, bytes)) or not _is_sequence(text):
            raise TypeError(f"text must be a sequence of slots (ints); got {text!r}")
        text = tuple(text)
        for slot in text:
            if isinstance(slot, bool) or not isinstance(slot, numbers.Integral) or \
                    not 1 <= slot < len(self.patterns):
                raise ValueError(f"text slots are patterns after the first, which goes through decode= "
                                 f"(1 to {len(self.patterns) - 1}); got {slot!r}")
        self.text = tuple(sorted({int(s) for s in text}))
        self._formats = tuple(_formatter(p) for p in self.patterns)

    def key(self, index, slot=0):
        """The key (bytes) of record ``slot`` of sample ``index``."""
        return self._formats[slot](self.start + index)

    def __repr__(self):
        return (f"lmdbloader.KeyedSamples({list(self.patterns)!r}, count={self.count!r}, start={self.start}, "
                f"text={self.text!r})")

    # Pickled as its configuration; the formatters are made again.
    def __getstate__(self):
        return {"patterns": self.patterns, "count": self.count, "start": self.start, "text": self.text}

    def __setstate__(self, state):
        self.__init__(state["patterns"], state["count"], start=state["start"], text=state["text"])


def samples_of(samples):
    """A KeyedSamples from ``samples=``: one, or a preset's name."""
    if isinstance(samples, KeyedSamples):
        return samples
    if isinstance(samples, str) and samples in PRESETS:
        return PRESETS[samples]
    raise ValueError(f"samples must be a KeyedSamples or one of {', '.join(map(repr, PRESETS))}; "
                     f"got {samples!r:.80}")


class BoundSamples:
    """A KeyedSamples checked against one Reader: the count, and per slot
    the first sample's position where the slot's keys lie contiguously.

    Over a set of files (``Reader.files``: a folder of OCR sets such as
    deep-text-recognition-benchmark's ``MJ/{MJ_train, MJ_valid, MJ_test}``)
    each file is a set of samples of its own, as that project's
    ``hierarchical_dataset`` reads them: numbered from ``start`` with the
    count its own count record holds (an int ``count`` is each file's),
    the files' samples one after the other in the set's order. Every file's
    count and keys are checked at open, errors naming the file. Holds a few
    ints per file (numpy arrays); pickles with its Reader (configuration
    only)."""

    def __init__(self, spec, reader):
        self.spec = spec
        self.reader = reader
        self.slots = len(spec.patterns)
        files = reader.files
        if files:
            self._members = tuple(_Member(spec, reader, path, k) for k, (path, _, _) in enumerate(files))
        else:
            self._members = (_Member(spec, reader, reader.path, None),)
        counts = np.array([m.count for m in self._members], dtype=np.int64)
        self._ends = np.cumsum(counts)
        self._firsts = self._ends - counts
        self.count = int(self._ends[-1])
        # For each slot past the first, whether it is text (UTF-8 -> str).
        self._text = tuple(slot in spec.text for slot in range(1, self.slots))

    @property
    def bases(self):
        """Per slot, the first sample's position where that slot's keys lie
        contiguously (None otherwise): of one database, or of each file."""
        return self._members[0].bases if len(self._members) == 1 else tuple(m.bases for m in self._members)

    def positions(self, indices, first_only=False):
        """The positions of samples ``indices`` (ints in [0, count)), as
        (the first records' positions, the others' positions: slot 1, 2, ...
        of each sample in turn; empty with ``first_only``). KeyError naming
        the file and key for a record the database lacks."""
        key_at = self.reader.key
        start = self.spec.start
        firsts, others = [], []
        slots = list(zip(self.spec._formats, range(self.slots), [firsts] + [others] * (self.slots - 1)))
        if first_only:
            del slots[1:]
        members = self._members
        if len(members) == 1:
            located = ((members[0], i, i) for i in indices)
        else:
            # Which file each sample is in, and its number there: one search for the batch.
            wanted = np.asarray(indices if not isinstance(indices, range) else np.arange(
                indices.start, indices.stop, indices.step), dtype=np.int64).reshape(-1)
            which = np.searchsorted(self._ends, wanted, side="right")
            local = wanted - self._firsts[which]
            located = zip(map(members.__getitem__, which.tolist()), local.tolist(), wanted.tolist())
        for member, i, index in located:
            number = start + i
            bases = member.bases
            for fmt, slot, out in slots:
                key = fmt(number)
                base = bases[slot]
                if base is not None and key_at(base + i) == key:
                    out.append(base + i)
                    continue
                at = member.find(key)
                if at is None:
                    raise KeyError(f"{member.path}: no key {key!r}, which sample {index} needs")
                out.append(at)
        return firsts, others

    def values(self, records, positions):
        """The other records of a batch (as :meth:`positions` orders them),
        one tuple per sample: bytes, or str in text slots (DecodeError naming
        the record, key and file when a text record is not UTF-8)."""
        width = self.slots - 1
        records = list(records)
        for slot, text in enumerate(self._text):
            if not text:
                continue
            for k in range(slot, len(records), width):
                try:
                    records[k] = records[k].decode("utf-8")
                except UnicodeDecodeError as e:
                    pos = positions[k]
                    raise DecodeError(f"{self.reader.where(pos)} (key {self.reader.key(pos)!r}): not UTF-8 "
                                      f"text ({e})") from None
        return list(zip(*[iter(records)] * width))


class _Member:
    """One database's samples: the whole Reader's, or one file's of a set
    (``file``: its index in ``Reader.files``), checked as KeyedSamples says."""

    def __init__(self, spec, reader, path, file):
        self.reader = reader
        self.path = path
        self.file = file
        self.count = _count_of(spec, self)
        bases = []
        for slot, pattern in enumerate(spec.patterns):
            base = None
            if self.count:
                first = spec.key(0, slot)
                at = self.find(first)
                if at is None:
                    raise KeyError(f"{path}: the key pattern {pattern!r} matches nothing (no key {first!r}, "
                                   f"sample 0)")
                last = spec.key(self.count - 1, slot)
                end = self.find(last)
                if end is None:
                    raise KeyError(f"{path}: no key {last!r}, which sample {self.count - 1} needs: "
                                   f"{_count_said(spec, self.count)}")
                # Contiguous: sample i's record sits at at + i (each read checks it).
                base = at if end - at == self.count - 1 else None
            bases.append(base)
            if not isinstance(spec.count, int):
                beyond = spec.key(self.count, slot)
                if self.find(beyond) is not None:
                    raise ValueError(f"{path}: {_count_said(spec, self.count)}, yet key {beyond!r} (sample "
                                     f"{self.count}) is present; pass count= as an int to read fewer on purpose")
        self.bases = tuple(bases)

    def find(self, key):
        """The position of ``key`` in this database, or None."""
        try:
            return self.reader.index_of(key, file=self.file)
        except KeyError:
            return None


def _count_of(spec, member):
    if isinstance(spec.count, int):
        return spec.count
    at = member.find(spec.count)
    if at is None:
        raise KeyError(f"{member.path} has no count record {spec.count!r}")
    value = member.reader[at]
    text = value.strip()
    if not (0 < len(text) <= 20 and text.isdigit()):
        raise ValueError(f"{member.path}: the count record {spec.count!r} holds {value[:40]!r}, not a decimal "
                         f"number of samples")
    return int(text)


def _count_said(spec, count):
    if isinstance(spec.count, int):
        return f"count={count}"
    return f"the count record {spec.count!r} says {count} samples"


def _is_sequence(value):
    try:
        len(value)
        iter(value)
    except TypeError:
        return False
    return True


def _formatter(pattern):
    """pattern -> a function number -> key bytes; ValueError for a pattern
    that does not format one integer, or that formats every number alike."""
    if isinstance(pattern, bytes):
        fmt = pattern.__mod__ if b"%" in pattern else None
    elif isinstance(pattern, str) and "{" in pattern:
        fmt = _bytes_pattern(pattern) or _encoded(pattern.format)
    elif isinstance(pattern, str):
        fmt = pattern.encode("utf-8").__mod__ if "%" in pattern else None
    else:
        raise TypeError(f"a key pattern is a str or bytes; got {pattern!r}")
    if fmt is None:
        raise ValueError(f"key pattern {pattern!r} has no number field (as in 'image-{{:09d}}' or 'image-%09d')")
    try:
        keys = [fmt(0), fmt(1)]
    except (TypeError, ValueError, IndexError, KeyError) as e:
        raise ValueError(f"key pattern {pattern!r} does not format one integer ({type(e).__name__}: {e})") from None
    if keys[0] == keys[1]:
        raise ValueError(f"key pattern {pattern!r} gives the same key for every sample")
    return fmt


def _encoded(form):
    return lambda number: form(number).encode("utf-8")


def _bytes_pattern(pattern):
    """A str.format pattern of one plain integer field ("image-{:09d}") as
    the bytes %-pattern that formats alike, twice as fast; None otherwise."""
    try:
        fields = list(string.Formatter().parse(pattern))
    except ValueError:
        return None
    named = [f for f in fields if f[1] is not None]
    if len(named) != 1:
        return None
    _, name, spec, conversion = named[0]
    if name not in ("", "0") or conversion is not None or not (spec == "" or _SIMPLE_FIELD.fullmatch(spec)):
        return None
    out = ""
    for literal, field, _, _ in fields:
        out += literal.replace("%", "%%")
        if field is not None:
            out += "%" + (spec[:-1] if spec else "") + "d"
    return out.encode("utf-8").__mod__


#: ``LmdbDataset(samples=<name>)``: layouts known by name.
PRESETS = {
    # create_lmdb_dataset.py (deep-text-recognition-benchmark, parseq, ABINet).
    "ocr": KeyedSamples(["image-{:09d}", "label-{:09d}"], count="num-samples", start=1, text=(1,)),
}
