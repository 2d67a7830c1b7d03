"""Per-record size columns (atoms a frame): loaded from a file the user
gives, or computed once and saved where the record index is saved.

A column is a read-only 1-D int64 numpy array, never a Python list: forked
DataLoader workers share its pages and copy nothing. A saved column is an
``.npy`` file named after the data file's identity (its path, device,
inode, size and modification time), so a file written again gets a new one;
its length is checked against the dataset's on every load.
"""

import hashlib
import os
import tempfile

import numpy as np


def load_column(path, count, what):
    """The column in ``path`` (``.npy``, or ``.npz`` holding ``what``, as
    fairchem's ``metadata.npz`` holds ``natoms``) as read-only int64;
    ValueError naming the file when it is not one integer per record."""
    path = os.fspath(path)
    try:
        if path.endswith(".npz"):
            with np.load(path) as arrays:
                if what not in arrays.files:
                    raise ValueError(f"{path}: no array {what!r} (it holds {', '.join(arrays.files) or 'none'})")
                array = arrays[what]
        else:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, EOFError) as e:
        raise OSError(f"{path}: cannot read the {what} column ({e})") from None
    return checked_column(array, count, f"{path}: the {what} column")


def checked_column(array, count, said):
    """``array`` as a read-only int64 column of ``count`` values, each at
    least 0; ValueError starting with ``said`` otherwise."""
    array = np.asarray(array)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{said} must be one integer per record; got {array.dtype} of shape {array.shape}")
    if len(array) != count:
        relation = "shorter than" if len(array) < count else "longer than"
        raise ValueError(f"{said} holds {len(array)} values, {relation} the dataset's {count} records")
    column = np.ascontiguousarray(array, dtype=np.int64)
    if count and column.min() < 0:
        raise ValueError(f"{said} holds a negative size at record {int(np.argmin(column))}")
    if column.flags.writeable and np.may_share_memory(column, array):
        column = column.copy()  # the caller's array stays theirs to change
    column.flags.writeable = False
    return column


def cache_folder(index_dir):
    """Where a saved column goes, as the record index's ``index_dir``
    option says: that folder, None for "none", else the cache directory."""
    if index_dir == "none":
        return None
    if index_dir:
        return index_dir
    home = os.environ.get("LMDBLOADER_INDEX_DIR")
    if home:
        return home
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "lmdbloader")


def saved_path(data_path, folder, what):
    """The saved column's file for the database at ``data_path``."""
    data_file = os.path.join(data_path, "data.mdb") if os.path.isdir(data_path) else data_path
    st = os.stat(data_file)
    identity = f"{os.path.realpath(data_file)}\0{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}"
    digest = hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(folder, f"{digest}.{what}.npy")


def load_saved(path, count):
    """A saved column, or None when absent or not what it should be (then
    it is computed again)."""
    try:
        return checked_column(np.load(path, mmap_mode="r", allow_pickle=False), count, path)
    except (OSError, ValueError, EOFError):
        return None


def save(path, column):
    """Writes ``column`` to ``path`` whole or not at all; a folder that
    cannot be written leaves it unsaved (it is computed again next time)."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.save(f, np.asarray(column, dtype=np.int64))
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return False
    return True
