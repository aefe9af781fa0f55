"""One import package (issue 72, item 6): the wheel installs ``looptap`` and nothing else at the
top of site-packages, so a user's own ``proxy`` or ``inspector`` (or proxy.py's ``proxy``) stands
beside it. The wheel is built from this checkout by hatchling (pyproject.toml's ``sources``) and
installed by uv into a fresh environment beside two tiny dists that own ``proxy`` and
``inspector``; looptap's dependencies come from this test environment (a path line, so none is
downloaded and the checkout's editable install is not read).

The editable install too (issue 83, item 4: the README and docs/testing.md install looptap with
``pip install -e`` into the user's own project): it exposes ``looptap`` alone. Its path entry
named the repository's root as well, so ``cassettes`` (a second copy of ``looptap.cassettes``,
whose errors ``looptap``'s did not catch), ``proxy``, ``inspector``, ``tests`` and ``bench``
imported from the checkout in every project it was installed into."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.support import progress

REPO = Path(__file__).resolve().parents[1]

pytest.importorskip("hatchling")
pytest.importorskip("uv")


def _run(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = progress.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done


def _build(project: Path, out: Path, target: str = "wheel") -> Path:
    _run(sys.executable, "-m", "hatchling", "build", "-t", target, "-d", out, cwd=project)
    name = project.name.replace("-", "_") if project != REPO else "looptap"
    (wheel,) = out.glob(f"{name}-*.whl")
    return wheel


def _user_dist(tmp: Path, module: str) -> Path:
    """A dist of the user's own that owns the top-level package ``module``."""
    project = tmp / f"user-{module}"
    (project / module).mkdir(parents=True)
    (project / module / "__init__.py").write_text(f"WHO = 'the user\\'s {module}'\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        f'[project]\nname = "user-{module}"\nversion = "1.0"\n'
        f'[tool.hatch.build.targets.wheel]\npackages = ["{module}"]\n'
    )
    return _build(project, tmp / "dist")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(REPO, tmp_path_factory.mktemp("dist"))


def test_the_wheel_holds_looptap_alone(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"looptap", "looptap-0.1.0.dist-info"}, sorted(tops)
    # the three folders under it, and no package of the repository's left at the top
    assert {n.split("/")[1] for n in names if n.startswith("looptap/")} == {
        "cassettes",
        "proxy",
        "inspector",
    }
    assert "looptap/cassettes/examples/tool_loop_anthropic.yaml" in names  # data moves with it
    assert "looptap/cassettes/net/node_env_proxy.cjs" in names  # Node's shim, for replay too
    meta = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    points = zipfile.ZipFile(wheel).read(meta).decode()
    assert "looptap = looptap.cassettes.cli:main" in points, points
    assert "looptap = looptap.cassettes.replay.testing.plugin" in points, points


def _venv(tmp_path: Path, *dists: Path) -> tuple[Path, Path]:
    """A fresh environment holding ``dists`` (none downloaded), looptap's dependencies this
    environment's: its interpreter and its site-packages."""
    venv = tmp_path / "venv"
    _run(
        sys.executable,
        "-m",
        "uv",
        "venv",
        "--quiet",
        "--python",
        sys.executable,
        venv,
        cwd=tmp_path,
    )
    python = venv / "bin" / "python"
    _run(
        sys.executable, "-m", "uv", "pip", "install", "--quiet", "--offline", "--no-deps",
        "--python", python, *dists, cwd=tmp_path,
    )  # fmt: skip
    site = Path(
        _run(
            python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path
        ).stdout.strip()
    )
    # looptap's dependencies: this environment's (a path line, its .pth files not read)
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_dependencies.pth").write_text("\n".join(sorted(deps)) + "\n")
    return python, site


def test_installed_beside_a_proxy_and_an_inspector_of_the_users(
    wheel: Path, tmp_path: Path
) -> None:
    theirs = [_user_dist(tmp_path, "proxy"), _user_dist(tmp_path, "inspector")]
    python, site = _venv(tmp_path, wheel, *theirs)
    venv = python.parent.parent
    tops = sorted(p.name for p in site.iterdir() if not p.name.endswith((".dist-info", ".pth")))
    assert [t for t in tops if not t.startswith("_")] == ["inspector", "looptap", "proxy"], tops

    code = (
        "import looptap.cassettes, looptap.proxy.config, looptap.inspector.layout\n"
        "import inspector\nimport proxy\n"
        "print(proxy.WHO); print(inspector.WHO)\n"
        "print(looptap.cassettes.__file__)\n"
        "from looptap.cassettes import open_run; print(open_run.__module__)\n"
    )
    said = _run(python, "-c", code, cwd=tmp_path).stdout.splitlines()
    assert said[:2] == ["the user's proxy", "the user's inspector"], said
    assert Path(said[2]).is_relative_to(site), said  # the wheel's, not the checkout's
    assert said[3] == "looptap.cassettes.reading._run", said

    helped = _run(venv / "bin" / "looptap", "--help", cwd=tmp_path)
    assert helped.stdout.startswith("usage: looptap"), helped.stdout[:200]
    # the pytest plugin's module, as its entry point names it, imports there too
    _run(python, "-c", "import looptap.cassettes.replay.testing.plugin", cwd=tmp_path)


def test_the_editable_install_exposes_looptap_alone(tmp_path: Path) -> None:
    """Installed editable into another project beside that project's own ``cassettes`` and
    ``proxy``: ``looptap`` imports from this checkout, the project's own modules win, and none of
    the checkout's other folders (``tests``, ``bench``) is importable."""
    editable = _build(REPO, tmp_path / "dist", "wheel:editable")
    theirs = [_user_dist(tmp_path, "cassettes"), _user_dist(tmp_path, "proxy")]
    python, _ = _venv(tmp_path, editable, *theirs)
    project = tmp_path / "project"  # the user's project, where their code runs
    project.mkdir()
    code = (
        "import importlib.util, looptap.cassettes, cassettes, proxy\n"
        "print(looptap.cassettes.__file__)\n"
        "print(cassettes.WHO); print(proxy.WHO)\n"
        "print([m for m in ('tests', 'bench', 'inspector') if importlib.util.find_spec(m)])\n"
    )
    said = _run(python, "-c", code, cwd=project).stdout.splitlines()
    assert Path(said[0]).resolve().is_relative_to(REPO / "cassettes"), said  # the checkout's
    assert said[1:] == ["the user's cassettes", "the user's proxy", "[]"], said
    # and without a module of the user's by that name, the checkout's folders are not found
    bare = "import cassettes"
    done = progress.run([str(python), "-c", bare], cwd=project, capture_output=True, text=True)
    assert done.returncode == 0  # the user's own
    _run(sys.executable, "-m", "uv", "pip", "uninstall", "--quiet", "--python", python,
         "user-cassettes", cwd=tmp_path)  # fmt: skip
    done = progress.run([str(python), "-c", bare], cwd=project, capture_output=True, text=True)
    assert done.returncode == 1 and "No module named 'cassettes'" in done.stderr, done.stderr
