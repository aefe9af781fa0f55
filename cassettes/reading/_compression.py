"""The compression of what a reader keeps for itself: the blocks of full turns and printed views
in anonymous temporary files (:mod:`._stores`), kept as rows (:mod:`._analysis_cache`). zstd at
level 1, imported on the first block (a small run never fills one)."""

from __future__ import annotations

from typing import Any

__all__ = ["compressor", "decompressor"]


def compressor() -> Any:
    """A zstd compressor at level 1."""
    import zstandard

    return zstandard.ZstdCompressor(level=1)


def decompressor() -> Any:
    """A zstd decompressor, for blocks this process wrote."""
    import zstandard

    return zstandard.ZstdDecompressor()
