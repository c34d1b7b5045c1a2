"""Each package format's module: pgo/packaging/formats/<name>.py for each entry of pgo/base/formats.py.

A format's module defines three functions:
    make(build, folder, scratch)  its packages of a checked build (pgo/packaging/checked.py) into folder;
                                  returns (the build it packaged, [the package files])
    extract(package, name, into)  the regular files called name, out of one of its packages, into a folder;
                                  returns their paths (the identity check compares the server's build-id)
    prove(folder, info, args)     install a published folder and run it; returns the version comment the
                                  packaged server reports (None: not run, --piuparts-only)
and its recipes lie in packaging/<name>/. Adding a format is its entry in pgo/base/formats.py and its
module here; `pgo package`, `pgo prove`, the master and the downloads site find it from the entry
(tests/test_package.py fails while either lacks the other).
"""

import importlib
from types import ModuleType

from pgo import PipelineError
from pgo.base.formats import Format, parse

OPERATIONS = ("make", "extract", "prove")


def module(fmt: Format | str) -> ModuleType:
    """The module of a format (a name is refused in one line unless pgo/base/formats.py lists it)."""
    name = parse(str(fmt))
    try:
        found = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
        raise PipelineError(f"package format '{name}' has no module pgo/packaging/formats/{name}.py") from None
    missing = [op for op in OPERATIONS if not callable(getattr(found, op, None))]
    if missing:
        raise PipelineError(f"pgo/packaging/formats/{name}.py defines no {', '.join(missing)}")
    return found
