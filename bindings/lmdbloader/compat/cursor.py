"""py-lmdb's Cursor over lmdbloader's record index: positioning, iteration, duplicates and
the positions LMDB's cursor keeps after a failed move."""

import bisect
import sys

from .. import _core
from ..errors import Error, UnsupportedError
from .arguments import _SIZE_MAX, _buffer, _db_arg, _flag, _optional_buffer, _readonly, _uint
from .errors import (
    _BAD_VALSIZE,
    _CLOSED,
    _INCOMPATIBLE,
    _NOTFOUND,
    BadValsizeError,
    IncompatibleError,
    InvalidParameterError,
    NotFoundError,
)
from .handles import (
    _DUPFIXED,
    _DUPSORT,
    _INTEGERDUP,
    _INTEGERKEY,
    _REVERSEDUP,
    _REVERSEKEY,
    _Database,
    _TransactionBase,
    _Unpicklable,
)


class Cursor(_Unpicklable):
    """A cursor over one database (py-lmdb's ``lmdb.Cursor``) over the
    reader's positions: moves cost nothing, values are read on demand.

    It keeps the state LMDB's own cursor keeps (lmdb's mdb.c: initialized or
    not, the end-of-file flag, the key node it sits on, which may be the
    insertion point of a failed lookup, and the duplicate its sub-cursor sits
    on, if any), so that every move, failed ones and moves after failed ones
    included, lands where py-lmdb's does. py-lmdb's own "positioned" flag
    decides what key()/value() return."""

    _NEXT, _NEXT_DUP, _NEXT_NODUP, _PREV, _PREV_DUP, _PREV_NODUP = range(6)

    def __init__(self, db=None, txn=None):
        if (db is not None and not isinstance(db, _Database)) or (
                txn is not None and not isinstance(txn, _TransactionBase)):
            raise TypeError("invalid type")
        if db is None or txn is None:
            raise TypeError("db and transaction parameters required.")
        _db_arg(txn.env, db, None)
        self.db = db
        self.txn = txn
        self._r = db.reader
        self._dupsort = bool(db.db_flags & _DUPSORT)
        self._starts = _group_starts(db) if self._dupsort else None
        self._groups = len(self._starts) - 1 if self._dupsort else len(self._r)
        self._init = False   # LMDB's C_INITIALIZED
        self._eof = False    # LMDB's C_EOF
        self._g = 0          # the key node (group of duplicates); _groups: past the end
        self._d = None       # the duplicate within it; None: sub-cursor not initialized
        # A failed lookup whose insertion point begins a leaf page leaves
        # LMDB's cursor past the last node of the page before (and its
        # sub-cursor likewise, in a tree of duplicates): _g (_d) is then the
        # node its next move reaches, not the one it sits on.
        self._page_end = False
        self._dup_page_end = False
        self._valid = False  # py-lmdb's "positioned"
        self._nokey = False  # key() is b"" (MDB_FIRST_DUP/LAST_DUP after a failed move)
        self._last_mutation = txn._mutations
        self._closed = False

    # -- helpers ---------------------------------------------------------------
    def _check(self):
        if self._closed:
            raise Error(_CLOSED)
        self.txn._check()

    def _ndups(self, g):
        return self._starts[g + 1] - self._starts[g] if self._dupsort else 1

    def _pos(self):
        return (self._starts[self._g] if self._dupsort else self._g) + (self._d or 0)

    def _group_key(self, g):
        return self._r.key(self._starts[g] if self._dupsort else g)

    def _hit(self, g, d):
        self._init, self._eof, self._g, self._d, self._valid = True, False, g, d, True
        self._page_end = self._dup_page_end = False
        self._nokey = False
        self._last_mutation = self.txn._mutations
        return True

    def _miss(self):
        self._valid = False
        self._last_mutation = self.txn._mutations
        return False

    def _refresh(self):
        """py-lmdb re-reads the current item (MDB_GET_CURRENT) after a mutation."""
        if self._last_mutation == self.txn._mutations:
            return
        self._last_mutation = self.txn._mutations
        ok = (self._init and self._g < self._groups and
              not (self._dupsort and self._ndups(self._g) > 1 and self._d is None))
        self._valid = ok
        self._nokey = False

    def _lower_group(self, key):
        """First key node whose key is >= `key` in the database's order."""
        f = self.db.db_flags
        if not f & (_INTEGERKEY | _REVERSEKEY):
            # Bytewise order: the reader's own index answers (one C++ binary search).
            pos = self._r.lower_bound(key)
            return bisect.bisect_left(self._starts, pos) if self._dupsort else pos
        probe = _order(key, f & _INTEGERKEY, f & _REVERSEKEY)
        lo, hi = 0, self._groups
        while lo < hi:
            mid = (lo + hi) // 2
            if _order(self._group_key(mid), f & _INTEGERKEY, f & _REVERSEKEY) < probe:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _lower_dup(self, g, value):
        f = self.db.db_flags
        probe = _order(value, f & _INTEGERDUP, f & _REVERSEDUP)
        lo, hi = 0, self._ndups(g)
        while lo < hi:
            mid = (lo + hi) // 2
            if _order(self._r[self._starts[g] + mid], f & _INTEGERDUP, f & _REVERSEDUP) < probe:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- reads -----------------------------------------------------------------
    def key(self):
        self._check()
        self._refresh()
        return self.txn._value(self._r.key(self._pos()) if self._valid and not self._nokey else b"")

    def value(self):
        self._check()
        self._refresh()
        return self.txn._value(self._r[self._pos()] if self._valid else b"")

    def item(self):
        return self.key(), self.value()

    def count(self):
        self._check()
        if not self._dupsort:
            raise IncompatibleError(f"mdb_cursor_count: {_INCOMPATIBLE}")
        if not self._init:
            raise InvalidParameterError("mdb_cursor_count: Invalid argument")
        if self._g >= self._groups or self._page_end:
            # Past the last key node of a page: liblmdb answers NOTFOUND at
            # the end of the file, and otherwise reads the slot after the last
            # node, which carries no duplicates.
            if self._eof:
                raise NotFoundError(f"mdb_cursor_count: {_NOTFOUND}")
            return 1
        self._eof = False
        n = self._ndups(self._g)
        if n > 1 and self._d is None:
            raise InvalidParameterError("mdb_cursor_count: Invalid argument")
        return n

    # -- moves (mdb_cursor_first/last/next/prev) -------------------------------
    def first(self):
        self._check()
        self._d = None
        self._page_end = self._dup_page_end = False
        return self._hit(0, 0) if self._groups else self._miss()

    def last(self):
        self._check()
        self._d = None
        self._page_end = self._dup_page_end = False
        return self._hit(self._groups - 1, self._ndups(self._groups - 1) - 1) if self._groups else self._miss()

    def _next(self, op):
        if not self._init:
            return self.first()
        if self._eof:
            if self._g >= self._groups - 1:
                return self._miss()
            self._eof = False
        if self._page_end:
            # Past the last node of a page: the slot read there carries no
            # duplicates, and the move goes on to the next page's first node.
            self._d = None
            if self._dupsort and op == self._NEXT_DUP:
                return self._miss()
            return self._hit(self._g, 0)
        if self._dupsort and self._g < self._groups:
            if self._ndups(self._g) > 1:
                if op in (self._NEXT, self._NEXT_DUP):
                    if self._d is None:
                        return self._hit(self._g, 0)
                    if self._dup_page_end:
                        return self._hit(self._g, self._d)
                    if self._d + 1 < self._ndups(self._g):
                        return self._hit(self._g, self._d + 1)
                    if op == self._NEXT_DUP:
                        return self._miss()
                # NEXT_NODUP leaves the sub-cursor as it is (MDB_CURSOR_UNREF is a no-op)
            else:
                self._d = None
                if op == self._NEXT_DUP:
                    return self._miss()
        if self._g + 1 >= self._groups:
            self._eof = True
            return self._miss()
        return self._hit(self._g + 1, 0)

    def _prev(self, op):
        if not self._init:
            return self.last()
        if self._dupsort and self._g < self._groups and not self._page_end:
            if self._ndups(self._g) > 1:
                if op in (self._PREV, self._PREV_DUP):
                    if self._d is None:
                        return self._hit(self._g, self._ndups(self._g) - 1)
                    if self._d > 0:
                        return self._hit(self._g, self._d - 1)
                    if op == self._PREV_DUP:
                        return self._miss()
            else:
                self._d = None
                if op == self._PREV_DUP:
                    return self._miss()
        self._eof = False
        if self._g == 0:
            return self._miss()
        g = min(self._g, self._groups) - 1
        return self._hit(g, self._ndups(g) - 1)

    def next(self):
        self._check()
        return self._next(self._NEXT)

    def next_dup(self):
        self._check()
        return self._next(self._NEXT_DUP)

    def next_nodup(self):
        self._check()
        return self._next(self._NEXT_NODUP)

    def prev(self):
        self._check()
        return self._prev(self._PREV)

    def prev_dup(self):
        self._check()
        return self._prev(self._PREV_DUP)

    def prev_nodup(self):
        self._check()
        return self._prev(self._PREV_NODUP)

    def _dup_end(self, last):
        self._check()
        if not self._init or not self._dupsort:
            self._miss()  # py-lmdb: any failed mdb_cursor_get unpositions
            if not self._init:
                raise InvalidParameterError("mdb_cursor_get: Invalid argument")
            raise IncompatibleError(f"mdb_cursor_get: {_INCOMPATIBLE}")
        if self._g >= self._groups or self._page_end:
            return self._miss()
        n = self._ndups(self._g)
        if n > 1 and self._d is None:  # duplicates, but the sub-cursor is not on them
            self._miss()
            raise InvalidParameterError("mdb_cursor_get: Invalid argument")
        had_key = self._valid and not self._nokey
        self._hit(self._g, n - 1 if last else 0)
        # From the sub-cursor LMDB returns the value only: py-lmdb's key stays
        # what the last move gave, empty after a failed one.
        self._nokey = n > 1 and not had_key
        return True

    def first_dup(self):
        return self._dup_end(False)

    def last_dup(self):
        return self._dup_end(True)

    # -- lookups (mdb_cursor_set) ----------------------------------------------
    def _set(self, key, exact):
        """MDB_SET / MDB_SET_RANGE: the key node found, or None with LMDB's
        cursor left at the insertion point."""
        self._d = None
        self._page_end = self._dup_page_end = False
        if not self._groups:
            return None
        g = self._lower_group(key)
        if g < self._groups and (not exact or self._group_key(g) == key):
            return g
        if exact and 0 < g < self._groups and g in _leaf_layout(self.db)[0]:
            self._page_end = True
        # Past the last key an initialized cursor keeps its end flag (liblmdb
        # answers from the page it is on); otherwise the search clears it.
        if g < self._groups or not self._init:
            self._eof = False
        self._init, self._g = True, g
        return None

    def set_key(self, key):
        self._check()
        key = _buffer(key)
        if not key:
            self._miss()
            raise BadValsizeError(f"mdb_cursor_get: {_BAD_VALSIZE}")
        g = self._set(key, exact=True)
        return self._hit(g, 0) if g is not None else self._miss()

    def set_range(self, key):
        self._check()
        key = _buffer(key)
        if not key:
            return self.first()  # py-lmdb's own rule
        g = self._set(key, exact=False)
        return self._hit(g, 0) if g is not None else self._miss()

    def _set_dup(self, key, value, exact):
        self._check()
        key, value = _optional_buffer(key), _optional_buffer(value)
        if not self._dupsort:
            self._miss()  # py-lmdb: any failed mdb_cursor_get unpositions
            raise IncompatibleError(f"mdb_cursor_get: {_INCOMPATIBLE}")
        if not key:
            self._miss()
            raise BadValsizeError(f"mdb_cursor_get: {_BAD_VALSIZE}")
        g = self._set(key, exact=True)
        if g is None:
            return self._miss()
        self._init, self._eof, self._g = True, False, g
        d = self._lower_dup(g, value)
        if d < self._ndups(g) and (not exact or self._r[self._starts[g] + d] == value):
            return self._hit(g, d)
        if self._ndups(g) > 1:
            # The sub-cursor's own search initialized it at the insertion
            # point (the end when every duplicate is smaller): later
            # first_dup/last_dup/count answer and next_dup/prev_dup move from
            # there.
            self._d = d
            self._dup_page_end = 0 < d < self._ndups(g) and d in _leaf_layout(self.db)[1].get(g, ())
        return self._miss()

    def set_key_dup(self, key, value):
        return self._set_dup(key, value, exact=True)

    def set_range_dup(self, key, value):
        return self._set_dup(key, value, exact=False)

    def get(self, key, default=None):
        if key is None:
            raise TypeError("key must be given.")
        return self.value() if self.set_key(key) else default

    def getmulti(self, keys, dupdata=False, dupfixed_bytes=None, keyfixed=False, values=True):
        """(key, value) of each key found, every duplicate with ``dupdata``, as py-lmdb."""
        self._check()
        dupdata, keyfixed, values = _flag(dupdata, False), _flag(keyfixed, False), _flag(values, True)
        dupfixed_bytes = _uint(dupfixed_bytes, _SIZE_MAX, 0)
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
            return [(self.txn._value(k), self.txn._value(v)) for (k, _), v in zip(found, batch)]
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
                            out.append((self.txn._value(k), self.txn._value(block[i:i + dupfixed_bytes])))
                self._valid = False  # MDB_NEXT_MULTIPLE ran past the last page
                continue
            while self._valid:
                out.append((self.txn._value(bytes(self.key())), self.txn._value(bytes(self.value()))))
                self.next_dup()
        return memoryview(packed) if keyfixed else out

    def _multiple_blocks(self):
        """What MDB_GET_MULTIPLE and then MDB_NEXT_MULTIPLE return for the key
        the cursor is on: the duplicates of each leaf page of its tree of
        duplicates (or of its sub-page), packed (lmdb's mdb.c, fetchm). Only a
        MDB_DUPFIXED database has them: any other gives MDB_INCOMPATIBLE."""
        if not (self._dupsort and self.db.db_flags & _DUPFIXED):  # DUPFIXED means nothing without DUPSORT
            self._valid = False  # py-lmdb: a failed get leaves the cursor unpositioned
            raise IncompatibleError(f"mdb_cursor_get: {_INCOMPATIBLE}")
        g, first = self._g, self._starts[self._g]
        n = self._ndups(g)
        bounds = sorted({0, n} | set(_leaf_layout(self.db)[1].get(g, ())))
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
        keys, values = _flag(keys, True), _flag(values, True)
        if not self._valid:
            self.first()
        return self._iter(self.next, keys, values)

    def iternext_dup(self, keys=False, values=True):
        self._check()
        keys, values = _flag(keys, False), _flag(values, True)
        return self._iter(self.next_dup, keys, values)

    def iternext_nodup(self, keys=True, values=False):
        self._check()
        keys, values = _flag(keys, True), _flag(values, False)
        if not self._valid:
            self.first()
        return self._iter(self.next_nodup, keys, values)

    def iterprev(self, keys=True, values=True):
        self._check()
        keys, values = _flag(keys, True), _flag(values, True)
        if not self._valid:
            self.last()
        return self._iter(self.prev, keys, values)

    def iterprev_dup(self, keys=False, values=True):
        self._check()
        keys, values = _flag(keys, False), _flag(values, True)
        return self._iter(self.prev_dup, keys, values)

    def iterprev_nodup(self, keys=True, values=False):
        self._check()
        keys, values = _flag(keys, True), _flag(values, False)
        if not self._valid:
            self.last()
        return self._iter(self.prev_nodup, keys, values)

    def __iter__(self):
        return self.iternext()

    # py-lmdb's write calls in a read-only transaction (see Transaction.put).
    def put(self, key, value, dupdata=True, overwrite=True, append=False):
        self._check()
        _optional_buffer(key), _optional_buffer(value)
        self.txn._mutations += 1
        _readonly("mdb_put")

    def putmulti(self, items, dupdata=True, overwrite=True, append=False):
        """(0, 0) for no items; the first item fails as its put would."""
        self._check()
        for i, item in enumerate(items):
            if type(item) is not tuple or len(item) != 2:
                raise TypeError("putmulti() elements must be 2-tuples")
            _buffer(item[0]), _buffer(item[1])
            self.txn._mutations += 1
            _readonly(f"mdb_cursor_put() element #{i}")
        return (0, 0)

    def replace(self, key, value):
        self._check()
        key = _optional_buffer(key)
        _optional_buffer(value)
        if self._dupsort:
            # py-lmdb deletes the key's duplicates before it puts the value.
            if self.set_key(key):
                self.txn._mutations += 1
                _readonly("mdb_cursor_del")
            _readonly("mdb_put")
        self.txn._mutations += 1
        _readonly("mdb_put")

    def pop(self, key):
        self._check()
        if not self.set_key(_optional_buffer(key)):
            return None
        self.txn._mutations += 1
        _readonly("mdb_cursor_del")

    def delete(self, dupdata=False):
        """False on an unpositioned cursor, as py-lmdb; otherwise ReadonlyError."""
        self._check()
        if not self._valid:
            return False
        self.txn._mutations += 1
        _readonly("mdb_cursor_del")

    def close(self):
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _order(key, integer, reverse):
    """A sort key giving LMDB's order: integer keys as native unsigned
    integers, reversed keys compared from their last byte."""
    if integer:
        return int.from_bytes(key, sys.byteorder)
    return key[::-1] if reverse else key


def _leaf_layout(db):
    """Where db's leaf pages begin (cached per database): the keys that begin
    one, and per key with a tree of duplicates, the duplicates that begin one.
    Read only when a failed lookup needs it: one walk of the tree."""
    layout = getattr(db, "_layout", None)
    if layout is None:
        try:
            keys, dups = _core.leaf_layout(db._env._path, db.name or b"")
        except UnsupportedError:
            # A shard set is no LMDB of py-lmdb's: its cursor runs over the
            # parts as over one sequence of keys.
            keys, dups = [], {}
        layout = db._layout = (frozenset(keys), {g: frozenset(d) for g, d in dups.items()})
    return layout


def _group_starts(db):
    """Positions where each key's run of duplicates starts, plus the end (cached per database)."""
    starts = getattr(db, "_starts", None)
    if starts is None:
        r = db.reader
        starts, prev = [], None
        for i in range(len(r)):
            k = r.key(i)
            if k != prev:
                starts.append(i)
                prev = k
        starts.append(len(r))
        db._starts = starts
    return starts
