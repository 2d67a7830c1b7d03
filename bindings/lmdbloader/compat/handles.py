"""The handle types every compat module checks arguments against: databases, and what an
environment and a transaction are; LMDB's database flags; stat() as py-lmdb shapes it."""

# lmdb.h's database flags.
_REVERSEKEY, _DUPSORT, _INTEGERKEY, _DUPFIXED, _INTEGERDUP, _REVERSEDUP = 0x02, 0x04, 0x08, 0x10, 0x20, 0x40


class _Unpicklable:
    """py-lmdb's handles cannot be pickled (they hold a live environment)."""

    def __reduce_ex__(self, protocol):
        raise TypeError(f"cannot pickle {type(self).__name__!r} object")


class _Database(_Unpicklable):
    """A database handle, as returned by Environment.open_db()."""

    def __init__(self, env, reader, name):
        self._env = env
        self.reader = reader
        self.name = name
        self.db_flags = reader.db_flags

    def flags(self, *args):
        """py-lmdb's ``_Database.flags()``: the flags the database was created with."""
        f = self.db_flags
        return {"reverse_key": bool(f & _REVERSEKEY), "dupsort": bool(f & _DUPSORT),
                "integerkey": bool(f & _INTEGERKEY), "integerdup": bool(f & _INTEGERDUP),
                "dupfixed": bool(f & _DUPFIXED)}


def _db_stat(s):
    return {"psize": s["page_size"], "depth": s["depth"], "branch_pages": s["branch_pages"],
            "leaf_pages": s["leaf_pages"], "overflow_pages": s["overflow_pages"],
            "entries": s["entries"]}


class _EnvironmentBase:
    """What Environment is, for the argument checks of modules it imports."""


class _TransactionBase(_Unpicklable):
    """What Transaction is, for the argument checks of modules it imports."""
