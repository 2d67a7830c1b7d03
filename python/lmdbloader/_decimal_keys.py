"""Where ids written as unpadded decimal keys ("1", "2", ... "10", ...) lie
among the keys of an LMDB, computed instead of listed.

LMDB sorts keys bytewise, so the keys of ids 1..m run "1", "10", "100", ...,
"11", ...: the place of id x is the number of ids in 1..m whose decimal text
sorts before x's. That number is a sum over the text lengths L of the ids of
L digits that sort before x, each a range of integers, so it costs one array
operation per digit for a whole batch of ids, and nothing per record is held.
Deleted ids are subtracted by one search in their own (few) places.
"""

import numpy as np

# Ids of up to 18 digits: 10**18 and x * 10**k stay inside int64.
MAX_ID = 10 ** 18 - 1
_POWERS = np.array([10 ** k for k in range(19)], dtype=np.int64)


def digits(ids):
    """The number of decimal digits of each id (ids >= 1, an int64 array)."""
    return np.searchsorted(_POWERS, ids, side="right").astype(np.int64)


def text_ranks(ids, last):
    """For each id in ``ids`` (int64, 1 <= id <= last), how many ids of
    1..``last`` have a decimal text that sorts bytewise before its own."""
    ids = np.asarray(ids, dtype=np.int64)
    if last > MAX_ID:
        raise ValueError(f"ids up to {MAX_ID} are supported; got {last}")
    n = digits(ids)
    ranks = np.zeros(len(ids), dtype=np.int64)
    for length in range(1, int(digits(np.array([last]))[0]) + 1):
        low = _POWERS[length - 1]
        high = min(_POWERS[length] - 1, last)
        # Ids of `length` digits sorting before x: those below x's first
        # `length` digits, and those equal to them when x's text is longer
        # (a proper prefix sorts first); for shorter x, those below x's text
        # padded with zeros to `length` digits.
        shorter = n > length
        cut = np.where(shorter, ids // _POWERS[np.maximum(n - length, 0)], 0)
        padded = np.where(n < length, ids * _POWERS[np.maximum(length - n, 0)], 0)
        bound = np.where(shorter, cut, np.where(n == length, ids - 1, padded - 1))
        ranks += np.clip(bound, low - 1, high) - (low - 1)
    return ranks


class DecimalIds:
    """The live ids of a table written as ids 1..``last`` minus ``deleted``
    (as ASE's LMDB backend numbers its rows), and where each id's key lies
    among those keys. Holds the deleted ids and their places (numpy), no
    list of the live ones."""

    def __init__(self, last, deleted):
        self.last = int(last)
        deleted = np.unique(np.asarray(deleted, dtype=np.int64))
        self.deleted = deleted[(deleted >= 1) & (deleted <= self.last)]
        self.count = self.last - len(self.deleted)
        # Live ids below the k-th deleted id: the live index where id jumps.
        self._jumps = self.deleted - np.arange(1, len(self.deleted) + 1)
        self._deleted_ranks = np.sort(text_ranks(self.deleted, self.last)) if len(self.deleted) else \
            np.zeros(0, np.int64)

    def ids(self, indices):
        """The id of each live index (int64 array in [0, count))."""
        indices = np.asarray(indices, dtype=np.int64)
        return indices + 1 + np.searchsorted(self._jumps, indices, side="right")

    def places(self, ids):
        """Each live id's place among the keys of the live ids, in key order."""
        ranks = text_ranks(ids, self.last)
        return ranks - np.searchsorted(self._deleted_ranks, ranks, side="left")
