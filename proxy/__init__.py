"""The recorder: mitmproxy's side of looptap.

Importing any of its modules first makes ``mitmproxy.addons`` a package whose own ``__init__`` runs
only when one of its names is read (:func:`_addons_on_demand`). mitmproxy imports that package for
every addon module (``mitmproxy.master`` needs ``addons.termlog``), and its ``__init__`` imports all
31 default addons (flask and jinja2 for the onboarding app, passlib and ldap3 for proxy auth,
aioquic's QUIC parser …) where the recorder uses four: 300 of the 1,160 modules a ``looptap run``
loaded, about a third of its start-up's CPU (bench/startup.py, docs/suite.md). Every ``looptap run
--from`` branch of a ``looptap why`` pays that start-up.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType


def _addons_on_demand() -> None:
    """``mitmproxy.addons`` in ``sys.modules`` with its path, its ``__init__`` not run: a submodule
    (``from mitmproxy.addons import core``) imports as ever, and any other name of the package
    (``default_addons``, what ``mitmdump`` reads) runs the ``__init__`` on first reading, in this
    module object. Nothing to do where the package is loaded already (a stock mitmproxy tool
    loading the addon) or mitmproxy is not installed (the SDK side's environment)."""
    if "mitmproxy.addons" in sys.modules:
        return
    try:
        spec = importlib.util.find_spec("mitmproxy.addons")
    except ImportError:
        return
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(name: str) -> object:  # (PEP 562)
        if name.startswith("__"):
            raise AttributeError(name)
        if importlib.machinery.PathFinder.find_spec(f"{spec.name}.{name}", package.__path__):
            return importlib.import_module(f"{spec.name}.{name}")  # a submodule, alone
        del package.__dict__["__getattr__"]
        loader.exec_module(package)
        return getattr(package, name)

    package.__dict__["__getattr__"] = __getattr__
    sys.modules[spec.name] = package
    parent: ModuleType = sys.modules["mitmproxy"]
    parent.addons = package  # type: ignore[attr-defined]


_addons_on_demand()
