"""experiments/v2_chain.py: design L and its controls for one seed, stage after stage."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from benchmark_scripts import ROOT, load

SEED_0 = ROOT / "experiments" / "results" / "v2-7x7" / "seed-0.json"


def _shipped_seeds() -> list[dict]:
    """Every shipped results file of design L, by seed."""
    return [json.loads(p.read_text()) for p in sorted(SEED_0.parent.glob("seed-*.json"))]


# A stand-in for mas-train: it checks that every checkpoint it is told to start from exists
# (its stage ran after its inputs), then writes a finished run folder.
FAKE_MAS_TRAIN = """
import json, os, sys
from pathlib import Path
argv = sys.argv[2:]  # after the preset
options = dict(zip(argv[::2], argv[1::2]))
starts = [options.get("--model.name")]
starts += json.loads(options.get("--model.role_models", "{}")).values()
for path in filter(None, starts):
    if not Path(path).is_dir():
        sys.exit(f"no checkpoint at {path}")
run = Path(options["--run.out_dir"]) / options["--run.name"]
if options["--run.name"] == os.environ.get("FAIL_STAGE"):
    sys.exit(3)
for policy in ("shared", "planner", "tool"):
    (run / "checkpoints" / "step-000000" / policy).mkdir(parents=True, exist_ok=True)
steps = int(options["--optim.steps"])
(run / "metrics.jsonl").write_text(
    "".join(json.dumps({"step": s, "eval/success": 0.5 + s / 1000}) + "\\n" for s in (0, steps))
)
with open(Path(options["--run.out_dir"]) / "order.txt", "a") as f:
    f.write(options["--run.name"] + "\\n")
(run / "summary.json").write_text(json.dumps({
    "steps": steps, "success_warmstart": 0.5, "success_final": 0.5 + steps / 1000,
    "wall_s": 2.4, "cpu_s": 1.6, "interrupted": False}))
"""


def _options(argv: list[str]) -> dict[str, str]:
    """A command's options, the last of a repeated one winning (as mas-train reads them)."""
    assert argv[0] == "plan-path-tiny", argv
    return dict(zip(argv[1::2], argv[2::2], strict=True))


def test_seed_0_repeats_the_commands_of_the_shipped_seed_0_runs():
    chain = load("v2_chain")
    shipped = json.loads(SEED_0.read_text())
    common = {k: f" {v} " for k, v in shipped["common"].items()}
    for stage in chain.STAGES:
        command = shipped["runs"][stage.name]["command"]
        for name, value in common.items():
            command = command.replace(f" ${{{name}[@]}} ", value)
        recorded = _options(shlex.split(command)[1:])
        ours = _options(chain.stage_argv(stage, 0, Path("runs")))
        assert ours.pop("--run.out_dir") == "runs" and ours.pop("--run.progress") == "false"
        assert ours == recorded, stage.name


def test_seeds_and_scale_reach_every_stage():
    chain = load("v2_chain")
    stages = {s.name: s for s in chain.STAGES}
    t7, t7b, l7_rl = stages["t7"], stages["t7b"], stages["l7_rl"]
    assert _options(chain.stage_argv(t7, 3, Path("r")))["--run.seed"] == "6"
    assert _options(chain.stage_argv(t7b, 3, Path("r")))["--run.seed"] == "7"  # a fresh schedule
    small = _options(chain.stage_argv(l7_rl, 0, Path("r"), scale=0.01, eval_episodes=4))
    assert (small["--optim.steps"], small["--optim.warmstart_steps"]) == ("1", "0")
    assert small["--eval.episodes"] == "4"
    assert _options(chain.stage_argv(t7b, 0, Path("r"), scale=0.01))["--optim.warmstart_steps"] == (
        "18"
    )


@pytest.fixture
def fake_mas_train(tmp_path: Path) -> list[str]:
    script = tmp_path / "fake_mas_train.py"
    script.write_text(FAKE_MAS_TRAIN)
    return [sys.executable, str(script)]


def test_every_stage_runs_after_its_inputs_once(tmp_path: Path, fake_mas_train: list[str]):
    chain = load("v2_chain")
    runs = tmp_path / "seed-1"

    def argv_of(stage):
        return chain.stage_argv(stage, 1, runs)

    started = chain.run_stages(argv_of, runs, fake_mas_train, jobs=2, poll_s=0.01)
    assert sorted(started) == sorted(s.name for s in chain.STAGES)
    order = (runs / "order.txt").read_text().split()
    for stage in chain.STAGES:  # the fake exits when an input is missing; and each ran once
        assert order.count(stage.name) == 1
        assert all(order.index(a) < order.index(stage.name) for a in stage.after), stage.name
    assert chain.run_stages(argv_of, runs, fake_mas_train, poll_s=0.01) == []  # all done
    (runs / "s7d" / "summary.json").unlink()
    assert chain.run_stages(argv_of, runs, fake_mas_train, poll_s=0.01) == ["s7d"]
    record = chain.run_record(chain.STAGES[0], runs, argv_of(chain.STAGES[0]))
    assert record["validation_success_by_rl_step"] == {"0": 0.5}
    assert record["command"].startswith("mas-train plan-path-tiny --env.id mas/PlanPathCode-v2")
    assert (record["wall_s"], record["cpu_s"]) == (2, 2)


def test_a_failed_stage_stops_what_needs_it_and_names_its_log(
    tmp_path: Path, fake_mas_train: list[str], monkeypatch: pytest.MonkeyPatch
):
    chain = load("v2_chain")
    runs = tmp_path / "seed-0"
    monkeypatch.setenv("FAIL_STAGE", "s7b")
    with pytest.raises(RuntimeError, match=r"s7b \(exit 3; .*s7b\.log\)"):
        chain.run_stages(
            lambda s: chain.stage_argv(s, 0, runs), runs, fake_mas_train, jobs=1, poll_s=0.01
        )
    ran = (runs / "order.txt").read_text().split()
    assert not {"s7b_rl", "k7", "l7", "s7c"} & set(ran)  # nothing that needs s7b started


def test_a_comparison_already_in_the_results_is_not_played_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    chain = load("v2_chain")
    for name in ("l7", "t7b_rl"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(
            json.dumps({"steps": 0 if name == "l7" else 80})
        )
    argv = chain.comparison_argv("l7", "mas", "t7b_rl", "tool", tmp_path, "test", 200)
    assert argv[1:3] == [
        str(tmp_path / "l7" / "checkpoints" / "step-000000"),
        str(tmp_path / "t7b_rl"),
    ]
    played = []

    class Done:
        returncode, stdout, stderr = 0, "progress\n200 levels: team 160, tool alone 148\n", ""

    monkeypatch.setattr(chain.subprocess, "run", lambda *a, **k: played.append(a) or Done())
    results: dict = {"test_split_once": {}}
    chain.compare(results, "test_split_once", argv)
    chain.compare(results, "test_split_once", argv)
    assert len(played) == 1
    assert list(results["test_split_once"].values()) == ["200 levels: team 160, tool alone 148"]


def _seed(seed: int, team: int, tool: int, team_only: int, tool_only: int) -> dict:
    """A results file: the team's RL lowers it, the tool's GRPO raises it; one test line."""
    runs = {
        name: {"validation_success_by_rl_step": {"0": 0.8, "40": 0.75 if name == "l7_rl" else 0.9}}
        for name in ("l7", "l7_rl", "t7b", "t7b_rl", "s7d", "s7d_rl")
    }
    command = (
        "python experiments/v2_overlap.py runs/v2-chain/seed-1/l7/checkpoints/step-000000 "
        "runs/v2-chain/seed-1/t7b_rl --modes mas tool --split test --episodes 200"
    )
    line = (
        f"200 levels: team {team}, tool alone {tool}, both 1, either 2; team only {team_only}, "
        f"tool alone only {tool_only}: exact McNemar p = 0.5"
    )
    return {"seed": seed, "runs": runs, "probes": {}, "test_split_once": {command: line}}


def test_each_player_is_played_at_its_validation_chosen_stage():
    chain = load("v2_chain")
    assert chain.comparisons(json.loads(SEED_0.read_text())["runs"]) == [
        ("l7", "mas", "t7b_rl", "tool"),  # RL lowered L (83 -> 78) and the single agent (75 -> 74)
        ("l7", "mas", "s7d", "single"),
    ]
    runs = _seed(1, 0, 0, 0, 0)["runs"]
    assert chain.comparisons(runs) == [
        ("l7", "mas", "t7b_rl", "tool"),
        ("l7", "mas", "s7d_rl", "single"),
    ]


def test_the_table_pools_the_paired_counts_of_the_seeds():
    chain = load("v2_chain")
    rows = chain.table([_seed(1, 160, 150, 20, 10), _seed(2, 150, 150, 9, 9)]).splitlines()
    assert rows[2].startswith("| 1 | 80% -> 75% | 80% -> 90% | 80% -> 90% | -5 | not played |")
    assert "| l7 vs t7b_rl: 160 vs 150 of 200 (+5.0, p = 0.5) |" in rows[2]  # the seed's own line
    # pooled: 29 levels only the team solves, 19 only the tool; exact two-sided p = 0.194
    assert rows[4].endswith("| 310 vs 300 of 400 (+2.5, p = 0.19), 2 seed(s) |  |")


def test_the_table_reads_the_shipped_seed_0_lines():
    chain = load("v2_chain")
    shipped = json.loads(SEED_0.read_text())
    assert chain.comparison(
        shipped["probes"], "l7", "t7b_rl", ("mas", "tool"), "validation", 400
    ) == (400, 326, 290, 76, 40, 0.00107)
    assert chain.comparison(
        shipped["test_split_once"], "l7", "s7d", ("mas", "single"), "test", 200
    ) == (200, 160, 155, 16, 11, 0.442)
    assert (
        chain.comparison(shipped["probes"], "l7", "s7d", ("mas", "tool"), "validation", 400) is None
    )


def test_the_results_page_shows_the_shipped_seeds_pooled_on_test():
    chain = load("v2_chain")
    seeds = _shipped_seeds()
    pooled = chain.table(seeds).splitlines()[-1].split(" | ")[-2:]  # the two test columns
    page = (ROOT / "docs" / "results.md").read_text()
    for cell in pooled:
        figure, seed_count = cell.rstrip(" |").rsplit(", ", 1)
        assert seed_count == f"{len(seeds)} seed(s)" and figure in page, figure


def test_the_exploration_log_shows_every_stage_of_the_shipped_seeds():
    chain = load("v2_chain")
    assert sorted(chain.STAGE_ROWS) == sorted(stage.name for stage in chain.STAGES)
    seeds = _shipped_seeds()
    log = (ROOT / "docs" / "v2-exploration.md").read_text()
    rows = chain.stage_table(seeds).splitlines()
    seed_columns = " | ".join(f"seed {i}" for i in range(len(seeds)))
    assert rows[0] == f"| stage | what | {seed_columns} |"
    assert rows[4].startswith("| `t7b_rl` | tool alone (3,000 steps) + GRPO | 72%, 72%, 68%, 70%,")
    missing = [row for row in rows if row not in log.splitlines()]
    assert not missing, f"docs/v2-exploration.md lacks: {missing}"


def test_the_table_reads_what_v2_overlap_prints():
    chain, overlap = load("v2_chain"), load("v2_overlap")
    line = overlap.line(
        overlap.overlap([True] * 10 + [False], [False] * 9 + [True] * 2), ("mas", "tool")
    )
    command = "python experiments/v2_overlap.py r/l7 r/t7b_rl --modes mas tool --episodes 11"
    assert chain.comparison({command: line}, "l7", "t7b_rl", ("mas", "tool"), "validation", 11) == (
        11, 10, 2, 9, 1, 0.0215,
    )  # fmt: skip
