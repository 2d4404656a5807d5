"""The documentation site builds in strict mode, and its quickstart says what the README says.

``mkdocs build --strict`` fails on a broken link or anchor, a page missing from the nav, a nav entry
without a page, and a docstring reference mkdocstrings cannot resolve.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    """The indented shell commands of the README's set-up section."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines() if re.match(r"^ {4,}\S", line)]


def test_quickstart_shows_the_readme_commands():
    commands = readme_commands()
    assert len(commands) == 2, commands
    quickstart = (REPO / "docs" / "quickstart.md").read_text()
    for cmd in commands:
        assert cmd in quickstart, f"docs/quickstart.md lacks the README command {cmd!r}"


def test_readme_pettingzoo_loop_runs(capsys):
    """The README's loop is runnable as it stands (its model is a stand-in that is defined)."""
    text = (REPO / "README.md").read_text()
    section = text.split("## A PettingZoo loop", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    exec(compile(code, "README.md", "exec"), {})
    success, turns = capsys.readouterr().out.split()
    assert success in ("True", "False") and 1 <= int(turns) <= 3


def test_default_run_time_is_quoted_the_same_everywhere():
    """README, quickstart and `mas-train --help` quote one measured wall time for the default."""
    quoted = {}
    sources = {
        "README.md": (REPO / "README.md").read_text(),
        "docs/quickstart.md": (REPO / "docs" / "quickstart.md").read_text(),
        "mas_trainer/cli.py": (REPO / "mas_trainer" / "cli.py").read_text(),
    }
    for name, text in sources.items():
        found = re.findall(r"in about (\d+) minutes", " ".join(text.split()))
        assert found, f"{name} does not say how long the default run takes"
        quoted[name] = found[0]
    assert len(set(quoted.values())) == 1, quoted


def test_nav_lists_every_page_and_the_required_sections():
    config = (REPO / "mkdocs.yml").read_text()
    nav = config.split("\nnav:", 1)[1]
    listed = set(re.findall(r"([\w/.-]+\.md)", nav))
    pages = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert pages == listed, f"pages not in the nav: {pages - listed}; missing: {listed - pages}"
    for page in (
        "index.md",
        "quickstart.md",
        "api.md",
        "algorithm.md",
        "evaluation.md",
        "leaderboards.md",
        "reference/mas_envs.md",
        "reference/mas_trainer.md",
    ):
        assert page in listed
    assert all(f"envs/{p.name}" in listed for p in (REPO / "docs" / "envs").glob("*.md"))


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="needs the docs extra: pip install -e '.[docs]'")
    pytest.importorskip("material", reason="needs the docs extra: pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings", reason="needs the docs extra: pip install -e '.[docs]'")
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    # The API reference was rendered from docstrings, not left as ::: directives.
    api = (site / "reference" / "mas_trainer" / "index.html").read_text()
    assert "OpenAIEngine" in api and ":::" not in api
    assert "group_advantages" in api
    envs_api = (site / "reference" / "mas_envs" / "index.html").read_text()
    assert "clone" in envs_api and "TextEnv" in envs_api
    # The leaderboard page carries its plots.
    assert "<svg" in (site / "leaderboard-results" / "index.html").read_text()
    shutil.rmtree(site)


@pytest.mark.slow
def test_pages_in_a_browser(tmp_path):
    """Key pages at 1400 and 1920 px in headless Chromium: nothing hidden, cut or dumped."""
    pytest.importorskip("mkdocs", reason="needs the docs extra: pip install -e '.[docs]'")
    if not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")):
        pytest.skip("needs Chromium (Debian: apt-get install -y chromium)")
    script = REPO / "scripts" / "check_docs_pages.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path / "shots")],
        cwd=REPO, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    shots = sorted((tmp_path / "shots").glob("*.png"))
    assert len(shots) == 14 and all(p.stat().st_size > 20_000 for p in shots)  # 7 pages x 2
