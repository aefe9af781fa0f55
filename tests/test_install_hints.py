"""Every "install X" hint names what exists for this install (issue 94 item 2): after
``pip install '../looptap[html,inspector]'`` (not editable) ``looptap run`` told the user to
install ``looptap[proxy,inspector,mcp,html]`` from the package index, where no such package is
published (the install fails; an unclaimed name is one a squatter could take), without the
overrides the recorder's pins need.

One real install per kind, into a fresh environment (uv, offline, no dependencies: they come from
this test environment by a path line, as tests/test_wheel.py does): editable from this checkout,
not editable from its path, and from a wheel built from it. In each, looptap's own hints
(:func:`install_command`, :func:`recorder_install_command`) are read from a directory of the
user's, and their install step is handed to uv as printed (``--dry-run``): it resolves."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support import progress

REPO = Path(__file__).resolve().parents[1]
OVERRIDES = REPO / ".ci" / "proxy-overrides.txt"

pytest.importorskip("uv")

_SAY = (
    "from looptap.cassettes import hints\n"
    "print(hints.install_command('proxy', 'inspector'))\n"
    "print(hints.recorder_install_command()[0])\n"
    "print(hints.install_command('html'))\n"
)


def _run(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = progress.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done


def _installed(tmp: Path, *how: str | Path) -> Path:
    """A fresh environment with looptap installed ``how`` (uv's arguments)."""
    venv = tmp / "venv"
    _run(sys.executable, "-m", "uv", "venv", "--quiet", "--python", sys.executable, venv, cwd=tmp)
    python = venv / "bin" / "python"
    _run(
        sys.executable, "-m", "uv", "pip", "install", "--quiet", "--offline", "--no-deps",
        "--python", python, *how, cwd=tmp,
    )  # fmt: skip
    site = Path(
        _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp)
        .stdout.strip()
    )  # fmt: skip
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_dependencies.pth").write_text("\n".join(sorted(deps)) + "\n")
    return python


def _hints(tmp: Path, python: Path) -> list[list[list[str]]]:
    """The three hints, each as its commands' words (split at ``&&``)."""
    project = tmp / "my-project"  # the user's own directory
    project.mkdir()
    lines = _run(python, "-c", _SAY, cwd=project).stdout.splitlines()
    assert len(lines) == 3, lines
    out = []
    for line in lines:
        words = shlex.split(line.removeprefix("(").removesuffix(")"))
        steps: list[list[str]] = [[]]
        for w in words:
            if w == "&&":
                steps.append([])
            else:
                steps[-1].append(w)
        out.append(steps)
    return out


def _install_step(steps: list[list[str]]) -> list[str]:
    """The ``uv pip install`` step of a hint, from its options on (after ``--python X``)."""
    step = next(s for s in steps if "--python" in s)
    at = step.index("--python")
    return step[at + 2 :]


def _resolves(tmp: Path, python: Path, args: list[str]) -> None:
    """uv reads the hint's requirement and overrides, and resolves them (nothing installed)."""
    args = [a for a in args if a != "-q"]
    _run(
        sys.executable, "-m", "uv", "pip", "install", "--dry-run", "--offline", "--no-deps",
        "--python", python, *args, cwd=tmp,
    )  # fmt: skip


def _override(args: list[str]) -> Path:
    assert "--override" in args, args
    return Path(args[args.index("--override") + 1])


def test_an_editable_install_names_its_checkout(tmp_path: Path) -> None:
    python = _installed(tmp_path, "-e", REPO)
    extra, recorder, html = _hints(tmp_path, python)
    args = _install_step(extra)
    assert args[-2:] == ["-e", f"{REPO}[proxy,inspector]"], args
    assert _override(args) == OVERRIDES
    assert _install_step(html)[-2:] == ["-e", f"{REPO}[html]"]
    assert "--override" not in _install_step(html)  # only the recorder's extras need them
    assert recorder[0] == ["cd", str(REPO)], recorder  # the checkout's .venv-proxy, made there
    _resolves(tmp_path, python, args)


def test_a_path_install_names_the_path_it_came_from(tmp_path: Path) -> None:
    python = _installed(tmp_path, REPO)
    extra, recorder, _ = _hints(tmp_path, python)
    args = _install_step(extra)
    assert args[-1] == f"looptap[proxy,inspector] @ {REPO.as_uri()}", args
    assert _override(args) == OVERRIDES
    rec = _install_step(recorder)
    assert rec[-1] == f"looptap[proxy,inspector,mcp,html] @ {REPO.as_uri()}", recorder
    assert _override(rec) == OVERRIDES
    assert not any(w.startswith("looptap[") and " @ " not in w for s in recorder for w in s)
    _resolves(tmp_path, python, args)
    _resolves(tmp_path, python, rec)


def test_a_wheel_install_names_the_wheel_and_the_overrides_it_ships(tmp_path: Path) -> None:
    pytest.importorskip("hatchling")
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", dist, cwd=REPO)
    (wheel,) = dist.glob("looptap-*.whl")
    python = _installed(tmp_path, wheel)
    extra, recorder, html = _hints(tmp_path, python)
    args = _install_step(extra)
    assert args[-1] == f"looptap[proxy,inspector] @ {wheel.as_uri()}", args
    shipped = _override(args)
    assert shipped.is_relative_to(python.parent.parent), shipped  # the installed copy
    assert shipped.read_text() == OVERRIDES.read_text()
    rec = _install_step(recorder)
    assert rec[-1] == f"looptap[proxy,inspector,mcp,html] @ {wheel.as_uri()}", recorder
    assert _install_step(html)[-1] == f"looptap[html] @ {wheel.as_uri()}"
    _resolves(tmp_path, python, args)
    _resolves(tmp_path, python, rec)


def test_a_source_gone_or_an_index_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Installed from a path that is gone: the hint says so, names no command that would fail.
    Installed from a package index (no ``direct_url.json``): the name, as that index has it."""
    from looptap.cassettes import hints

    monkeypatch.setattr(hints, "looptap_checkout", lambda: None)
    gone = tmp_path / "looptap-was-here"
    monkeypatch.setattr(hints, "_direct_url", lambda: {"url": gone.as_uri(), "dir_info": {}})
    said = hints.install_command("proxy")
    assert said == f"(looptap was installed from {gone}, which is no longer there: install it " \
        "again from a looptap checkout or wheel)", said  # fmt: skip
    assert hints.recorder_install_command()[0] == said
    monkeypatch.setattr(hints, "_direct_url", lambda: None)
    assert hints.install_command("html").endswith(" 'looptap[html]'"), hints.install_command("html")
    vcs = {
        "url": "https://example.org/looptap.git",
        "vcs_info": {"vcs": "git", "commit_id": "ab12"},
    }
    monkeypatch.setattr(hints, "_direct_url", lambda: vcs)
    assert hints.install_command("html").endswith(
        " 'looptap[html] @ git+https://example.org/looptap.git@ab12'"
    )
