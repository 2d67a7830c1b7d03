"""The handle types every compat module checks arguments against: databases, and what an
environment and a transaction are, with the state each shares with the rest of the package
(an environment's reader slots among it: what Environment.readers() lists); LMDB's database
flags; stat() as py-lmdb shapes it."""

import os
import threading

from .. import _core
from ..errors import Error
from ._messages import CLOSED

# lmdb.h's database flags.
REVERSEKEY, DUPSORT, INTEGERKEY, DUPFIXED, INTEGERDUP, REVERSEDUP = 0x02, 0x04, 0x08, 0x10, 0x20, 0x40


class Unpicklable:
    """py-lmdb's handles cannot be pickled (they hold a live environment)."""

    def __reduce_ex__(self, protocol):
        raise TypeError(f"cannot pickle {type(self).__name__!r} object")


class Database(Unpicklable):
    """A database handle, as returned by Environment.open_db()."""

    def __init__(self, env, reader, name):
        self.env = env
        self.reader = reader
        self.name = name
        self.db_flags = reader.db_flags
        # What cursors work out once per database (_cursor_ops.py): where each
        # key's duplicates start, and where the leaf pages begin.
        self.group_starts = None
        self.leaf_layout = None

    def flags(self, *args):
        """py-lmdb's ``_Database.flags()``: the flags the database was created with."""
        f = self.db_flags
        return {"reverse_key": bool(f & REVERSEKEY), "dupsort": bool(f & DUPSORT),
                "integerkey": bool(f & INTEGERKEY), "integerdup": bool(f & INTEGERDUP),
                "dupfixed": bool(f & DUPFIXED)}


# Its type's name is py-lmdb's, which type(db).__name__ and the pickling
# error show.
Database.__name__ = Database.__qualname__ = "_Database"


def db_stat(s):
    return {"psize": s["page_size"], "depth": s["depth"], "branch_pages": s["branch_pages"],
            "leaf_pages": s["leaf_pages"], "overflow_pages": s["overflow_pages"],
            "entries": s["entries"]}


class EnvironmentState:
    """What an Environment shares with its transactions: its path, main
    database, reader slots and whether it is closed, and LMDB's counts per
    database, read once (the environment is a snapshot)."""

    def __init__(self):
        self.path = None
        self.main = None     # the main database (a Database)
        self.readers = None  # a ReaderTable
        self.closed = True   # until opened
        self.counts = {}     # database name -> _core.inspect()

    def check(self):
        if self.closed:
            raise Error(CLOSED)

    def inspect(self, db=None):
        name = (db or self.main).name or b""
        if name not in self.counts:
            self.counts[name] = _core.inspect(self.path, name)
        return self.counts[name]


class ReaderTable:
    """The reader slots liblmdb's lock file would hold for one environment
    opened with lock=True, so ``Environment.readers()`` lists what py-lmdb
    lists: a slot per read transaction object (its thread, and its snapshot
    until it ends, "-" after: py-lmdb resets an ended transaction and keeps
    its slot while the object lives); when the object dies, up to
    ``max_spare_txns`` slots stay as spares for later transactions and the
    rest are freed (mdb_txn_reset, then mdb_txn_abort)."""

    def __init__(self, max_spare):
        self._max_spare = max_spare
        self._slots = []   # per slot: [thread id, live] or None when free
        self._spares = []  # slots kept by ended transactions, reused last-in first

    def begin(self):
        if self._spares:
            slot = self._spares.pop()
            self._slots[slot][1] = True
            return slot
        entry = [threading.get_ident(), True]
        for slot, held in enumerate(self._slots):
            if held is None:
                self._slots[slot] = entry
                return slot
        self._slots.append(entry)
        return len(self._slots) - 1

    def end(self, slot):
        self._slots[slot][1] = False

    def release(self, slot):
        if len(self._spares) < self._max_spare:
            self._spares.append(slot)
        else:
            self._slots[slot] = None

    def listing(self, txnid):
        held = [s for s in self._slots if s is not None]
        if not held:
            return "(no active readers)\n"
        pid = os.getpid()
        return "    pid     thread     txnid\n" + "".join(
            f"{pid:10d} {tid:x} {txnid if live else '-'}\n" for tid, live in held)


class TransactionState:
    """What a Transaction shares with its cursors and the write calls it
    refuses: whether it ended, whether values come back as memoryviews, and
    its count of write attempts (py-lmdb's TransObject.mutations; a cursor
    re-reads its item when it changed)."""

    def __init__(self, env_state, buffers):
        self.env = env_state
        self.buffers = bool(buffers)
        self.done = False
        self.mutations = 0

    def check(self):
        if self.done or self.env.closed:
            raise Error(CLOSED)

    def value(self, v):
        return memoryview(v) if self.buffers and v is not None else v


class EnvironmentBase:
    """What Environment is, for the argument checks of modules it imports."""

    def __init__(self):
        self._state = EnvironmentState()


class TransactionBase(Unpicklable):
    """What Transaction is, for the argument checks of modules it imports."""

    def __init__(self, state):
        self._state = state


def state_of(handle):
    """The state an Environment or a Transaction shares with this package's
    other modules: the one way in, so that no module reads another's privates."""
    return handle._state
