"""First on the path of a tree from before the one import package (issue 72), by bench/perf.py's
``_path``: that tree has no ``looptap``, and without this the environment's editable install (this
checkout's) would answer ``import looptap…`` and run this checkout's code in that tree's place."""

raise ImportError("a tree from before the one import package has no looptap package")
