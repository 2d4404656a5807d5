"""Every shell command in README.md and docs/ is checked as written.

Shell blocks are the fenced ```` ```bash ```` (``sh``, ``shell``, ``console``) blocks and the
indented code blocks (an indented block is always a command; any other code has a fenced block
with its language). Each block runs under bash in an empty folder, with every command it calls
replaced by a recorder: bash expands variables, arrays, globs and ``{0,1}`` braces, and each
command's final argv is then checked, the cheapest way that still fails when it drifts from the
code:

- ``mas-train ARGS``: the real command line with ``--print-config`` added (the preset, config file
  and every override parsed and validated; nothing trained). A ``--run.resume`` of a run an
  earlier command of the block named gets that run's folder (config, no weights).
- ``mas-eval``, ``mas-leaderboard``, ``mas-data``, ``mas-openenv``, ``python -m MODULE`` and
  ``python SCRIPT`` (``benchmarks/``, ``experiments/``): the script exists and the real program
  parses the arguments with its own parser, stopped right after parsing; arguments a script
  passes on to mas-train (``--section.field value``) are validated as mas-train overrides.
  ``--help`` runs for real, as do the commands that are instant: ``mas-data list``, ``python -c``,
  ``mas-eval`` with the ``oracle`` or ``random`` policy.
- ``pip install``, ``scripts/setup.sh``: every extra named exists in pyproject.toml and every
  path exists; ``python -m pytest``: every path exists and every ``-m`` marker is declared.
- Any argument that names a path in the repository (``mas_trainer/...``, ``benchmarks/...``)
  must exist; a command the runner does not know fails the block.

The slow part (``-m slow``) runs the commands that take seconds to a minute for real:
``mas-train --plan`` (fake tensors), ``python -m timeit``, ``--quick``/``--dry-run`` scripts.

Markers, an HTML comment on the line before a block's fence (or an indented block's first line):
``<!-- illustration -->`` (the block is only read: a sample of output, a pseudo-command; it is
syntax-checked, not run; keep them few) and ``<!-- file: NAME -->`` (before a block of any
language: its text is written to NAME in the folder where the page's shell blocks run, e.g. the
``my.toml`` that a ``mas-train --config my.toml`` reads).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
import tomllib
from doc_blocks import Block

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
ILLUSTRATION = "<!-- illustration -->"
FILE_MARKER = re.compile(r"^<!-- file: (\S+) -->$")
SHELL_LANGS = {"bash", "sh", "shell", "console"}
# an opening fence: its info string (language first) has no backtick (else it is inline code)
FENCE = re.compile(r"^( *)(`{3,}|~{3,}) *([^`\s]*)[^`]*$")
# commands the recorder stands in for (found on PATH; nothing else is)
COMMANDS = [
    *("mas-train", "mas-eval", "mas-leaderboard", "mas-data", "mas-openenv", "mas-demo"),
    *("python", "python3", "pip", "nice", "timeout"),
    *("ray", "vllm", "vf-eval", "cp", "ls", "git", "docker", "apt-get", "sudo"),
]
# commands with a path, made in the folder as recorders too
PATH_COMMANDS = [
    *(f".venv/bin/{c}" for c in ("python", "mas-train", "mas-eval", "mas-leaderboard", "mas-data")),
    *(".venv-vllm/bin/python", "scripts/setup.sh", "scripts/install_vllm_cpu.sh"),
    "benchmarks/gpu_check.sh",
]
# third-party programs: only their repository paths are checked
EXTERNAL = {"ray", "vllm", "vf-eval", "cp", "ls", "git", "docker", "apt-get", "sudo"}
# the repository's folders (not its outputs: runs/, data/): an argument that starts with one
# names a file of the repository
REPO_DIRS = {"mas_envs", "mas_trainer", "benchmarks", "experiments", "scripts", "docs", "tests"}
REPO_DIRS |= {"leaderboards", "environments"}
# the publishers' files, in small: what `mas-data prepare` reads from raw/NAME
RAW_DATA = ROOT / "tests" / "fixtures" / "datasets"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])
MARKERS = {m.split(":")[0] for m in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"]}


@dataclass(frozen=True)
class Page:
    blocks: list[Block]  # its shell blocks
    files: dict[str, str]  # the <!-- file: NAME --> blocks
    all_blocks: int  # every code block, of any language


def _marker(lines: list[str], i: int) -> str:
    """The HTML comment on the line before line ``i`` ('' when there is none)."""
    before = lines[i - 1].strip() if i > 0 else ""
    return before if before.startswith("<!--") else ""


def read_page(path: Path) -> Page:
    lines = path.read_text().splitlines()
    blocks, files, count, i = [], {}, 0, 0
    while i < len(lines):
        line = lines[i]
        if m := FENCE.match(line):
            indent, fence, lang = len(m[1]), m[2], m[3]
            end = i + 1
            closing = re.compile(re.escape(fence[0]) + f"{{{len(fence)},}}")  # no info string
            while end < len(lines) and not closing.fullmatch(lines[end].strip()):
                end += 1
            code = "\n".join(s[indent:] for s in lines[i + 1 : end]) + "\n"
            count += 1
            if f := FILE_MARKER.match(_marker(lines, i)):
                files[f[1]] = code
            if lang in SHELL_LANGS:
                blocks.append(Block(path, i + 1, code, _marker(lines, i) == ILLUSTRATION))
            i = end + 1
            continue
        indent = _indented_code(lines, i)
        if indent:
            end = i
            while end < len(lines) and (
                not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) >= indent
            ):
                end += 1
            while not lines[end - 1].strip():
                end -= 1
            code = "\n".join(s[indent:] for s in lines[i:end]) + "\n"
            count += 1
            blocks.append(Block(path, i + 1, code, _marker(lines, i) == ILLUSTRATION))
            i = end
            continue
        i += 1
    return Page(blocks, files, count)


def _indented_code(lines: list[str], i: int) -> int:
    """The indent of the indented code block that starts at line ``i`` (0 when none does): a
    line indented 4 spaces more than the text it follows (a paragraph, or a list item's text),
    after a blank line."""
    line = lines[i]
    if not line.strip() or i == 0 or (lines[i - 1].strip() and not _marker(lines, i)):
        return 0
    indent = len(line) - len(line.lstrip())
    j = i - 1
    while j >= 0 and (not lines[j].strip() or lines[j].startswith("<!--")):
        j -= 1
    if j < 0:
        return 0
    before = lines[j]
    item = re.match(r"^( *)([-*]|\d+\.) +", before)
    text_indent = len(item[0]) if item else len(before) - len(before.lstrip())
    return indent if indent >= text_indent + 4 else 0


PAGE_DATA = {page: read_page(page) for page in PAGES}
ALL = [b for page in PAGE_DATA.values() for b in page.blocks]


def test_blocks_are_found_and_illustrations_are_few():
    assert len(ALL) >= 60, "the extractor lost the docs' shell blocks"
    illustrations = [b.id for b in ALL if b.illustration]
    assert len(illustrations) <= len(ALL) // 10, f"too many illustrations: {illustrations}"


def test_the_extractor_finds_every_code_block_mkdocs_renders():
    """The count of code blocks per page is the count Python-Markdown (MkDocs, with the site's
    extensions) renders: a block the extractor missed would never be checked."""
    markdown = pytest.importorskip("markdown")
    extensions = ["admonition", "attr_list", "md_in_html", "tables", "pymdownx.superfences"]
    for page, data in PAGE_DATA.items():
        html = markdown.markdown(page.read_text(), extensions=extensions)
        rendered = len(re.findall(r"<pre[^>]*>(?:<span></span>)?<code", html))
        assert data.all_blocks == rendered, f"{page.relative_to(ROOT)}: {rendered} rendered"


# ---------------------------------------------------------------------------- running a block

# a call's record: its name, folder, the variables the block set (NAME=VALUE), "--", arguments
RECORDER = """#!/bin/bash
env=()
for name in $(compgen -e); do
    case $name in PATH|HOME|PWD|OLDPWD|SHLVL|_|SNIPPET_LOG) ;; *) env+=("$name=${!name}") ;; esac
done
printf '%s\\0' "$0" "$PWD" "${env[@]}" -- "$@" $'\\x1e' >> "$SNIPPET_LOG"
"""
PRELUDE = """command_not_found_handle() {
    printf '%s\\0' "!unknown" "$PWD" -- "$@" $'\\x1e' >> "$SNIPPET_LOG"; return 127
}
"""


@dataclass(frozen=True)
class Call:
    """One command the block ran: its name (as written), the folder it ran in (relative to the
    block's folder), its arguments and the environment variables the block set for it."""

    name: str
    cwd: Path
    args: list[str]
    env: dict[str, str]

    def __str__(self) -> str:
        return shlex.join([self.name, *self.args])


def record(block: Block, folder: Path) -> list[Call]:
    """Run ``block`` under bash in ``folder`` with every command a recorder; the calls made."""
    shims = folder / ".shims"
    shims.mkdir()
    for name in COMMANDS:
        (shims / name).write_text(RECORDER)
        (shims / name).chmod(0o755)
    for name in PATH_COMMANDS:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(RECORDER)
        (folder / name).chmod(0o755)
    for name in REPO_DIRS:  # `cd benchmarks` works
        (folder / name).mkdir(exist_ok=True)
    (folder / "raw").symlink_to(RAW_DATA)  # mas-data prepare NAME --from raw/NAME
    log = folder / ".calls"
    log.touch()
    env = {"PATH": str(shims), "SNIPPET_LOG": str(log), "HOME": str(folder)}
    out = subprocess.run(
        ["/bin/bash", "--noprofile", "--norc", "-c", PRELUDE + block.code],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # a command the runner does not know is recorded as "!unknown" and reported by check()
    assert out.returncode in (0, 127) and not out.stderr, f"{block.id}: bash: {out.stderr}"
    calls = []
    for entry in log.read_text().split("\x1e\0"):
        fields = entry.split("\0")[:-1]
        if not fields:
            continue
        name, cwd, rest = fields[0], Path(fields[1]), fields[2:]
        cut = rest.index("--")
        env = dict(v.split("=", 1) for v in rest[:cut])
        if name.startswith(str(folder)):
            name = str(Path(name).relative_to(folder)).removeprefix(".shims/")
        calls.append(Call(name, cwd.relative_to(folder), rest[cut + 1 :], env))
    return calls


def unwrap(call: Call) -> Call:
    """``nice -n 10 CMD``, ``timeout N CMD`` -> ``CMD``."""
    args = call.args
    if call.name == "nice":
        args = args[2:] if args[:1] == ["-n"] else args
    elif call.name == "timeout":
        args = args[1:]
    else:
        return call
    return unwrap(Call(args[0], call.cwd, args[1:], call.env))


# ---------------------------------------------------------------------------- the checks


class Parsed(Exception):
    """Raised by an argparse parser once it has parsed its arguments."""

    def __init__(self, namespace: argparse.Namespace, extras: list[str]) -> None:
        super().__init__()
        self.namespace, self.extras = namespace, extras


@contextlib.contextmanager
def stop_after_parsing() -> Iterator[None]:
    """Every argparse parser raises :class:`Parsed` once the outermost parse is done (a
    subcommand's parser inside it returns as usual); errors exit 2 as they always do."""
    original = argparse.ArgumentParser.parse_known_args
    depth = 0

    def parse(self, args=None, namespace=None, *, known=False):
        nonlocal depth
        depth += 1
        try:
            ns, extras = original(self, args, namespace)
        finally:
            depth -= 1
        if depth:
            return ns, extras
        if extras and not known:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        raise Parsed(ns, extras if known else [])

    def parse_known(self, args=None, namespace=None):
        return parse(self, args, namespace, known=True)

    with (
        mock.patch.object(argparse.ArgumentParser, "parse_args", parse),
        mock.patch.object(argparse.ArgumentParser, "parse_known_args", parse_known),
    ):
        yield


def parses(program: Callable[[], object], argv: list[str]) -> tuple[str, Parsed | None]:
    """Run ``program`` (a CLI's main or a script) with ``sys.argv[1:] = argv`` until its parser
    is done. Returns ('', Parsed) when the arguments parse, (error message, None) when not,
    ('', None) when the program ended without parsing (``--help``)."""
    stderr = io.StringIO()
    with (
        stop_after_parsing(),
        mock.patch.object(sys, "argv", ["prog", *argv]),
        mock.patch.object(sys, "path", list(sys.path)),  # a script may add its folder
        mock.patch.dict(os.environ),  # or set a variable (bench_vs_trl: HF_HUB_OFFLINE)
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(stderr),
    ):
        try:
            program()
        except Parsed as parsed:
            return "", parsed
        except SystemExit as stop:
            if stop.code not in (0, None):
                return stderr.getvalue() or f"exit {stop.code}", None
    return "", None


def check_overrides(overrides: list[str], preset: str | None = None) -> str:
    """'' when ``overrides`` (``--section.field value``) are valid mas-train overrides."""
    from mas_trainer.config import ConfigError, build_config

    try:
        build_config(preset, overrides=overrides)
    except ConfigError as err:
        return f"mas-train overrides {overrides}: {err}"
    return ""


def check_mas_train(call: Call, folder: Path) -> str:
    from mas_trainer.cli import train_main

    args = [a for a in call.args if a != "--plan"]
    if "--gpu-gib" in args:  # --plan's option: a number of GiB
        i = args.index("--gpu-gib")
        if not re.fullmatch(r"\d+(\.\d+)?", args[i + 1]):
            return f"`{call}`: --gpu-gib {args[i + 1]!r} is no number of GiB"
        del args[i : i + 2]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = train_main([*args, "--print-config"])
    if rc != 0:
        return f"`{call}` -> exit {rc}: {err.getvalue()}"
    if "--help" in args or "-h" in args:
        return ""
    config = json.loads(out.getvalue())
    if config["run"]["name"]:  # a later --run.resume of this run finds its folder
        run = folder / call.cwd / config["run"]["out_dir"] / config["run"]["name"]
        (run / "checkpoints").mkdir(parents=True, exist_ok=True)
        (run / "config.json").write_text(json.dumps(config))
    return ""


def check_cli(call: Call) -> str:
    """mas-eval, mas-leaderboard, mas-data, mas-openenv: the real parser, stopped after it."""
    from mas_envs.datasets.cli import main as data_main
    from mas_trainer.eval.cli import main as eval_main
    from mas_trainer.eval.leaderboard.cli import main as leaderboard_main

    name = call.name.removeprefix(".venv/bin/")
    clis = {"mas-eval": eval_main, "mas-leaderboard": leaderboard_main, "mas-data": data_main}
    if name == "mas-openenv":  # its module needs the openenv extra (CI's adapters step has it)
        main = pytest.importorskip("mas_envs.adapters.openenv", exc_type=ImportError).main
    else:
        main = clis[name]
    error, _ = parses(lambda: main(call.args), call.args)
    return f"`{call}`: {error}" if error else ""


def check_python(call: Call, folder: Path) -> str:
    args = list(call.args)
    if args[:2] == ["-m", "pytest"]:
        return check_pytest(call, args[2:])
    if args[:1] == ["-m"]:
        module = args[1]
        if module == "timeit":  # compiled here, timed in the slow test
            return check_timeit(call, args[2:])
        if module.startswith("vllm"):  # vLLM's own server, in .venv-vllm
            return ""
        error, _ = parses(lambda: runpy.run_module(module, run_name="__main__"), args[2:])
        return f"`{call}`: {error}" if error else ""
    if args[:1] == ["-c"]:
        return run_for_real(call, folder)
    script = ROOT / call.cwd / args[0]
    if not script.is_file():
        return f"`{call}`: no script {script.relative_to(ROOT)}"
    return check_script(call, script, args[1:])


def check_script(call: Call, script: Path, argv: list[str]) -> str:
    def run() -> None:
        sys.path.insert(0, str(script.parent))  # as `python SCRIPT` has it: siblings import
        runpy.run_path(str(script), run_name="__main__")

    error, parsed = parses(run, argv)
    if error:
        return f"`{call}`: {error}"
    if parsed is None:
        return ""
    overrides = parsed.extras or getattr(parsed.namespace, "overrides", None) or []
    if overrides:
        preset = getattr(parsed.namespace, "preset", None)
        # compare_baselines: --envs PRESET...; memorised_probe: PRESET...
        presets = vars(parsed.namespace).get("envs") or vars(parsed.namespace).get("presets")
        for p in presets or [preset]:
            if error := check_overrides(list(overrides), p):
                return f"`{call}`: {error}"
    return ""


def check_timeit(call: Call, args: list[str]) -> str:
    """``python -m timeit [-s SETUP] STMT``: the setup and the statement compile."""
    code = [a for a in args if not a.startswith("-")]  # SETUP and STMT (a number compiles too)
    for text in code:
        try:
            compile(text, str(call), "exec")
        except SyntaxError as err:
            return f"`{call}`: {err}"
    return ""


def check_pytest(call: Call, args: list[str]) -> str:
    for i, a in enumerate(args):
        if i and args[i - 1] == "-m":
            unknown = set(re.findall(r"\w+", a)) - MARKERS - {"not", "and", "or"}
            if unknown:
                return f"`{call}`: markers {sorted(unknown)} are not declared in pyproject.toml"
        elif a.startswith("tests/") and not (ROOT / a.split("::")[0]).exists():
            return f"`{call}`: no {a}"
    return ""


def check_extras(call: Call) -> str:
    for a in call.args:
        for group in re.findall(r"\[([\w,-]+)\]", a):
            unknown = set(group.split(",")) - EXTRAS
            if unknown:
                return f"`{call}`: no extra {sorted(unknown)} in pyproject.toml"
    if call.name == "scripts/setup.sh" and call.args:
        unknown = set(call.args[0].split(",")) - EXTRAS
        if unknown:
            return f"`{call}`: no extra {sorted(unknown)} in pyproject.toml"
    for option, a in zip(call.args, call.args[1:], strict=False):
        if option == "-e" and "[" not in a and not (ROOT / a).exists():
            return f"`{call}`: no {a}"
    return ""


def check_paths(call: Call) -> str:
    """Every argument that names a path in the repository exists."""
    for a in call.args:
        path = a.split("=", 1)[-1]
        if "/" not in path or path.split("/", 1)[0] not in REPO_DIRS:
            continue
        where = ROOT / call.cwd / path
        # a --prefix names the files whose names it starts
        if not where.exists() and not any(where.parent.glob(where.name + "*")):
            return f"`{call}`: no {path} in the repository"
    return ""


INSTANT_EVAL_POLICIES = {"oracle", "random"}


def run_for_real(call: Call, folder: Path) -> str:
    """Run a cheap command as written, in the block's folder (a subprocess)."""
    name = call.name.removeprefix(".venv/bin/")
    argv = [name, *call.args]
    if name in ("python", "python3"):
        args = list(call.args)
        if not args[0].startswith("-"):  # a script of the repository (the folder has none)
            args[0] = str(ROOT / call.cwd / args[0])
        argv = [sys.executable, *args]
    elif name.startswith("mas-"):
        module = {
            "mas-eval": "mas_trainer.eval.cli",
            "mas-data": "mas_envs.datasets.cli",
            "mas-train": "mas_trainer.cli",
            "mas-leaderboard": "mas_trainer.eval.leaderboard.cli",
        }[name]
        entry = "train_main" if name == "mas-train" else "main"
        code = f"import sys; from {module} import {entry}; sys.exit({entry}())"
        argv = [sys.executable, "-c", code, *call.args]
    env = {**os.environ, **call.env, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        argv, cwd=folder / call.cwd, env=env, capture_output=True, text=True, timeout=600
    )
    # --plan exits 1 when the run does not fit: a verdict, as 0 is
    expect = (0, 1) if name == "mas-train" and "--plan" in call.args else (0,)
    if out.returncode not in expect:
        return f"`{call}` -> exit {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    return ""


def is_instant(call: Call, folder: Path) -> bool:
    """Commands cheap enough to run for real in the quick suite."""
    name = call.name.removeprefix(".venv/bin/")
    args = call.args
    if "--help" in args or "-h" in args:
        return name.startswith("mas-")
    if name == "mas-data":  # list; prepare from the fixture of the publisher's files
        if args[:1] == ["list"]:
            return True
        source = args[args.index("--from") + 1] if "--from" in args else ""
        # the fixture holds a few problems: no --validation 500 split out of them
        return bool(source) and (folder / call.cwd / source).exists() and "--validation" not in args
    if name == "mas-eval":
        i = args.index("--policy") if "--policy" in args else -1
        return i >= 0 and args[i + 1] in INSTANT_EVAL_POLICIES
    return False


LOCAL_SERVER = "http://127.0.0.1:8000/v1"


def needs_a_chat_server(call: Call) -> bool:
    """``mas-eval --env ID --policy openai:MODEL`` against a local server in chat mode: it runs
    against a scripted one (a tokens-mode call needs the model's tokenizer, a suite its data)."""
    args = call.args
    base_url = args[args.index("--base-url") + 1] if "--base-url" in args else None
    return (
        call.name.removeprefix(".venv/bin/") == "mas-eval"
        and "--env" in args
        and "--tokenizer" not in args
        and any(a.startswith("openai:") for a in args)
        and (base_url or call.env.get("OPENAI_BASE_URL")) == LOCAL_SERVER
    )


def run_with_a_chat_server(call: Call, folder: Path) -> str:
    """Run ``call`` for real against a scripted OpenAI-compatible server on a free port."""
    from chat_server import ChatServer  # tests/helpers

    server = ChatServer(lambda messages: "4")
    try:

        def moved(text: str) -> str:
            return text.replace(LOCAL_SERVER, server.base_url)

        env = {k: moved(v) for k, v in call.env.items()}
        error = run_for_real(Call(call.name, call.cwd, [moved(a) for a in call.args], env), folder)
        assert error or server.requests, f"`{call}` sent no request to the server"
    finally:
        server.close()
    return error


def check(call: Call, folder: Path) -> str:
    call = unwrap(call)
    if call.name == "!unknown":
        return f"`{shlex.join(call.args)}`: the runner knows no command {call.args[0]!r}"
    if error := check_paths(call):
        return error
    name = call.name.removeprefix(".venv/bin/").removeprefix(".venv-vllm/bin/")
    if name in EXTERNAL:
        return ""
    if name == "pip" or call.name == "scripts/setup.sh":
        return check_extras(call)
    if call.name in ("scripts/install_vllm_cpu.sh",):
        return "" if (ROOT / call.name).is_file() else f"no {call.name}"
    if call.name == "benchmarks/gpu_check.sh":
        return check_script(call, ROOT / "benchmarks/gpu_check.py", call.args)
    if name == "mas-train":
        return check_mas_train(call, folder)
    if name in ("python", "python3"):
        return check_python(call, folder)
    if name.startswith("mas-"):
        if error := check_cli(call):
            return error
        if is_instant(call, folder):
            return run_for_real(call, folder)
        if needs_a_chat_server(call):
            return run_with_a_chat_server(call, folder)
        return ""
    return f"`{call}`: the runner has no check for {call.name!r}"


def _id(block: Block) -> object:
    return pytest.param(block, id=block.id)


@pytest.mark.parametrize("block", [_id(b) for b in ALL])
def test_shell_block_is_current(block: Block, tmp_path: Path, monkeypatch) -> None:
    if block.illustration:
        out = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True)
        assert out.returncode == 0, f"{block.id}: {out.stderr}"
        return
    for name, text in PAGE_DATA[block.path].files.items():
        (tmp_path / name).write_text(text)
    calls = record(block, tmp_path)
    assert calls, f"{block.id}: the block ran no command"
    monkeypatch.chdir(tmp_path)
    errors = [e for c in calls if (e := check(c, tmp_path))]
    assert not errors, f"{block.id}:\n" + "\n".join(errors)


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("python benchmarks/compare_baselines.py --rows mas", "no benchmarks/compare_baselines.py"),
        ("nice -n 10 python benchmarks/bench_envs.py --quik", "unrecognized arguments: --quik"),
        ("python experiments/compare_baselines.py --rows mas --optim.lrr 1", "optim.lrr"),
        ("mas-train plan-path-tiny --rollout.kk 8", "rollout.kk"),
        ("mas-train plan-path-tinny", "plan-path-tinny"),
        ("mas-eval --env mas/PlanPath-v1 --polcy oracle", "--polcy"),
        ("mas-leaderboard sumbit r.json", "sumbit"),
        ("mas-data prepare apps --frm raw/apps", "--frm"),
        ("pip install -e '.[train,vllms]'", "no extra ['vllms']"),
        ("scripts/setup.sh trian", "no extra ['trian']"),
        ("python -m pytest -m gpus tests/envs/test_numeric.py", "markers ['gpus']"),
        ("python -m pytest tests/test_numeric.py", "no tests/test_numeric.py"),
        ("cp runs/b.json mas_trainer/baseline.json", "no mas_trainer/baseline.json"),
        ("mas-trian plan-path-tiny", "knows no command 'mas-trian'"),
    ],
)
def test_the_checks_catch_drift(code: str, error: str, tmp_path: Path, monkeypatch) -> None:
    """Each check fails on a command that drifted from the code (a typo stands in for it)."""
    calls = record(Block(ROOT / "README.md", 0, code + "\n", False), tmp_path)
    monkeypatch.chdir(tmp_path)
    errors = "\n".join(e for c in calls if (e := check(c, tmp_path)))
    assert error in errors, errors or "no error"


def runs_in_the_slow_suite(call: Call) -> bool:
    """Commands that take seconds to a minute: run for real by the slow test."""
    call = unwrap(call)
    name = call.name.removeprefix(".venv/bin/")
    if name == "mas-train":
        return "--plan" in call.args  # fake tensors: no model, no GPU
    if name in ("python", "python3"):
        args = call.args
        return args[:2] == ["-m", "timeit"] or bool({"--quick", "--dry-run"} & set(args))
    return False


SLOW_BLOCKS = [
    b for b in ALL if not b.illustration and re.search(r"--plan|timeit|--quick|--dry-run", b.code)
]


@pytest.mark.slow
@pytest.mark.parametrize("block", [_id(b) for b in SLOW_BLOCKS])
def test_cheap_commands_run_for_real(block: Block, tmp_path: Path) -> None:
    """``mas-train --plan``, ``python -m timeit``, the benchmarks' ``--quick`` and ``--dry-run``:
    run as written (in the block's folder)."""
    calls = [unwrap(c) for c in record(block, tmp_path) if runs_in_the_slow_suite(c)]
    assert calls, f"{block.id}: no command to run (the pattern that chose it is stale)"
    errors = [e for c in calls if (e := run_for_real(c, tmp_path))]
    assert not errors, f"{block.id}:\n" + "\n".join(errors)


def test_every_fenced_block_names_its_language():
    """A bare fence could hide a command from this runner: every block says what it holds
    (``bash`` is checked here, ``python`` by test_snippets.py, ``text``/``toml`` are read)."""
    bare = []
    for page in PAGES:
        lines, inside = page.read_text().splitlines(), None
        for n, line in enumerate(lines, 1):
            if inside is None and (m := FENCE.match(line)):
                inside = re.compile(re.escape(m[2][0]) + f"{{{len(m[2])},}}")
                if not m[3]:
                    bare.append(f"{page.relative_to(ROOT)}:{n}")
            elif inside is not None and inside.fullmatch(line.strip()):
                inside = None
    assert not bare, f"fences without a language: {bare}"


def test_the_sandbox_page_shows_the_command_bubblewrap_gets(monkeypatch):
    """docs/sandbox.md quotes the bubblewrap command line as built by ``bwrap_command``, on the
    page's machine (root, pyenv's Python 3.11.7, /bin and /lib links into /usr): the page's
    block is that command, placeholders for the descriptors and the launcher's source."""
    from mas_envs.sandbox import modes, runner

    text = (ROOT / "docs" / "sandbox.md").read_text()
    quoted = re.search(r"^```text\n(bwrap .*?)^```", text, re.M | re.S)
    assert quoted, "docs/sandbox.md: no ```text block that starts with bwrap"
    python = "/root/.pyenv/versions/3.11.7"
    links = {"/bin": "usr/bin", "/sbin": "usr/sbin", "/lib": "usr/lib", "/lib64": "usr/lib64"}
    monkeypatch.setattr(modes, "interpreter", lambda: f"{python}/bin/python3.11")
    monkeypatch.setattr(modes, "interpreter_roots", lambda: [python])
    monkeypatch.setattr(modes, "launcher_source", lambda: "<launcher source>")
    monkeypatch.setattr(modes.os.path, "islink", lambda path: path in links)
    monkeypatch.setattr(modes.os, "readlink", links.__getitem__)
    mode = modes.Mode(bwrap="bwrap", drop_uid=True, userns=False, cgroup=True, seccomp=True)
    # the descriptors as the page's placeholders (the function only formats them)
    cmd = modes.bwrap_command(
        mode, runner.TMPFS_BYTES, "<spec fd>", ("<info>", "<block>"), "<filter>"
    )
    assert " ".join(quoted[1].split()) == " ".join(cmd)
