from __future__ import annotations

import sys
from pathlib import Path

# Make `tests/_corpus.py` importable as `_corpus` from every test module.
sys.path.insert(0, str(Path(__file__).parent))
