"""The texts of py-lmdb's messages that several compat modules give, and
liblmdb's longest key."""

CLOSED = "Attempt to operate on closed/deleted/dropped object."


BAD_VALSIZE = "MDB_BAD_VALSIZE: Unsupported size of key/DB name/data, or wrong DUPFIXED size"


NOTFOUND = "MDB_NOTFOUND: No matching key/data pair found"


INCOMPATIBLE = "MDB_INCOMPATIBLE: Operation and DB incompatible, or DB flags changed"


MAX_KEY = 511
