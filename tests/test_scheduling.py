"""The suite's xdist scheduling (tests/support/scheduling.py, docs/suite.md): under ``-n 2 --dist
loadgroup``, the tests sharing a module-scoped fixture run on one worker and the fixture is made
once; a fixture used by one test, or a session-scoped one, groups nothing.

Found: with pytest 9.2 and xdist 3.8, xdist's ``xdist_group`` mark (what tests/conftest.py set
before) is silently ignored (pytest-dev/pytest-xdist#1386), and each worker that got one of the
module's tests made the fixture again: three times here, as in every CI run since."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support import progress
from tests.support.scheduling import GROUPS_DIR

pytest.importorskip("xdist")

REPO = Path(__file__).resolve().parents[1]

SHARED = """
import os, pytest

@pytest.fixture(scope="module")
def made():
    with open(os.environ["MADE_LOG"], "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")

@pytest.fixture(scope="module")
def alone():
    return 1

@pytest.mark.parametrize("i", range(6))
def test_shares(made, i):
    with open(os.environ["RAN_LOG"], "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")

def test_alone(alone):
    pass
"""


def test_tests_sharing_a_module_fixture_run_on_one_worker_and_make_it_once(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "conftest.py", tree / "tests" / "conftest.py")
    (tree / "tests" / "test_shared.py").write_text(SHARED)
    (tree / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    made, ran = tmp_path / "made.log", tmp_path / "ran.log"
    proc = progress.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "xdist", "-n", "3"),
            *("--dist", "loadgroup", "-p", "no:randomly", "-p", "no:cacheprovider"),
        ],
        cwd=tree,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", GROUPS_DIR))},
            # (only xdist of the environment's plugins: the others cost about 1.5 s of CPU in
            # each of the four processes and play no part in the scheduling)
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONPATH": str(REPO),
            "MADE_LOG": str(made),
            "RAN_LOG": str(ran),
        },
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "7 passed" in proc.stdout, proc.stdout[-3000:]
    workers = ran.read_text().split()
    assert len(workers) == 6 and len(set(workers)) == 1, workers
    assert made.read_text().split() == workers[:1]


def test_a_group_is_the_tests_joined_by_a_shared_instance(tmp_path: Path) -> None:
    """Two fixtures of one module make two groups; a module fixture used by one test and a
    session fixture group nothing; a class-scoped fixture groups its class only."""
    (tmp_path / "test_m.py").write_text(GROUPS)
    (tmp_path / "dump_groups.py").write_text(DUMP)
    proc = progress.run(
        [
            *(sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "dump_groups"),
            *("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist", "test_m.py"),
        ],
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", GROUPS_DIR))},
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # (no plugin of the environment is needed)
            "PYTHONPATH": os.pathsep.join((str(REPO), str(tmp_path))),
        },
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads((tmp_path / "groups.json").read_text())
    assert got == {
        "test_m.py::test_a1": "test_m.py::a",
        "test_m.py::test_a2": "test_m.py::a",
        "test_m.py::test_b1": "test_m.py::b",
        "test_m.py::test_b2": "test_m.py::b",
        "test_m.py::TestOne::test_1": "test_m.py::TestOne::per_class",
        "test_m.py::TestOne::test_2": "test_m.py::TestOne::per_class",
    }, got


DUMP = """
import json
from tests.support.scheduling import shared_fixture_groups

def pytest_collection_finish(session):
    with open("groups.json", "w") as f:
        json.dump(shared_fixture_groups(session.items), f)
"""

GROUPS = """
import pytest

@pytest.fixture(scope="session")
def conf(): return 0

@pytest.fixture(scope="module")
def a(): return 1

@pytest.fixture(scope="module")
def b(): return 2

@pytest.fixture(scope="module")
def once(): return 3

@pytest.fixture(scope="class")
def per_class(): return 4

def test_a1(a, conf): pass
def test_a2(a): pass
def test_b1(b, conf): pass
def test_b2(b): pass
def test_once(once, conf): pass
def test_conf1(conf): pass
def test_conf2(conf): pass

class TestOne:
    def test_1(self, per_class): pass
    def test_2(self, per_class): pass

class TestTwo:
    def test_1(self, per_class): pass
"""


def test_the_costliest_work_is_handed_out_first() -> None:
    """The queue's order (tests/support/scheduling.py): a unit's cost is its tests' summed by the
    longest listed prefix of their node ids (else 1 each); costlier first, ties in their order."""
    from tests.support.scheduling import COSTS, cost, longest_first

    assert cost("tests/why/test_why_agents.py::test_x[anthropic]") == COSTS["tests/why/"]
    assert (
        cost("tests/clients/test_context_paths.py::t")
        == COSTS["tests/clients/test_context_paths.py"]
    )
    assert cost("tests/views/test_small_words.py::t") == 1
    units = {
        "a": {"tests/views/test_a.py::t1": False, "tests/views/test_a.py::t2": False},
        "tests/why/test_why.py::t": {"tests/why/test_why.py::t": False},
        "b": {f"tests/hostile/test_matrix.py::t{i}": False for i in range(5)},
        "tests/views/test_c.py::t": {"tests/views/test_c.py::t": False},
        "tests/views/test_d.py::t": {"tests/views/test_d.py::t": False},
    }
    assert longest_first(units) == [
        "b",
        "tests/why/test_why.py::t",
        "a",
        "tests/views/test_c.py::t",
        "tests/views/test_d.py::t",
    ]
