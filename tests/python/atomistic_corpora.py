"""Atomistic corpora written by their owners' own writers: dpdata's
deepmd/lmdb ``dump_systems`` (what DeePMD-kit 3.2 reads) and ASE's LMDB
backend (``ase.db.connect("x.aselmdb")``, ase_db_backends' LMDBDatabase,
what fairchem reads); and the owners' own readers of them."""

import os

import numpy as np
import pytest

dpdata = pytest.importorskip("dpdata")
ase = pytest.importorskip("ase")
pytest.importorskip("ase_db_backends")
import ase.db  # noqa: E402
from ase.calculators.singlepoint import SinglePointCalculator  # noqa: E402
from dpdata.formats.deepmd.lmdb import dump_systems  # noqa: E402

TYPE_MAP = ["O", "H", "C"]


def deepmd_system(rng, frames, atoms):
    """A labelled dpdata System of ``frames`` frames of ``atoms`` atoms."""
    types = rng.integers(0, len(TYPE_MAP), atoms)
    return dpdata.LabeledSystem(data={
        "atom_names": list(TYPE_MAP), "atom_numbs": np.bincount(types, minlength=len(TYPE_MAP)).tolist(),
        "atom_types": types, "orig": np.zeros(3), "cells": rng.random((frames, 3, 3)) * 10,
        "coords": rng.random((frames, atoms, 3)) * 10, "energies": rng.random(frames),
        "forces": rng.random((frames, atoms, 3)), "virials": rng.random((frames, 3, 3))})


def write_deepmd(path, shape, seed=0):
    """deepmd/lmdb at ``path`` by dpdata's dump_systems: one system per
    (frames, atoms) in ``shape``, so frame_nlocs varies."""
    rng = np.random.default_rng(seed)
    dump_systems([deepmd_system(rng, f, a) for f, a in shape], str(path), type_map=TYPE_MAP, overwrite=True)
    return str(path)


def write_aselmdb(path, rows, atoms=(1, 12), deleted=(), metadata=None, seed=0):
    """An .aselmdb at ``path`` by ASE's LMDB backend: ``rows`` rows of
    ``atoms`` (a range) atoms with energy, forces and a stress, then the
    ids in ``deleted`` deleted, as LMDBDatabase.delete does."""
    rng = np.random.default_rng(seed)
    for name in (path, f"{path}-lock"):
        if os.path.exists(name):
            os.remove(name)
    db = ase.db.connect(str(path))
    with db:
        for i in range(rows):
            n = int(rng.integers(atoms[0], atoms[1] + 1))
            a = ase.Atoms(numbers=rng.integers(1, 30, n), positions=rng.random((n, 3)) * 8,
                          cell=np.diag(rng.random(3) * 4 + 8), pbc=[True, True, bool(i % 2)])
            a.calc = SinglePointCalculator(a, energy=float(rng.normal()), forces=rng.normal(size=(n, 3)),
                                           stress=rng.normal(size=6))
            db.write(a, key_value_pairs={"sid": i}, data={"frame": i, "tag": "t%d" % i})
    db = ase.db.connect(str(path))  # leaving `with db:` closed it
    if deleted:
        db.delete(list(deleted))
    if metadata is not None:
        db.metadata = metadata
    del db
    return str(path)


def ase_reader(path):
    """fairchem's way in: a read-only LMDBDatabase, rows by index."""
    from ase_db_backends.aselmdb import LMDBDatabase
    return LMDBDatabase(str(path), readonly=True)


def deepmd_reader(path):
    """DeePMD-kit 3.2's LmdbDataReader (None where deepmd-kit's imports are
    missing: then dpdata's own frame decoding is the reference)."""
    try:
        from deepmd.dpmodel.utils.lmdb_data import LmdbDataReader
    except ImportError:
        return None
    return LmdbDataReader(str(path), TYPE_MAP, batch_size=1)


def dpdata_frames(path):
    """Every frame as dpdata's deepmd/lmdb format decodes it, in key order."""
    import lmdb
    from dpdata.formats.deepmd.lmdb.format import _decode_frame
    env = lmdb.open(str(path), readonly=True, lock=False)
    try:
        with env.begin() as txn:
            return [_decode_frame(v) for k, v in txn.cursor() if k != b"__metadata__"]
    finally:
        env.close()
