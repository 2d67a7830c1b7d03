"""Reader options from Python keywords to the core's text form.

Each option's name, default and check live once, in the C++ core
(``ReaderOptionList`` in include/lmdbloader/options.h); this module only
turns Python values into the text the core parses (by the option's kind), so
an unknown or bad option is the same error from Python as from the command
line. Byte sizes of lmdbloader's own Python objects (sampler blocks, ring
slots) are parsed by the same core function.
"""

import operator
import os

from . import _core

# name -> kind ("bytes", "bool", "int", "choice", "text", "checksums"), from the core.
KINDS = {name: kind for name, kind, *_ in _core.reader_options()}


def reader_option_texts(options, owner="Reader"):
    """{name: text} for the core from a Reader's keyword arguments."""
    return option_texts(options, KINDS, owner)


def option_texts(options, kinds, owner):
    """{name: text} for the core from keyword arguments, by the kinds of a
    core option table; None keeps the core's default. TypeError for an
    unknown keyword or a value of the wrong type, naming it; the core checks
    the values themselves (ValueError)."""
    texts = {}
    for name, value in options.items():
        kind = kinds.get(name)
        if kind is None:
            raise TypeError(f"{owner}() got an unexpected keyword argument {name!r} "
                            f"(options: {', '.join(kinds)})")
        if value is not None:
            texts[name] = _text(name, kind, value)
    return texts


def _text(name, kind, value):
    if kind == "bytes":  # a string goes to the core's parser as it is
        return value.strip() if isinstance(value, str) else str(byte_size(value, name))
    if kind == "bool":
        return "true" if value else "false"
    if kind == "checksums":
        # True, False or "once"; another string is a mistake, not a truth
        # value ("false" would otherwise read as True).
        if isinstance(value, str):
            if value != "once":
                raise ValueError(f'verify_checksums must be True, False or "once"; got {value!r}')
            return value
        return "true" if value else "false"
    if kind == "int":
        if isinstance(value, bool) or isinstance(value, str):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        try:
            return str(operator.index(value))
        except TypeError:
            raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None
    if kind == "text":
        if isinstance(value, bytes):
            return os.fsdecode(value)
        if not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"{name} must be a str or os.PathLike, got {type(value).__name__}")
        return os.fsdecode(os.fspath(value))
    if not isinstance(value, str):  # choice
        raise ValueError(f"{name} must be a str, got {value!r}")
    return value


def byte_size(value, what):
    """Bytes from an int or a string such as "256MiB"; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a byte size, got {value!r}")
    if not isinstance(value, str):
        try:
            value = operator.index(value)  # ints and numpy integers
        except TypeError:
            raise ValueError(f"{what} must be an int or a string like '256MiB', "
                             f"got {type(value).__name__}") from None
        if value < 0:
            raise ValueError(f"{what} must not be negative, got {value}")
        if value >= 2**64:
            raise ValueError(f"{what} must be below 2**64 bytes, got {value}")
        return value
    try:
        return _core.parse_byte_size(value.strip())
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None
