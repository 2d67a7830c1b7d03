"""The compiled extension, ``_core``, imported with an error that says why
it cannot be when it cannot: an extension built for another interpreter
(another CPython version, or the GIL build under a free-threaded 3.14t,
whose extensions carry a ``t`` in their suffix) is not found under this
interpreter's name, and Python's own "cannot import name '_core'" names
neither what was found nor what to install."""

import glob
import importlib
import os
import sys
import sysconfig


def _load():
    try:
        return importlib.import_module("._core", __package__)
    except ImportError as e:
        here = os.path.dirname(os.path.abspath(__file__))
        found = sorted(os.path.basename(p) for p in glob.glob(os.path.join(here, "_core*")))
        if not found or any(p.endswith(sysconfig.get_config_var("EXT_SUFFIX") or "") for p in found):
            raise
        this = "CPython %d.%d" % sys.version_info[:2]
        if sysconfig.get_config_var("Py_GIL_DISABLED"):
            this += " free-threaded (no GIL); lmdbloader ships no free-threaded build yet, run it " \
                    "on the standard interpreter of this version"
        else:
            this += "; install the lmdbloader wheel made for it (pip install lmdbloader picks it)"
        raise ImportError(f"lmdbloader's compiled extension in {here} was built for another Python "
                          f"({', '.join(found)}; this interpreter loads "
                          f"'_core{sysconfig.get_config_var('EXT_SUFFIX')}'): this is {this}") from e


core = _load()
