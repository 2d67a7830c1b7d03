"""py-lmdb's Cursor, the part above positioning (cursor.py): lookups, batched
gets, iterators, the refused writes and closing."""

import sys

from .. import _core
from ..errors import UnsupportedError
from ._arguments import SIZE_MAX, as_bytes, as_optional_bytes, flag_arg, refuse_write, uint_arg
from ._handles import DUPFIXED, state_of
from ._messages import INCOMPATIBLE
from .errors import IncompatibleError


class CursorOps:
    """What ``Cursor`` does with its moves: get, getmulti, the iter* family,
    put and delete (refused: read-only), close and the context manager."""

    def get(self, key, default=None):
        if key is None:
            raise TypeError("key must be given.")
        return self.value() if self.set_key(key) else default

    def getmulti(self, keys, dupdata=False, dupfixed_bytes=None, keyfixed=False, values=True):
        """(key, value) of each key found, every duplicate with ``dupdata``, as py-lmdb."""
        self._check()
        dupdata, keyfixed, values = flag_arg(dupdata, False), flag_arg(keyfixed, False), flag_arg(values, True)
        dupfixed_bytes = uint_arg(dupfixed_bytes, SIZE_MAX, 0)
        if (dupfixed_bytes or keyfixed) and not dupdata:
            raise TypeError("dupdata is required for dupfixed_bytes/keyfixed.")
        if keyfixed and not dupfixed_bytes:
            raise TypeError("dupfixed_bytes is required for keyfixed.")
        if not values and dupdata:
            raise TypeError("values=False is incompatible with dupdata.")
        if values and not dupdata:
            # One batched read for every key found: all reads in flight at once.
            found = []
            for key in keys:
                if self.set_key(key):
                    found.append((bytes(self.key()), self._pos()))
            batch = self._r.get_batch([pos for _, pos in found])
            return [(self._txn_state.value(k), self._txn_state.value(v)) for (k, _), v in zip(found, batch)]
        out, packed = [], bytearray()
        for key in keys:
            if not self.set_key(key):
                continue
            if not values:
                out.append(self.key())
                continue
            if dupfixed_bytes:
                k = bytes(self.key())
                for block in self._multiple_blocks():
                    for i in range(0, len(block) - dupfixed_bytes + 1, dupfixed_bytes):
                        if keyfixed:
                            packed.extend(k + block[i:i + dupfixed_bytes])
                        else:
                            out.append((self._txn_state.value(k), self._txn_state.value(block[i:i + dupfixed_bytes])))
                self._valid = False  # MDB_NEXT_MULTIPLE ran past the last page
                continue
            while self._valid:
                out.append((self._txn_state.value(bytes(self.key())), self._txn_state.value(bytes(self.value()))))
                self.next_dup()
        return memoryview(packed) if keyfixed else out

    def _multiple_blocks(self):
        """What MDB_GET_MULTIPLE and then MDB_NEXT_MULTIPLE return for the key
        the cursor is on: the duplicates of each leaf page of its tree of
        duplicates (or of its sub-page), packed (lmdb's mdb.c, fetchm). Only a
        MDB_DUPFIXED database has them: any other gives MDB_INCOMPATIBLE."""
        if not (self._dupsort and self.db.db_flags & DUPFIXED):  # DUPFIXED means nothing without DUPSORT
            self._valid = False  # py-lmdb: a failed get leaves the cursor unpositioned
            raise IncompatibleError(f"mdb_cursor_get: {INCOMPATIBLE}")
        g, first = self._g, self._starts[self._g]
        n = self._ndups(g)
        bounds = sorted({0, n} | set(leaf_layout(self.db)[1].get(g, ())))
        values = self._r.get_batch(range(first, first + n))
        return [b"".join(values[a:b]) for a, b in zip(bounds, bounds[1:])]

    # -- iteration (py-lmdb's _iter) -------------------------------------------
    def _iter(self, step, keys, values):
        # py-lmdb's choice: no values gives keys (also with keys=False).
        get = self.key if not values else self.value if not keys else self.item
        while self._valid:
            yield get()
            step()

    def iternext(self, keys=True, values=True):
        self._check()
        keys, values = flag_arg(keys, True), flag_arg(values, True)
        if not self._valid:
            self.first()
        return self._iter(self.next, keys, values)

    def iternext_dup(self, keys=False, values=True):
        self._check()
        keys, values = flag_arg(keys, False), flag_arg(values, True)
        return self._iter(self.next_dup, keys, values)

    def iternext_nodup(self, keys=True, values=False):
        self._check()
        keys, values = flag_arg(keys, True), flag_arg(values, False)
        if not self._valid:
            self.first()
        return self._iter(self.next_nodup, keys, values)

    def iterprev(self, keys=True, values=True):
        self._check()
        keys, values = flag_arg(keys, True), flag_arg(values, True)
        if not self._valid:
            self.last()
        return self._iter(self.prev, keys, values)

    def iterprev_dup(self, keys=False, values=True):
        self._check()
        keys, values = flag_arg(keys, False), flag_arg(values, True)
        return self._iter(self.prev_dup, keys, values)

    def iterprev_nodup(self, keys=True, values=False):
        self._check()
        keys, values = flag_arg(keys, True), flag_arg(values, False)
        if not self._valid:
            self.last()
        return self._iter(self.prev_nodup, keys, values)

    def __iter__(self):
        return self.iternext()

    # py-lmdb's write calls in a read-only transaction (see Transaction.put).
    def put(self, key, value, dupdata=True, overwrite=True, append=False):
        self._check()
        as_optional_bytes(key), as_optional_bytes(value)
        self._txn_state.mutations += 1
        refuse_write("mdb_put")

    def putmulti(self, items, dupdata=True, overwrite=True, append=False):
        """(0, 0) for no items; the first item fails as its put would."""
        self._check()
        for i, item in enumerate(items):
            if type(item) is not tuple or len(item) != 2:
                raise TypeError("putmulti() elements must be 2-tuples")
            as_bytes(item[0]), as_bytes(item[1])
            self._txn_state.mutations += 1
            refuse_write(f"mdb_cursor_put() element #{i}")
        return (0, 0)

    def replace(self, key, value):
        self._check()
        key = as_optional_bytes(key)
        as_optional_bytes(value)
        if self._dupsort:
            # py-lmdb deletes the key's duplicates before it puts the value.
            if self.set_key(key):
                self._txn_state.mutations += 1
                refuse_write("mdb_cursor_del")
            refuse_write("mdb_put")
        self._txn_state.mutations += 1
        refuse_write("mdb_put")

    def pop(self, key):
        self._check()
        if not self.set_key(as_optional_bytes(key)):
            return None
        self._txn_state.mutations += 1
        refuse_write("mdb_cursor_del")

    def delete(self, dupdata=False):
        """False on an unpositioned cursor, as py-lmdb; otherwise ReadonlyError."""
        self._check()
        if not self._valid:
            return False
        self._txn_state.mutations += 1
        refuse_write("mdb_cursor_del")

    def close(self):
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def lmdb_order(key, integer, reverse):
    """A sort key giving LMDB's order: integer keys as native unsigned
    integers, reversed keys compared from their last byte."""
    if integer:
        return int.from_bytes(key, sys.byteorder)
    return key[::-1] if reverse else key


def leaf_layout(db):
    """Where db's leaf pages begin (cached per database): the keys that begin
    one, and per key with a tree of duplicates, the duplicates that begin one.
    Read only when a failed lookup needs it: one walk of the tree."""
    if db.leaf_layout is None:
        try:
            keys, dups = _core.leaf_layout(state_of(db.env).path, db.name or b"")
        except UnsupportedError:
            # A shard set is no LMDB of py-lmdb's: its cursor runs over the
            # parts as over one sequence of keys.
            keys, dups = [], {}
        db.leaf_layout = (frozenset(keys), {g: frozenset(d) for g, d in dups.items()})
    return db.leaf_layout


def group_starts(db):
    """Positions where each key's run of duplicates starts, plus the end (cached per database)."""
    if db.group_starts is None:
        r = db.reader
        starts, prev = [], None
        for i in range(len(r)):
            k = r.key(i)
            if k != prev:
                starts.append(i)
                prev = k
        starts.append(len(r))
        db.group_starts = starts
    return db.group_starts
