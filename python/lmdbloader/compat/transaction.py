"""py-lmdb's read Transaction."""

from ..errors import ReadonlyError
from ._arguments import as_key, as_optional_bytes, db_arg, refuse_write
from ._handles import EnvironmentBase, TransactionBase, TransactionState, db_stat, state_of
from ._messages import MAX_KEY
from .cursor import Cursor
from .errors import InvalidParameterError


class Transaction(TransactionBase):
    """A read transaction (py-lmdb's ``lmdb.Transaction``). Reads see the
    database as it was when the environment was opened. With ``buffers=True``
    values come back as read-only ``memoryview`` objects, as in py-lmdb (here
    they stay valid after the transaction ends)."""

    def __init__(self, env=None, db=None, parent=None, write=False, buffers=False):
        if env is None:
            raise TypeError("'env' argument required")
        if not isinstance(env, EnvironmentBase):
            raise TypeError("invalid type")
        db = db_arg(env, db, None)
        env_state = state_of(env)
        env_state.check()
        if parent is not None:
            # Every transaction here is a read transaction, and LMDB nests
            # only write transactions (py-lmdb checks this first).
            if not isinstance(parent, Transaction):
                raise TypeError("invalid type")
            raise InvalidParameterError("Read-only transactions cannot be nested.: Invalid argument")
        if write:
            raise ReadonlyError("Cannot start write transaction with read-only environment.: Permission denied")
        super().__init__(TransactionState(env_state, buffers))
        self.env = env
        self._db = db or env_state.main
        self._slot = env_state.readers.begin()

    def get(self, key, default=None, db=None):
        self._state.check()
        if key is None:
            raise TypeError("key must be given.")
        key = as_key(key, "mdb_get")
        db = db_arg(self.env, db, self._db)
        if len(key) > MAX_KEY:
            return default
        v = db.reader.get(key)
        return default if v is None else self._state.value(v)

    def cursor(self, db=None):
        self._state.check()
        return Cursor(db_arg(self.env, db, self._db), self)

    def stat(self, db=None):
        self._state.check()
        return db_stat(self._state.env.inspect(db_arg(self.env, db, self._db)))

    def id(self):
        self._state.check()
        return self._state.env.inspect()["last_txnid"]

    def commit(self):
        self._state.check()
        self._end()

    def abort(self):
        self._end()

    def _end(self):
        if not self._state.done:
            self._state.done = True
            self._state.env.readers.end(self._slot)

    def __del__(self):  # py-lmdb aborts a transaction that was never ended
        if hasattr(self, "_slot"):
            self._end()
            self._state.env.readers.release(self._slot)

    # py-lmdb's write calls, as it answers them in a read-only transaction:
    # arguments checked first, then liblmdb's EACCES (ReadonlyError) from the
    # call that would write; pop() and a dupsort replace() look the key up
    # first and return None where it is missing.
    def put(self, key, value, dupdata=True, overwrite=True, append=False, db=None):
        self._state.check()
        as_optional_bytes(key), as_optional_bytes(value)
        db_arg(self.env, db, self._db)
        self._state.mutations += 1
        refuse_write("mdb_put")

    def replace(self, key, value, db=None):
        self._state.check()
        key = as_optional_bytes(key)
        as_optional_bytes(value)
        return Cursor(db_arg(self.env, db, self._db), self).replace(key, value)

    def pop(self, key, db=None):
        self._state.check()
        key = as_optional_bytes(key)
        return Cursor(db_arg(self.env, db, self._db), self).pop(key)

    def delete(self, key, value=b"", db=None):
        self._state.check()
        as_optional_bytes(key), as_optional_bytes(value)
        db_arg(self.env, db, self._db)
        self._state.mutations += 1
        refuse_write("mdb_del")

    def drop(self, db=None, delete=True):
        self._state.check()
        if db is None:
            raise TypeError("'db' argument required.")
        db_arg(self.env, db, self._db)
        self._state.mutations += 1
        refuse_write("mdb_drop")

    def __enter__(self):
        self._state.check()
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None and not self._state.done:
            self.commit()
        else:
            self.abort()
        return False
