"""genai-prices' bundled price data, without the network updater its package imports.

``import genai_prices`` runs the package's ``__init__``, which imports ``update_prices`` and with it
httpx and asyncio (about 50 modules, a third of a second of a ``looptap show`` here) for a
background updater looptap never starts: prices come from the data the library ships. So the
package is registered here as a module of its own path whose ``__init__`` has not run yet, and
its submodules (``data_snapshot``, ``types``, ``data`` …) import from it as usual. Its first
attribute that is not a submodule already imported (``genai_prices.calc_price`` for a price the fast
path of :mod:`cassettes.analysis.pricing` leaves to the library, or any other code in the
process asking for one) runs the real ``__init__`` in that same module object, so whoever asks
gets the whole package. Where genai-prices was imported already, nothing is done.

:data:`PRICES_VERSION` is read from the distribution's ``METADATA`` next to the package, not
through ``importlib.metadata``, which costs as much to import as the reading it does.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from genai_prices.data_snapshot import DataSnapshot

__all__ = ["PRICES_VERSION", "data_file", "get_snapshot", "library"]

_LOCK = threading.Lock()


def _register() -> None:
    """``genai_prices`` in ``sys.modules`` with its ``__init__`` deferred to its first attribute."""
    with _LOCK:
        if "genai_prices" in sys.modules:
            return
        spec = importlib.util.find_spec("genai_prices")
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            import genai_prices  # noqa: F401 - not a plain package directory: import it as it is
            return
        shell = importlib.util.module_from_spec(spec)
        loader = spec.loader
        where = [Path(p) for p in spec.submodule_search_locations]
        done = threading.Lock()

        def __getattr__(name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            if any(
                (d / f"{name}.py").is_file() or (d / name / "__init__.py").is_file() for d in where
            ):
                # A submodule (``from . import types`` in another submodule asks this way): itself.
                return importlib.import_module(f"genai_prices.{name}")
            with done:  # the __init__ runs once, whichever thread asks first
                if shell.__dict__.pop("__getattr__", None) is not None:
                    loader.exec_module(shell)
            if name in shell.__dict__:
                return shell.__dict__[name]
            raise AttributeError(f"module 'genai_prices' has no attribute {name!r}")

        shell.__dict__["__getattr__"] = __getattr__
        sys.modules["genai_prices"] = shell


def _version() -> str:
    """genai-prices' installed version (as ``importlib.metadata.version("genai-prices")``)."""
    spec = importlib.util.find_spec("genai_prices")
    origin = Path(spec.origin).parent.parent if spec is not None and spec.origin else None
    if origin is not None:
        for meta in origin.glob("genai_prices-*.dist-info/METADATA"):
            try:
                with meta.open(encoding="utf-8") as f:
                    for line in f:
                        if line.startswith("Version:"):
                            return line.split(":", 1)[1].strip()
                        if not line.strip():
                            break
            except OSError:
                break
    from importlib.metadata import version

    return version("genai-prices")


def library() -> ModuleType:
    """The whole ``genai_prices`` package (its ``__init__`` run)."""
    import genai_prices

    genai_prices.calc_price  # noqa: B018 - the first attribute runs the deferred __init__
    return genai_prices


def data_file() -> Path | None:
    """genai-prices' bundled price table (``genai_prices/data.py``), or ``None`` when it is not a
    plain file."""
    spec = importlib.util.find_spec("genai_prices")
    if spec is None or spec.submodule_search_locations is None:
        return None
    for d in spec.submodule_search_locations:
        path = Path(d) / "data.py"
        if path.is_file():
            return path
    return None


def get_snapshot() -> DataSnapshot:
    """genai-prices' price data (``genai_prices.data_snapshot.get_snapshot()``), imported on first
    use:
    :mod:`cassettes.analysis.price_memo` answers most calls without it."""
    from genai_prices.data_snapshot import get_snapshot as snapshot

    return snapshot()


_register()
PRICES_VERSION = _version()
