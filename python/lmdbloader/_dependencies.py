"""numpy and msgpack are what pip installs with lmdbloader. Installed
without them (--no-deps, an offline mirror), ``import lmdbloader`` says so
by name, before anything else imports them."""

import importlib

for _name in ("numpy", "msgpack"):
    try:
        importlib.import_module(_name)
    except ImportError as e:
        raise ImportError(f"lmdbloader needs {_name}, which is not installed for this Python "
                          f"(pip install {_name}); pip installs it with lmdbloader unless told "
                          f"not to (--no-deps)") from e
