"""Every Python code block of README.md and docs/ runs as written.

Blocks are the fenced ```` ```python ```` blocks; each runs in a fresh interpreter in an empty
folder, with the repository on ``PYTHONPATH``. A block that is only meant to be read (it calls a
framework that is not installed here, or shows a function's signature) has an HTML comment
``<!-- illustration -->`` on the line before its fence: it is compiled, not run. A block that
imports an optional package runs when that package is installed (``-m adapters`` in CI, where the
adapter extras are) and is skipped with the install command otherwise. A block that talks to
``http://127.0.0.1:8000/v1`` gets a scripted OpenAI-compatible server
(``tests/helpers/chat_server.py``), one that talks to ``http://127.0.0.1:8000`` gets
``mas-openenv``, each on a free port (the block's URL is pointed there). Blocks that train a model
are marked ``slow``. The shell blocks are checked by ``test_shell_snippets.py``;
docs/architecture.md ("Code blocks in these pages") tells doc writers both runners' rules.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import doc_blocks
import openenv_server
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
ILLUSTRATION = "<!-- illustration -->"
FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)

# import name -> (extra, pytest marker) of the optional packages a block may import
OPTIONAL = {
    "trl": ("trl", "adapters"),
    "skyrl_gym": ("skyrl", "adapters"),
    "openenv": ("openenv", "adapters"),
    "verifiers": ("verifiers", "adapters"),
    "tianshou": ("marl", "marl"),
    "pandas": ("skyrl", None),
    "pyarrow": ("data", None),
    "torch": ("train", None),
    "transformers": ("train", None),
    "matplotlib": ("render", None),
}
# what makes a block slow: it trains or builds a model
SLOW = re.compile(r"\.train\(\)|mas_trainer\.(train|models)|build_tiny_model|GRPOTrainer")
# mas_envs.adapters modules import their framework
ADAPTERS = {"trl": "trl", "skyrl": "skyrl_gym", "openenv": "openenv", "verifiers": "verifiers"}


class Block(doc_blocks.Block):
    """A Python block, which also knows the packages it imports."""

    def imports(self) -> set[str]:
        names = set(re.findall(r"^\s*(?:from|import)\s+([\w]+)", self.code, re.M))
        for module in re.findall(r"mas_envs\.adapters\.(\w+)", self.code):
            if module in ADAPTERS:
                names.add(ADAPTERS[module])
        return names


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(page, line, match.group(1), before.strip() == ILLUSTRATION))
    return found


def _param(block: Block) -> object:
    marks = []
    for name in block.imports() & set(OPTIONAL):
        marker = OPTIONAL[name][1]
        if marker:
            marks.append(getattr(pytest.mark, marker))
    if SLOW.search(block.code) and not block.illustration:
        marks.append(pytest.mark.slow)
    return pytest.param(block, id=block.id, marks=marks)


ALL = blocks()


def test_blocks_are_found_and_illustrations_are_few():
    assert len(ALL) >= 30, "the extractor lost the docs' code blocks"
    illustrations = [b.id for b in ALL if b.illustration]
    assert len(illustrations) <= len(ALL) // 4, f"too many illustrations: {illustrations}"


@pytest.mark.parametrize("block", [_param(b) for b in ALL])
def test_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    compile(block.code, block.id, "exec")  # even an illustration must be valid Python
    if block.illustration:
        return
    for name in sorted(block.imports() & set(OPTIONAL)):
        if importlib.util.find_spec(name) is None:
            extra = OPTIONAL[name][0]
            pytest.skip(f"needs {name}: pip install -e '.[{extra}]'")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests" / "helpers")]),
    }
    env["TRL_EXPERIMENTAL_SILENCE"] = "1"
    code, server = block.code, None
    if "127.0.0.1:8000/v1" in code:  # an OpenAI-compatible model server
        from chat_server import ChatServer

        server = ChatServer(lambda messages: "4")
        code = code.replace("http://127.0.0.1:8000/v1", server.base_url)
    elif "127.0.0.1:8000" in code:  # the OpenEnv server
        server, port = openenv_server.start(env, subprocess.DEVNULL)
        code = code.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        if isinstance(server, subprocess.Popen):
            server.terminate()
            server.wait(timeout=30)
        elif server is not None:
            server.close()
    assert out.returncode == 0, f"{block.id} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"


def test_docs_index_shows_the_two_readme_commands():
    readme = (ROOT / "README.md").read_text()
    index = (ROOT / "docs" / "index.md").read_text()
    commands = re.findall(r"^    (scripts/setup\.sh .*)$", readme, re.M)
    assert len(commands) == 2 and all(f"    {c}\n" in index for c in commands)


@pytest.mark.parametrize("page", ["README.md", "docs/api.md"])
def test_the_first_pages_use_current_env_versions(page):
    """Issue 32: README's loop used mas/PlanPath-v0, which Gymnasium calls out of date."""
    import mas_envs

    latest: dict[str, int] = {}
    for env_id in mas_envs.list_envs():
        name, version = env_id.rsplit("-v", 1)
        latest[name] = max(latest.get(name, 0), int(version))
    text = (ROOT / page).read_text()
    code = "\n".join(FENCE.findall(text)) + "\n".join(
        line for line in text.splitlines() if line.startswith("|")
    )
    used = set(re.findall(r"(mas/\w+)-v(\d+)", code))
    old = sorted(f"{n}-v{v}" for n, v in used if n in latest and int(v) < latest[n])
    assert not old, f"{page} uses out-of-date ids {old}"
