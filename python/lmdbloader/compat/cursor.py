"""py-lmdb's Cursor over lmdbloader's record index: positioning, iteration, duplicates and
the positions LMDB's cursor keeps after a failed move."""

import bisect

from ..errors import Error
from ._arguments import as_bytes, as_optional_bytes, db_arg
from ._cursor_ops import CursorOps, group_starts, leaf_layout, lmdb_order
from ._handles import (
    DUPSORT,
    INTEGERDUP,
    INTEGERKEY,
    REVERSEDUP,
    REVERSEKEY,
    Database,
    TransactionBase,
    Unpicklable,
    state_of,
)
from ._messages import BAD_VALSIZE, CLOSED, INCOMPATIBLE, NOTFOUND
from .errors import BadValsizeError, IncompatibleError, InvalidParameterError, NotFoundError


class Cursor(CursorOps, Unpicklable):
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
        if (db is not None and not isinstance(db, Database)) or (
                txn is not None and not isinstance(txn, TransactionBase)):
            raise TypeError("invalid type")
        if db is None or txn is None:
            raise TypeError("db and transaction parameters required.")
        db_arg(txn.env, db, None)
        self.db = db
        self.txn = txn
        self._txn_state = state_of(txn)
        self._r = db.reader
        self._dupsort = bool(db.db_flags & DUPSORT)
        self._starts = group_starts(db) if self._dupsort else None
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
        self._last_mutation = self._txn_state.mutations
        self._closed = False

    # -- helpers ---------------------------------------------------------------
    def _check(self):
        if self._closed:
            raise Error(CLOSED)
        self._txn_state.check()

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
        self._last_mutation = self._txn_state.mutations
        return True

    def _miss(self):
        self._valid = False
        self._last_mutation = self._txn_state.mutations
        return False

    def _refresh(self):
        """py-lmdb re-reads the current item (MDB_GET_CURRENT) after a mutation."""
        if self._last_mutation == self._txn_state.mutations:
            return
        self._last_mutation = self._txn_state.mutations
        ok = (self._init and self._g < self._groups and
              not (self._dupsort and self._ndups(self._g) > 1 and self._d is None))
        self._valid = ok
        self._nokey = False

    def _lower_group(self, key):
        """First key node whose key is >= `key` in the database's order."""
        f = self.db.db_flags
        if not f & (INTEGERKEY | REVERSEKEY):
            # Bytewise order: the reader's own index answers (one C++ binary search).
            pos = self._r.lower_bound(key)
            return bisect.bisect_left(self._starts, pos) if self._dupsort else pos
        probe = lmdb_order(key, f & INTEGERKEY, f & REVERSEKEY)
        lo, hi = 0, self._groups
        while lo < hi:
            mid = (lo + hi) // 2
            if lmdb_order(self._group_key(mid), f & INTEGERKEY, f & REVERSEKEY) < probe:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _lower_dup(self, g, value):
        f = self.db.db_flags
        probe = lmdb_order(value, f & INTEGERDUP, f & REVERSEDUP)
        lo, hi = 0, self._ndups(g)
        while lo < hi:
            mid = (lo + hi) // 2
            if lmdb_order(self._r[self._starts[g] + mid], f & INTEGERDUP, f & REVERSEDUP) < probe:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- reads -----------------------------------------------------------------
    def key(self):
        self._check()
        self._refresh()
        return self._txn_state.value(self._r.key(self._pos()) if self._valid and not self._nokey else b"")

    def value(self):
        self._check()
        self._refresh()
        return self._txn_state.value(self._r[self._pos()] if self._valid else b"")

    def item(self):
        return self.key(), self.value()

    def count(self):
        self._check()
        if not self._dupsort:
            raise IncompatibleError(f"mdb_cursor_count: {INCOMPATIBLE}")
        if not self._init:
            raise InvalidParameterError("mdb_cursor_count: Invalid argument")
        if self._g >= self._groups or self._page_end:
            # Past the last key node of a page: liblmdb answers NOTFOUND at
            # the end of the file, and otherwise reads the slot after the last
            # node, which carries no duplicates.
            if self._eof:
                raise NotFoundError(f"mdb_cursor_count: {NOTFOUND}")
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
            raise IncompatibleError(f"mdb_cursor_get: {INCOMPATIBLE}")
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
        if exact and 0 < g < self._groups and g in leaf_layout(self.db)[0]:
            self._page_end = True
        # Past the last key an initialized cursor keeps its end flag (liblmdb
        # answers from the page it is on); otherwise the search clears it.
        if g < self._groups or not self._init:
            self._eof = False
        self._init, self._g = True, g
        return None

    def set_key(self, key):
        self._check()
        key = as_bytes(key)
        if not key:
            self._miss()
            raise BadValsizeError(f"mdb_cursor_get: {BAD_VALSIZE}")
        g = self._set(key, exact=True)
        return self._hit(g, 0) if g is not None else self._miss()

    def set_range(self, key):
        self._check()
        key = as_bytes(key)
        if not key:
            return self.first()  # py-lmdb's own rule
        g = self._set(key, exact=False)
        return self._hit(g, 0) if g is not None else self._miss()

    def _set_dup(self, key, value, exact):
        self._check()
        key, value = as_optional_bytes(key), as_optional_bytes(value)
        if not self._dupsort:
            self._miss()  # py-lmdb: any failed mdb_cursor_get unpositions
            raise IncompatibleError(f"mdb_cursor_get: {INCOMPATIBLE}")
        if not key:
            self._miss()
            raise BadValsizeError(f"mdb_cursor_get: {BAD_VALSIZE}")
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
            self._dup_page_end = 0 < d < self._ndups(g) and d in leaf_layout(self.db)[1].get(g, ())
        return self._miss()

    def set_key_dup(self, key, value):
        return self._set_dup(key, value, exact=True)

    def set_range_dup(self, key, value):
        return self._set_dup(key, value, exact=False)
