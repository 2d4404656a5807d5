"""The package layout: no import cycles in mas_envs or mas_trainer, and no module of theirs reaching
into another module's private names.

The import graph is read from the source with ``ast``: every ``import`` counts, at module level or
inside a function (a lazy import still ties two modules together), ``if TYPE_CHECKING:`` blocks
included.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("mas_envs", "mas_trainer")


def _modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _from_base(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a ``from ... import`` names, relative imports resolved in ``package``."""
    base = node.module or ""
    if node.level:
        anchor = package.split(".")
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return base


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, list[str], int]]:
    """``(imported module, names taken from it, line)`` for each import of a project module."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name in modules]
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, package)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules:  # `from pkg import module`
                    out.append((sub, [], node.lineno))
                elif base in modules:
                    out.append((base, [alias.name], node.lineno))
    return out


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the project modules it imports (anywhere in its source)."""
    modules = _modules(root, packages)
    return {
        name: {target for target, _, _ in _imports(name, path, modules) if target != name}
        for name, path in modules.items()
    }


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan), as sorted lists."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles():
    graph = import_graph(REPO)
    assert "mas_trainer.train" in graph and "mas_envs.registry" in graph
    assert find_cycles(graph) == []


def test_the_cycle_check_finds_lazy_and_relative_cycles(tmp_path):
    """A cycle made only of a lazy import and a relative import is still a cycle."""
    pkg = tmp_path / "mas_trainer"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "train.py").write_text("def train():\n    from mas_trainer.sub.backend import build\n")
    (pkg / "sub" / "backend.py").write_text("def build():\n    from ..train import train\n")
    (pkg / "leaf.py").write_text("import mas_trainer.train\n")
    graph = import_graph(tmp_path, ("mas_trainer",))
    assert find_cycles(graph) == [["mas_trainer.sub.backend", "mas_trainer.train"]]


def test_no_module_imports_another_modules_private_names():
    modules = _modules(REPO, PACKAGES)
    private = []
    for name, path in modules.items():
        for target, names, line in _imports(name, path, modules):
            private += [
                f"{path.relative_to(REPO)}:{line}: {target}.{n}" for n in names if n.startswith("_")
            ]
    assert private == []


def test_the_command_lines_and_the_http_engine_import_without_torch():
    """``mas-train --help``, ``mas-eval`` of a served model and the leaderboards need no torch."""
    import subprocess
    import sys

    code = (
        "import sys, mas_trainer.cli, mas_trainer.eval.cli, mas_trainer.eval.leaderboard, "
        "mas_trainer.engines.openai, mas_trainer.distributed.build\n"
        "heavy = sorted({'torch', 'transformers', 'ray', 'vllm'} & set(sys.modules))\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_the_env_layer_does_not_import_the_trainer():
    # Layers run one way: mas_trainer builds on mas_envs, never the reverse (docs/architecture.md).
    graph = import_graph(REPO)
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if name.startswith("mas_envs")
        for target in targets
        if target.startswith("mas_trainer")
    )
    assert upward == []


def _paths_into_the_packages(path: Path) -> list[str]:
    """Where a script builds a path into ``mas_envs/`` or ``mas_trainer/``: ``x / "mas_trainer"``
    or a string such as ``"mas_trainer/baselines.json"``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Div)
            and isinstance(node.right, ast.Constant)
            and node.right.value in PACKAGES
        ) or (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith(tuple(f"{p}/" for p in PACKAGES))
        ):
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_script_writes_into_the_packages(tmp_path):
    # benchmarks/ and experiments/ write to their --out-dir; what the package ships as a stored
    # figure (mas_trainer/baselines.json) is copied there by hand (docs/reproduce.md).
    scripts = sorted([*(REPO / "benchmarks").glob("*.py"), *(REPO / "experiments").glob("*.py")])
    assert any(p.name == "compare_baselines.py" for p in scripts)
    assert [hit for p in scripts for hit in _paths_into_the_packages(p)] == []
    # The check sees the loop it guards against (the old compare_baselines.py's target).
    old = tmp_path / "old.py"
    old.write_text('BASELINES = Path(__file__).parents[1] / "mas_trainer" / "baselines.json"\n')
    assert _paths_into_the_packages(old) == ["old.py:1"]


def test_experiments_and_speed_benchmarks_are_apart():
    # The scripts behind the results pages live in experiments/, speed benchmarks in benchmarks/.
    experiments = {p.stem for p in (REPO / "experiments").glob("*.py")}
    assert {"compare_baselines", "plot_baselines", "paired_episodes"} <= experiments
    assert not experiments & {p.stem for p in (REPO / "benchmarks").glob("*.py")}


def test_engines_know_nothing_of_policies_learners_or_the_config():
    """``mas_trainer/engines/`` sits below the policy that owns an engine: it never imports the
    policy, learner or config modules (a policy is built whole in :mod:`mas_trainer.policy`; an
    engine that reached back up would patch the policy it belongs to)."""
    graph = import_graph(REPO)
    upward = {"mas_trainer.policy", "mas_trainer.learner", "mas_trainer.config"}
    found = {
        f"{module} imports {target}"
        for module, targets in graph.items()
        if module.startswith("mas_trainer.engines")
        for target in targets & upward
    }
    assert "mas_trainer.engines.process" in graph
    assert found == set()


INTERPRETER_STATE = {f"sys.{n}" for n in ("argv", "modules", "path", "path_importer_cache")} | {
    f"sys.{n}" for n in ("stdin", "stdout", "stderr")
}
"""The one exception to "no module assigns into another": the ``sys`` attributes the Python
documentation names as the running interpreter's settable state. Only the sandbox's own launcher,
zygote and harness set them, inside the sandboxed interpreter, to give the program a fresh
start's ``argv``/``path``/``modules`` and its own standard streams; no project module's
behaviour changes behind its reader's back."""


def _module_names(tree: ast.Module, name: str, path: Path, modules: dict[str, Path]) -> dict:
    """Local name -> the module it is bound to by an import in this file: every ``import x`` /
    ``import x.y as z`` (project module or not), and ``from pkg import module`` of a project
    module."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    bound[a.asname] = a.name
                else:
                    top = a.name.partition(".")[0]
                    bound[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, package)
            for a in node.names:
                if f"{base}.{a.name}" in modules:
                    bound[a.asname or a.name] = f"{base}.{a.name}"
    return bound


def _reaches(root: Path, packages: tuple[str, ...] = PACKAGES) -> tuple[list[str], list[str]]:
    """``(assignments into other modules, uses of other project modules' private names)``, as
    ``path:line: what`` strings, found anywhere in the modules' source (module level or in a
    function: a module patched at run time is as hidden from its reader as one patched at
    import)."""
    modules = _modules(root, packages)
    assigns, private = [], []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        bound = _module_names(tree, name, path, modules)
        where = path.relative_to(root)

        def module_of(node: ast.AST, bound: dict = bound) -> str | None:
            return bound.get(node.id) if isinstance(node, ast.Name) else None

        for node in ast.walk(tree):
            targets: list[ast.AST] = []
            if isinstance(node, (ast.Assign, ast.Delete)):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("setattr", "delattr")
                and node.args
            ):
                targets = [ast.Attribute(value=node.args[0], attr="?", lineno=node.lineno)]
            while targets:
                t = targets.pop()
                if isinstance(t, (ast.Tuple, ast.List)):
                    targets += t.elts
                elif isinstance(t, ast.Starred):
                    targets.append(t.value)
                elif isinstance(t, ast.Attribute) and module_of(t.value):
                    target = f"{module_of(t.value)}.{t.attr}"
                    if target not in INTERPRETER_STATE:
                        assigns.append(f"{where}:{node.lineno}: {target} =")
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and module_of(node.value) in modules
                and module_of(node.value) != name
            ):
                private.append(f"{where}:{node.lineno}: {module_of(node.value)}.{node.attr}")
    return sorted(assigns), sorted(private)


def test_no_module_assigns_into_another_module():
    """A module that sets another module's attribute (``runner.warm_run = run`` at import)
    changes what that module does where its reader cannot see it."""
    assigns, _ = _reaches(REPO)
    assert assigns == []


def test_no_module_uses_another_modules_private_names():
    """``runner._collect(...)`` from another module: a private name is private to its module;
    what two modules share gets a public name."""
    _, private = _reaches(REPO)
    assert private == []


def test_the_reach_checks_find_patches_and_private_uses(tmp_path):
    pkg = tmp_path / "mas_envs"
    (pkg / "sandbox").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sandbox" / "__init__.py").write_text("")
    (pkg / "sandbox" / "runner.py").write_text("warm_run = None\ndef _collect():\n    pass\n")
    (pkg / "sandbox" / "pool.py").write_text(
        "import os\nfrom mas_envs.sandbox import runner\nfrom . import runner as r\n"
        "def run():\n    return runner._collect()\n"
        "runner.warm_run = run\nsetattr(r, 'warm_run', run)\nos.environ_copy = {}\n"
        "def _own():\n    return os._exit, r.__name__\n"
    )
    assigns, private = _reaches(tmp_path, ("mas_envs",))
    assert assigns == [
        "mas_envs/sandbox/pool.py:6: mas_envs.sandbox.runner.warm_run =",
        "mas_envs/sandbox/pool.py:7: mas_envs.sandbox.runner.? =",
        "mas_envs/sandbox/pool.py:8: os.environ_copy =",
    ]
    assert private == ["mas_envs/sandbox/pool.py:5: mas_envs.sandbox.runner._collect"]
