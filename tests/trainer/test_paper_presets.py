"""Every paper preset, shrunk to a tiny Qwen3-style model, runs end to end on the CPU.

Shrunk: the model (a tiny Qwen3 with tied embeddings over a Qwen3-style tokenizer whose template
honours ``enable_thinking``, a BPE trained on the presets' prompts, saved as a model folder), the
device and engine (CPU, transformers), the backend (local), and the sizes (1 task per step, 12
response tokens, 1 RL step, 2 warm-start steps at the preset's own learning rate, 2 evaluation
episodes). Kept as the preset says: the dtypes (fp32 master weights, bf16 compute and engine
copies), the learning rate, temperature, K, mini- and micro-batch sizes, gradient checkpointing,
the chat-template flags, the env id, mode and turns, the policy map, model selection. The trained
presets' weights must really move (the fp32 masters nearly all, where their bf16 roundings barely
change); the untrained baselines' must not.

The quick suite runs one task's five variants and three more presets (two of them 8B); ``-m slow``
runs every other 1.7B preset. Shrunk, an 8B preset is its 1.7B twin but for its micro-batch size,
the GPU layout that a local CPU run does not read (GPUs per policy, learners, the engine's tensor
parallelism) and the engine's batch cap, which a shrunk step stays far below:
``test_8b_presets_shrunk_are_their_1_7b_twins`` checks exactly that, and the 8B rows that run
cover the micro-batch of 2.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from qwen3_chat import THINKING_OFF_SUFFIX, save_qwen3_style_model  # noqa: E402

from mas_trainer.config import PRESETS, build_config  # noqa: E402
from mas_trainer.presets import PAPER_ROWS, PAPER_VARIANTS  # noqa: E402

PAPER = [row.name(suffix) for row in PAPER_ROWS for suffix in PAPER_VARIANTS]
DATA_TASKS = ("code", "math")  # the rows that read prepared data sets
QUICK = {
    *(PAPER_ROWS[0].name(s) for s in PAPER_VARIANTS),
    "sokoban-qwen3-8b",
    "code-qwen3-1.7b",
    "math-qwen3-8b-single-grpo",
}
FIXTURES = Path(__file__).parents[1] / "fixtures" / "datasets"
# What the code and math rows read, prepared from the fixture downloads as a user prepares the
# published files (docs/data.md); APPS' fixture is small, so its slices are too.
PREPARE = [
    ["apps", "--slice", "test=0:3", "--slice", "train=3:6", "--slice", "validation=6:"],
    ["codecontests"],
    ["livecodebench"],
    ["polaris", "--validation", "1"],
    ["aime24"],
    ["aime25"],
    ["olympiadbench"],
]


def shrink(name: str, model_dir, out_dir) -> list[str]:
    """Overrides that shrink paper preset ``name`` to the CPU (see the module docstring)."""
    cfg = PRESETS[name]
    trains = cfg.optim.steps > 0
    # The warm start plays the oracle, the reference program: CodeContests' ``1002_B. Words``
    # has none (as some published problems), so the code rows draw enough episodes to meet it.
    episodes = "8" if trains and cfg.env.id == "mas/Code-v1" else "2"
    return [
        "--model.name", str(model_dir), "--model.device", "cpu", "--model.engine", "transformers",
        "--run.backend", "local", "--run.ray_sharding", "replicate",
        "--rollout.tasks_per_step", "1", "--rollout.max_new_tokens", "12",
        "--optim.steps", "1" if trains else "0",
        "--optim.warmstart_steps", "2" if trains else "0",
        "--optim.warmstart_lr", repr(cfg.optim.lr), "--optim.warmstart_episodes", episodes,
        "--optim.warmstart_batch_size", "8",
        "--eval.episodes", "2", "--eval.select_every", "1" if trains else "0",
        "--eval.select_episodes", "2",
        "--run.threads", "1", "--run.progress", "false", "--run.save_every", "0",
        "--run.log_transcripts", "0", "--run.out_dir", str(out_dir), "--run.name", name,
    ]  # fmt: skip


def prompt_corpus(seeds: int = 8) -> list[str]:
    """What the tiny model's BPE learns from: every agent's first prompt of ``seeds`` levels of
    each env the presets play without data files, and the text fixtures of the data sets."""
    import mas_envs

    texts, seen = [], set()
    for name in PAPER:
        env_cfg = PRESETS[name].env
        key = (env_cfg.id, env_cfg.mode, json.dumps(env_cfg.options, sort_keys=True, default=str))
        if "problems" in env_cfg.options or key in seen:
            continue
        seen.add(key)
        env = mas_envs.make(env_cfg.id, mode=env_cfg.mode, **env_cfg.options)
        for seed in range(seeds):
            env.reset(seed=seed)
            texts += [env.observe(agent)["prompt"] for agent in env.possible_agents]
    files = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".jsonl", ".json", ".csv"))
    return texts + [p.read_text() for p in files]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    # A BPE over the presets' own prompts makes them 5-8x fewer tokens than bytes, as a real
    # Qwen3 tokenizer does; the presets' bf16 compute is ~11x slower than fp32 on a CPU without
    # native bf16 matmuls, so this is what keeps every preset's run within a CI's budget.
    folder = tmp_path_factory.mktemp("qwen3-style") / "model"
    return save_qwen3_style_model(folder, corpus=prompt_corpus())


@pytest.fixture(scope="module")
def prepared_data(tmp_path_factory) -> Path:
    """A folder holding ``data/`` as ``mas-data prepare ... --out data`` leaves it (the code and
    math rows name their files relative to the folder a run starts in)."""
    pytest.importorskip("pyarrow")
    from mas_envs.datasets.cli import main

    root = tmp_path_factory.mktemp("prepared")
    for name, *options in PREPARE:
        argv = ["prepare", name, "--from", str(FIXTURES / name), "--out", str(root / "data")]
        assert main([*argv, *options]) == 0, name
    return root


def test_the_table_has_every_paper_value():
    rows = {(r.task, r.size): r for r in PAPER_ROWS}
    assert rows["plan-path", "1.7b"].tasks_per_step == 128
    assert rows["sokoban", "1.7b"].tasks_per_step == rows["sudoku", "8b"].tasks_per_step == 64
    assert rows["sokoban", "8b"].tasks_per_step == 32
    assert {r.max_new_tokens for r in PAPER_ROWS if r.task != "sokoban"} == {4096}
    assert {r.max_new_tokens for r in PAPER_ROWS if r.task == "sokoban"} == {2048}
    assert {r.steps for r in PAPER_ROWS if r.task in ("sudoku", *DATA_TASKS)} == {400}
    assert {r.steps for r in PAPER_ROWS if r.task in ("plan-path", "sokoban")} == {200}
    for name in PAPER:
        cfg = PRESETS[name]
        assert cfg.env.id.endswith(("Code-v0", "Code-v1", "Math-v1")), name  # the tools write code
        assert (cfg.rollout.k, cfg.rollout.temperature, cfg.optim.mini_batch_size) == (4, 0.6, 64)
        assert cfg.rollout.enable_thinking is False and cfg.optim.lr == 1e-6
        assert (cfg.model.dtype, cfg.model.autocast, cfg.model.engine_weights_dtype) == (
            "float32", "bfloat16", "bfloat16"
        )  # fmt: skip
        assert cfg.eval.split == "test" and (cfg.optim.steps == 0 or cfg.eval.select_every > 0)
    variants = {s: PRESETS[PAPER_ROWS[0].name(s)] for s in PAPER_VARIANTS}
    assert variants[""].algo.policy_map == "per_role"
    assert variants["-shared"].algo.policy_map == "shared"
    assert variants["-single-grpo"].env.mode == "single" and variants["-single-grpo"].optim.steps
    assert variants["-single"].env.mode == "single" and variants["-single"].optim.steps == 0
    assert variants["-prompting"].env.mode == "mas" and variants["-prompting"].optim.steps == 0
    assert PRESETS["plan-path-qwen3-8b"].run.ray_sharding == "fsdp"
    for task, env_id in (("code", "mas/Code-v1"), ("math", "mas/Math-v1")):
        for size in ("1.7b", "8b"):
            cfg = PRESETS[f"{task}-qwen3-{size}"]
            assert (cfg.env.id, cfg.env.max_turns, cfg.optim.steps) == (env_id, 3, 400)
            assert set(cfg.env.options["problems"]) == {"train", "validation", "test"}
            assert cfg.eval.episodes >= 10_000  # every problem of the benchmark
            assert cfg.algo.drop_low_mean == 0.3  # the paper's group filter
    assert {PRESETS[n].algo.drop_low_mean for n in PAPER if "-qwen3-" in n and not
            n.startswith(DATA_TASKS)} == {0.0}  # fmt: skip


def _named_files(problems) -> list[str]:
    return [f for v in problems.values() for f in ([v] if isinstance(v, str) else v)]


def test_code_and_math_rows_read_what_mas_data_prepare_writes(prepared_data, tmp_path, monkeypatch):
    from mas_trainer.presets import PAPER_TESTS
    from mas_trainer.train import train

    named = {f for n in PAPER if n.split("-qwen3-")[0] in DATA_TASKS
             for f in _named_files(PRESETS[n].env.options["problems"])}  # fmt: skip
    named |= {f for tests in PAPER_TESTS.values() for f in tests.values()}
    assert len(named) == 12
    assert all((prepared_data / f).is_file() for f in named), sorted(named)
    # Started elsewhere (no data/ there), a run stops before anything runs, naming the file.
    monkeypatch.chdir(tmp_path)
    cfg = build_config("code-qwen3-1.7b", overrides=shrink("code-qwen3-1.7b", tmp_path, tmp_path))
    with pytest.raises(FileNotFoundError, match=r"data/apps/train\.jsonl"):
        train(cfg)


def _start_where_the_data_is(name: str, monkeypatch, request) -> None:
    """Code and math presets run where ``mas-data prepare`` wrote ``data/``."""
    if name.split("-qwen3-")[0] in DATA_TASKS:
        monkeypatch.chdir(request.getfixturevalue("prepared_data"))


def _bf16_changed(a: torch.Tensor, b: torch.Tensor) -> int:
    return int((a.to(torch.bfloat16) != b.to(torch.bfloat16)).sum())


# The fields in which a shrunk 8B preset may differ from its 1.7B twin: the micro-batch size (run
# by the 8B presets of the quick suite), the GPU layout, which a local CPU run does not read, and
# the engine's batch cap (128 or 256 prompts; a shrunk step generates for a few), and which layers
# recompute what under gradient checkpointing (memory and FLOPs, not the numbers: the learner's
# tests check every checkpointing layout against the plain one).
LAYOUT = {
    "run.ray_gpus_per_policy", "run.ray_learners", "model.engine_tp", "model.engine_batch_size",
    "model.checkpoint_layers", "model.checkpoint_mode",
}  # fmt: skip
RUN = [n for n in PAPER if n in QUICK or "-qwen3-8b" not in n]


def _flat(table: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in table.items():
        if isinstance(value, dict) and key != "options":
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def test_8b_presets_shrunk_are_their_1_7b_twins(tmp_path):
    from mas_trainer.config import config_to_dict

    micro = set()
    for name in (n for n in PAPER if "-qwen3-8b" in n):
        twin = name.replace("-qwen3-8b", "-qwen3-1.7b")
        big, small = (
            _flat(config_to_dict(build_config(n, overrides=shrink(n, tmp_path, tmp_path))))
            for n in (name, twin)
        )
        differ = {k for k in big.keys() | small.keys() if big.get(k) != small.get(k)}
        assert differ - LAYOUT - {"preset", "run.name"} <= {"optim.micro_batch_size"}, name
        micro.add(big["optim.micro_batch_size"])
    ran = {PRESETS[n].optim.micro_batch_size for n in RUN if PRESETS[n].optim.steps}
    assert micro <= ran, "an 8B micro-batch size that no running preset trains with"


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=() if n in QUICK else pytest.mark.slow) for n in RUN]
)
def test_paper_preset_shrunk_to_a_tiny_model_runs_and_trains(
    name, model_dir, tmp_path, monkeypatch, request
):
    from transformers import AutoTokenizer

    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.models import load_model
    from mas_trainer.outputs import RunDir
    from mas_trainer.train import train

    tok = AutoTokenizer.from_pretrained(model_dir)
    suffix = tok.encode(THINKING_OFF_SUFFIX, add_special_tokens=False)
    prompts = []
    generate = TransformersEngine.generate

    def spy(self, batch, params, seed=None):
        assert self.autocast == torch.bfloat16  # samples in bf16, as the learner computes
        prompts.extend(batch)
        return generate(self, batch, params, seed=seed)

    monkeypatch.setattr(TransformersEngine, "generate", spy)
    preset = PRESETS[name]
    _start_where_the_data_is(name, monkeypatch, request)
    cfg = build_config(name, overrides=shrink(name, model_dir, tmp_path))
    for section in ("rollout", "algo"):  # only the sizes were shrunk
        kept = {k: v for k, v in vars(getattr(preset, section)).items()
                if k not in ("tasks_per_step", "max_new_tokens")}  # fmt: skip
        assert kept == {k: getattr(getattr(cfg, section), k) for k in kept}
    skips = preset.optim.steps and preset.env.id == "mas/Code-v1"  # see shrink()
    with pytest.warns(UserWarning, match="no oracle answer") if skips else nullcontext():
        summary = train(cfg)
    run = tmp_path / name
    saved = json.loads((run / "config.json").read_text())
    assert saved["env"]["id"] == preset.env.id and saved["env"]["mode"] == preset.env.mode
    assert prompts and all(list(p[-len(suffix) :]) == suffix for p in prompts)  # thinking off
    ckpt = RunDir(run).latest_checkpoint()
    state = json.loads((ckpt / "trainer_state.json").read_text())
    policies = sorted(set(state["policy_of"].values()))
    want = sorted(state["policy_of"]) if preset.algo.policy_map == "per_role" else ["shared"]
    assert policies == want
    initial, _ = load_model(str(model_dir))
    before = initial.state_dict()
    for policy in policies:
        after, _ = load_model(str(ckpt / policy))
        total = sum(v.numel() for v in before.values())
        moved = sum(int((after.state_dict()[k] != v).sum()) for k, v in before.items())
        if not preset.optim.steps:
            assert moved == 0, policy  # a baseline row: the base model, untouched
            continue
        rounded = sum(_bf16_changed(after.state_dict()[k], v) for k, v in before.items())
        print(f"{name} {policy}: moved {moved / total:.5f}, bf16 roundings {rounded / total:.4f}")
        # 2 SFT steps + 1 RL step at lr 1e-6: the fp32 masters moved nearly everywhere, while
        # bf16 weights would have kept almost all of them (their roundings barely change).
        assert moved > 0.9 * total, (policy, moved / total)
        assert rounded < 0.2 * total, (policy, rounded / total)
    if preset.optim.steps:
        assert summary["best_step"] == 1 and (run / "checkpoints" / "best").is_dir()
    if skips:
        logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        warm = next(m for m in logged if "warmstart/episodes_without_oracle" in m)
        # Skipped, not crashed: the other episodes still gave samples.
        assert 0 < warm["warmstart/episodes_without_oracle"] < 8 and warm["warmstart/samples"]
    else:
        assert summary["success_final"] == summary["success_init"]


@pytest.mark.parametrize("name", sorted(n for n in QUICK if PRESETS[n].optim.steps))
def test_paper_preset_with_bf16_weights_is_refused_before_anything_runs(
    name, model_dir, tmp_path, monkeypatch, request
):
    from mas_trainer.train import train

    _start_where_the_data_is(name, monkeypatch, request)

    cfg = build_config(name, overrides=[*shrink(name, model_dir, tmp_path), "--model.dtype",
                                        "bfloat16", "--model.autocast", "none"])  # fmt: skip
    with pytest.raises(ValueError, match=r"--model\.dtype float32 --model\.autocast bfloat16"):
        train(cfg)
    assert not (tmp_path / name / "metrics.jsonl").read_text().strip()  # no evaluation ran


def test_reproduce_page_shows_the_current_tables(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    page = root / "docs" / "reproduce.md"
    script = [sys.executable, str(root / "scripts" / "paper_presets.py")]
    done = subprocess.run([*script, "--check", str(page)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    assert all(f"`{name}`" in page.read_text() for name in PAPER)
    # A stale copy is caught, and the message holds the table to paste.
    stale = tmp_path / "reproduce.md"
    stale.write_text(page.read_text().replace("| 128 x 4 |", "| 64 x 4 |", 1))
    done = subprocess.run([*script, "--check", str(stale)], capture_output=True, text=True)
    assert done.returncode == 1 and "lacks the current mapping table" in done.stdout


def _commands(page: str, program: str) -> list[list[str]]:
    """The ``program`` command lines of a docs page: its bash blocks (continuations joined,
    comments dropped) and its inline code spans."""
    import re
    import shlex

    lines = []
    for block in re.findall(r"```bash\n(.*?)```", page, flags=re.S):
        lines += block.replace("\\\n", " ").splitlines()
    lines += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", page, flags=re.S))
    words = [shlex.split(line, comments=True) for line in lines]
    return [w[1:] for w in words if len(w) > 1 and w[0] == program]  # not the bare name


def test_reproduce_page_names_real_presets_and_its_commands_parse(capsys):
    """Every preset the page names exists, and every mas-train and mas-eval command on it
    parses as written (mas-train's own config parser, --print-config: a dry run)."""
    import re

    from mas_envs import list_envs
    from mas_trainer.cli import train_main
    from mas_trainer.config import config_to_dict
    from mas_trainer.eval.cli import _check, _parser
    from mas_trainer.eval.suite import SUITES

    page = (Path(__file__).resolve().parents[2] / "docs" / "reproduce.md").read_text()
    named = set(re.findall(r"`([a-z-]+-qwen3-[0-9.]+b[a-z-]*)`", page))
    assert named and named <= set(PRESETS), sorted(named - set(PRESETS))
    trains = _commands(page, "mas-train")
    assert len(trains) >= 6
    for argv in trains:
        assert argv[0] in PRESETS, argv
        capsys.readouterr()
        assert train_main([*argv, "--print-config"]) == 0, (argv, capsys.readouterr().err)
        resolved = json.loads(capsys.readouterr().out)
        if argv == ["plan-path-qwen3-1.7b", "--algo.policy_map", "shared"]:  # "the same as"
            shared = config_to_dict(PRESETS["plan-path-qwen3-1.7b-shared"])
            assert {**resolved, "preset": None} == {**shared, "preset": None}
    evals = _commands(page, "mas-eval")
    assert len(evals) >= 5
    parser = _parser()
    for argv in evals:
        args = parser.parse_args(argv)
        _check(parser, args)
        assert args.env in list_envs() if args.env else args.suite in SUITES, argv
        assert isinstance(json.loads(args.env_options or "{}"), dict), argv
    assert (Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.sh").is_file()
