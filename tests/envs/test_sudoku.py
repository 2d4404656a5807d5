"""Sudoku (mas/Sudoku-v0): rules, solver, generation, parser, rewards, prompts, numeric view."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test
from test_conformance import EXPECTED

import mas_envs
from mas_envs.policies import oracle_policy, play_episode, random_policy
from mas_envs.sudoku import SudokuEnv
from mas_envs.sudoku.generate import CLUE_RANGE, check_config, generate, random_full_grid
from mas_envs.sudoku.prompts import format_fills, parse_answer
from mas_envs.sudoku.rules import (
    conflict,
    conflict_at,
    count_solutions,
    format_grid,
    geometry,
    has_other_solution,
    solve,
)


def b(text: str) -> bytes:
    """A board from digits and dots, whitespace ignored: ``b("12.. 34..")``."""
    return bytes(0 if ch == "." else int(ch) for ch in text if not ch.isspace())


GRID4 = b("1234 3412 2143 4321")
# The example puzzle of Wikipedia's Sudoku article and the solution printed there.
WIKI = b(
    "53..7.... 6..195... .98....6. 8...6...3 4..8.3..1 7...2...6 .6....28. ...419..5 ....8..79"
)
WIKI_SOLUTION = b(
    "534678912 672195348 198342567 859761423 426853791 713924856 961537284 287419635 345286179"
)

# ---------------------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    ("board", "expected"),
    [
        (GRID4, ""),
        (b("1... .... .... ...."), ""),
        (bytes(16), ""),
        (b("11.. .... .... ...."), "row 1 has the digit 1 twice"),
        (b(".... ..3. .... ..3."), "column 3 has the digit 3 twice"),
        (b(".... .... 4... .4.."), "box 3 has the digit 4 twice"),
        (b("1234 3412 2143 4312"), "column 3 has the digit 1 twice"),
        (WIKI_SOLUTION, ""),
        (WIKI, ""),
    ],
)
def test_conflict_names_the_first_repeated_digit(board, expected):
    n = 4 if len(board) == 16 else 9
    assert conflict(board, n) == expected


def test_conflict_at_checks_only_the_changed_cells_against_their_peers():
    board = b("1... .... .... ....")
    assert conflict_at(b("1... .1.. .... ...."), 4, [5]) == "box 1 has the digit 1 twice"
    assert conflict_at(b("1... ..1. .... ...."), 4, [6]) == ""
    assert conflict_at(board, 4, []) == ""


def test_conflict_at_agrees_with_conflict_after_one_change():
    rng = np.random.default_rng(5)
    for n in (4, 9):
        for _ in range(300):
            board = bytearray(random_full_grid(rng, n))
            for i in rng.choice(n * n, size=int(rng.integers(0, n * n)), replace=False):
                board[i] = 0
            cell = int(rng.integers(n * n))
            board[cell] = int(rng.integers(0, n + 1))
            assert conflict_at(bytes(board), n, [cell]) == conflict(bytes(board), n)


@pytest.mark.parametrize(
    ("board", "n", "limit", "expected"),
    [
        (GRID4, 4, 2, 1),  # already solved
        (bytes(16), 4, 2, 2),  # the empty board: many
        (bytes(16), 4, 1000, 288),  # all 4x4 Sudoku grids (a known count)
        (b("11.. .... .... ...."), 4, 2, 0),  # a conflict among the clues
        (WIKI, 9, 2, 1),
    ],
)
def test_count_solutions(board, n, limit, expected):
    assert count_solutions(board, n, limit) == expected


def all_4x4_grids() -> list[bytes]:
    """Every valid 4x4 grid, by brute force over row permutations (independent of the solver)."""
    rows = list(itertools.permutations(range(1, 5)))
    grids: list[tuple[int, ...]] = [()]
    for _ in range(4):
        grids = [
            g + r for g in grids for r in rows if not conflict(bytes(g + r).ljust(16, b"\0"), 4)
        ]
    return [bytes(g) for g in grids]


def test_count_solutions_agrees_with_brute_force_on_random_4x4_boards():
    grids = all_4x4_grids()
    assert len(grids) == 288
    rng = np.random.default_rng(0)
    for _ in range(200):
        source = grids[int(rng.integers(len(grids)))]
        keep = rng.random(16) < rng.random()
        board = bytes(v if k else 0 for v, k in zip(source, keep, strict=True))
        matches = [g for g in grids if all(p in (0, v) for p, v in zip(board, g, strict=True))]
        assert count_solutions(board, 4, limit=1000) == len(matches)
        assert solve(board, 4) in matches


def test_solve_known_puzzle_and_unsolvable():
    assert solve(WIKI, 9) == WIKI_SOLUTION
    assert solve(GRID4, 4) == GRID4
    assert solve(b("11.. .... .... ...."), 4) is None
    # No conflict among the clues, but row 1 needs a 4 in column 4, which already has one.
    assert solve(b("123. .... .... ...4"), 4) is None


def test_has_other_solution_is_the_uniqueness_test():
    for cell in range(16):
        holed = bytearray(GRID4)
        holed[cell] = 0
        assert not has_other_solution(bytes(holed), 4, cell, GRID4[cell])
    # The 2x2 "deadly pattern": swapping 1 and 2 in rows 1 and 3 keeps a valid grid.
    swap = bytearray(GRID4)
    for cell in (0, 1, 8, 9):
        swap[cell] = 0
    assert has_other_solution(bytes(swap), 4, 0, 1)
    assert count_solutions(bytes(swap), 4) == 2


def test_geometry_tables_and_errors():
    geo = geometry(9)
    assert geo.rcb[80] == (8, 8, 8) and geo.rcb[30] == (3, 3, 4)
    assert len(geo.units) == 27 and all(len(u) == 9 for u in geo.units)
    assert len(geo.peer_getters[0](WIKI_SOLUTION)) == 20
    with pytest.raises(ValueError, match="perfect square"):
        geometry(5)


def test_format_grid_shapes():
    assert format_grid(b("1... .2.. ..3. ...4"), 4) == "1 . . .\n. 2 . .\n. . 3 .\n. . . 4"
    assert (
        format_grid(GRID4, 4, boxes=True) == "1 2 | 3 4\n3 4 | 1 2\n----+----\n2 1 | 4 3\n4 3 | 2 1"
    )
    text = format_grid(WIKI, 9, boxes=True)
    assert text.splitlines()[0] == "5 3 . | . 7 . | . . ."
    assert text.splitlines()[3] == "------+-------+------"


# ---------------------------------------------------------------------------------- generation


@pytest.mark.parametrize(
    ("size", "clues", "seeds"),
    [(4, None, 300), (4, 4, 100), (4, 15, 20), (9, None, 8), (9, 25, 2), (9, 60, 3)],
)
def test_generated_puzzles_are_unique_and_match_their_solution(size, clues, seeds):
    target = check_config(size, clues)
    for seed in range(seeds):
        puzzle, solution = generate(np.random.default_rng(seed), size, clues)
        assert len(puzzle) == size * size and sum(v > 0 for v in puzzle) == target
        assert count_solutions(puzzle, size) == 1
        assert solve(puzzle, size) == solution
        assert 0 not in solution and conflict(solution, size) == ""
        assert all(p in (0, s) for p, s in zip(puzzle, solution, strict=True))


def test_generation_is_deterministic_and_varied():
    a = generate(np.random.default_rng(123), 9)
    assert generate(np.random.default_rng(123), 9) == a
    puzzles = {generate(np.random.default_rng(s), 4)[0] for s in range(200)}
    assert len(puzzles) > 150
    grids = {random_full_grid(np.random.default_rng(s), 4) for s in range(500)}
    assert len(grids) > 200  # there are 288 in all


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"size": 5}, r"size must be one of \[4, 9\], got 5"),
        ({"size": "4"}, "size must be one of"),
        ({"size": True}, "size must be one of"),
        ({"size": 4.0}, "size must be one of"),
        ({"size": 4, "clues": 3}, r"clues must be an int from 4 to 15 for size 4.*got 3"),
        ({"size": 4, "clues": 16}, "clues must be an int from 4 to 15"),
        ({"size": 9, "clues": 17}, r"clues must be an int from 25 to 80 for size 9.*got 17"),
        ({"size": 9, "clues": 81}, "from 25 to 80"),
        ({"size": 4, "clues": 6.0}, "must be an int"),
    ],
)
def test_bad_config_is_a_clear_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mas_envs.make("mas/Sudoku-v0", **kwargs)


def test_numpy_ints_are_accepted_as_config():
    env = mas_envs.make("mas/Sudoku-v0", size=np.int64(9), clues=np.int32(40))
    assert (env.size, env.clues) == (9, 40) and type(env.size) is int
    env.reset(seed=0)
    assert sum(v > 0 for v in env.puzzle) == 40


def test_clue_range_ends_are_reachable():
    for size, (low, high) in CLUE_RANGE.items():
        assert high == size * size - 1
        assert check_config(size, low) == low


def test_level_id_is_one_level_and_unknown_task_ids_are_rejected():
    env = mas_envs.make("mas/Sudoku-v0")
    env.reset(options={"task_id": 42})
    first = (env.puzzle, env.solution)
    env.reset(seed=9)
    env.reset(options={"task_id": 42})
    assert (env.puzzle, env.solution) == first
    assert env.puzzle == generate(np.random.default_rng(42), 4)[0]
    with pytest.raises(ValueError, match="non-negative int level id"):
        env.reset(options={"task_id": "level-1"})


# ---------------------------------------------------------------------------------- parser

G = GRID4
ACCEPT_GRIDS = [
    "####\n1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1",
    "#### 1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1",
    "Let me check each box first.\n\n####\n```\n1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1\n```",
    "####\n1 2 | 3 4\n3 4 | 1 2\n----+----\n2 1 | 4 3\n4 3 | 2 1",
    "####\n[[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]",
    '####\n["1234", "3412", "2143", "4321"]',
    "####\n1234\n3412\n2143\n4321",
    "####\n1,2,3,4\n3,4,1,2\n2,1,4,3\n4,3,2,1",
    "#### 1234341221434321",
    "####\nRow 1: 1 2 3 4\nRow 2: 3 4 1 2\nRow 3: 2 1 4 3\nRow 4: 4 3 2 1",
    "#### Final answer\n1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1\n\nEvery row and box is complete.",
    "####\n| 1 | 2 | 3 | 4 |\n|---|---|---|---|\n| 3 | 4 | 1 | 2 |\n"
    "| 2 | 1 | 4 | 3 |\n| 4 | 3 | 2 | 1 |",
    "####\r\n1 2 3 4\r\n3 4 1 2\r\n2 1 4 3\r\n4 3 2 1\r\n",
    "<think>\n1 1 1 1\n</think>\n1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1",
    "The solved grid is:\n```text\n1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1\n```\nDone.",
    "Solution:\n1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1",
    "#### \\boxed{1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1}",
    "The answer is \\boxed{1234\n3412\n2143\n4321}",
    "#### 1 2 3 4 | 3 4 1 2 | 2 1 4 3 | 4 3 2 1",
]


@pytest.mark.parametrize("text", ACCEPT_GRIDS)
def test_parser_accepts_grids_as_models_write_them(text):
    assert parse_answer(text, 4) == (G, None, "")


@pytest.mark.parametrize(
    ("text", "grid"),
    [
        ("####\n1 . 3 4\n3 4 1 2\n2 1 _ 3\n4 3 2 0", b("1.34 3412 21.3 432.")),
        ("####\n. . . .\n. . . .\n. . . .\n. . . .", bytes(16)),
    ],
)
def test_parser_reads_empty_cells(text, grid):
    assert parse_answer(text, 4).grid == grid


@pytest.mark.parametrize(
    ("text", "fills"),
    [
        ("#### [[1, 3, 4], [2, 1, 2]]", ((2, 4), (4, 2))),
        ("#### [1,3,4], [2,1,2]", ((2, 4), (4, 2))),
        ("#### (1, 3, 4) (2, 1, 2)", ((2, 4), (4, 2))),
        ("I will fill two cells: [[1, 3, 4], [2, 1, 2]]", ((2, 4), (4, 2))),
        ("####\n```json\n[[4, 4, 1]]\n```", ((15, 1),)),
        ("#### [[1, 3, 4], [1, 3, 4]]", ((2, 4),)),
        ("#### [[1; 3; 4]]", ((2, 4),)),
    ],
)
def test_parser_accepts_fill_lists_one_based(text, fills):
    assert parse_answer(text, 4) == (None, fills, "")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no grid or fill list found"),
        ("I am not sure what to do here.", "no grid or fill list found"),
        ("#### up, up, left", "no grid or fill list found"),
        ("####\n1 2 3\n3 4 1", "found 2 grid rows with 3, 3 cells, expected 4 rows of 4"),
        ("#### 1 2 3 4", "found 1 grid row with 4 cells"),
        ("####\n1 2 3 4 1\n3 4 1 2 1\n2 1 4 3 1\n4 3 2 1 1", "expected 4 rows of 4"),
        ("####\n1 2 3 5\n3 4 1 2\n2 1 4 3\n4 3 2 1", "digit 5 in row 1 is not in 1-4"),
        ("#### [[0, 1, 2]]", "rows and columns are numbered 1 to 4 (1-based)"),
        ("#### [[1, 5, 2]]", "rows and columns are numbered 1 to 4 (1-based)"),
        ("#### [[1, 1, 5]]", "digits are 1 to 4"),
        ("#### [[1, 1, 0]]", "digits are 1 to 4"),
        ("#### [[1, 1, 2], [1, 1, 3]]", "row 1, column 1 is filled twice with different digits"),
        ("#### [[1, 1, 2], [1, 2]]", "fill [1, 2] is not [row, column, digit]"),
        ("#### [[a, 1, 2]]", "fill [a, 1, 2] is not [row, column, digit]"),
        ("#### [[1, -1, 2]]", "is not [row, column, digit]"),
        ("#### [[1, 1, " + "9" * 5000 + "]]", "rows, columns and digits are 1 to 4"),
    ],
)
def test_parser_rejects_with_a_reason(text, reason):
    parsed = parse_answer(text, 4)
    assert parsed.grid is None and parsed.fills is None
    assert reason in parsed.reason
    assert "answer after a '####' line" in parsed.reason  # says what to do


def test_parser_round_trips_the_prompt_formats():
    for board, n in ((GRID4, 4), (WIKI, 9), (WIKI_SOLUTION, 9), (bytes(16), 4)):
        for boxes in (False, True):
            assert parse_answer("####\n" + format_grid(board, n, boxes=boxes), n).grid == board
    fills = ((2, 4), (4, 2), (15, 1))
    assert parse_answer("#### " + format_fills(fills, 4), 4).fills == fills
    assert format_fills(fills, 4) == "[[1, 3, 4], [2, 1, 2], [4, 4, 1]]"


# ---------------------------------------------------------------------------------- rewards


def make_env(mode="mas", **kwargs) -> SudokuEnv:
    env = mas_envs.make("mas/Sudoku-v0", mode=mode, **kwargs)
    env.reset(options={"task_id": 2_000_000_007})
    return env


def first_free(env: SudokuEnv) -> int:
    return env.puzzle.index(0)


def fill_text(env: SudokuEnv, cell: int, digit: int) -> str:
    n = env.size
    return f"#### [[{cell // n + 1}, {cell % n + 1}, {digit}]]"


def wrong_but_legal(env: SudokuEnv) -> tuple[int, int]:
    """A free cell and a digit that breaks no rule now but is not the solution's."""
    n = env.size
    for cell, v in enumerate(env.board):
        if v:
            continue
        for digit in range(1, n + 1):
            trial = bytearray(env.board)
            trial[cell] = digit
            if digit != env.solution[cell] and not conflict(bytes(trial), n):
                return cell, digit
    raise AssertionError("no wrong-but-legal move on this level")


def step_planner(env: SudokuEnv, text: str) -> dict:
    if env.agent_selection == "tool":
        env.step("#### [[1, 1, 1], [1, 1, 2]]")  # an unreadable proposal, to reach the planner
    assert env.agent_selection == "planner"
    env.step(text)
    return env.infos["planner"]


def test_solving_gives_shaping_plus_two_and_team_one():
    env = make_env(alpha=0.5)
    info = step_planner(env, env.oracle_action())
    assert info["success"] and info["parsed"] and info["valid"]
    assert info["local_reward"] == pytest.approx(1.0 + 2.0)  # empty board -> all correct
    assert info["team_reward"] == 1.0
    assert env.rewards["planner"] == pytest.approx(0.5 * 1.0 + 3.0)
    assert env.terminations["planner"] and env.success
    assert env.board == env.solution


def test_progress_shaping_rewards_correct_cells_and_punishes_wrong_ones():
    env = make_env()
    free = env.size**2 - env.clues
    cell = first_free(env)
    info = step_planner(env, fill_text(env, cell, env.solution[cell]))
    assert info["local_reward"] == pytest.approx(1 / free) and not info["success"]
    assert info["empty"] == free - 1 and info["valid"]
    assert env.board[cell] == env.solution[cell]
    wcell, digit = wrong_but_legal(env)
    info = step_planner(env, fill_text(env, wcell, digit))
    assert info["valid"] and info["local_reward"] == pytest.approx(-1 / free)
    assert env.board[wcell] == digit  # a legal move is made even when it is wrong
    # Correcting the wrong digit earns twice: it removes a wrong cell and adds a correct one.
    info = step_planner(env, fill_text(env, wcell, env.solution[wcell]))
    assert info["local_reward"] == pytest.approx(2 / free)


def test_a_valid_grid_that_ignores_the_clues_is_never_a_success():
    env = make_env()
    # Relabel the digits of the solution: still a perfectly valid Sudoku grid, wrong clues.
    other = env.solution.translate(bytes.maketrans(bytes([1, 2, 3, 4]), bytes([2, 1, 4, 3])))
    assert conflict(other, 4) == "" and 0 not in other
    before = env.board
    info = step_planner(env, "####\n" + format_grid(other, 4))
    assert not info["success"] and not info["valid"] and info["parsed"]
    assert info["local_reward"] == -0.5 and info["team_reward"] == 0.0
    assert "changes the given clue in row" in info["reason"]
    assert env.board == before and not env.terminations["planner"]


def test_erasing_a_clue_or_refilling_it_with_another_digit_is_rejected():
    env = make_env()
    clue = next(i for i, v in enumerate(env.puzzle) if v)
    grid = bytearray(env.solution)
    grid[clue] = 0
    info = step_planner(env, "####\n" + format_grid(bytes(grid), 4))
    assert info["local_reward"] == -0.5 and "erases the given clue" in info["reason"]
    other = env.puzzle[clue] % 4 + 1
    info = step_planner(env, fill_text(env, clue, other))
    assert info["local_reward"] == -0.5 and "changes the given clue" in info["reason"]


def test_restating_a_clue_is_harmless():
    env = make_env()
    clue = next(i for i, v in enumerate(env.puzzle) if v)
    info = step_planner(env, fill_text(env, clue, env.puzzle[clue]))
    assert info["valid"] and info["local_reward"] == 0.0 and env.board == env.puzzle


def test_a_conflicting_move_is_rejected_and_the_board_stays():
    env = make_env()
    geo_peers = geometry(4).peer_getters
    cell, digit = next(
        (i, d) for i in range(16) if not env.puzzle[i] for d in geo_peers[i](env.puzzle) if d
    )
    info = step_planner(env, fill_text(env, cell, digit))
    assert info["local_reward"] == -0.5 and not info["valid"] and info["parsed"]
    assert f"has the digit {digit} twice" in info["reason"] and env.board == env.puzzle
    assert info["empty"] == 16 - env.clues  # the rejected fill is not counted
    assert "turn 1: rejected: " in env.observe("tool")["prompt"]


def test_a_grid_with_dots_erases_earlier_fills():
    env = make_env()
    cell = first_free(env)
    step_planner(env, fill_text(env, cell, env.solution[cell]))
    info = step_planner(env, "####\n" + format_grid(env.puzzle, 4))
    free = 16 - env.clues
    assert info["valid"] and info["local_reward"] == pytest.approx(-1 / free)
    assert env.board == env.puzzle
    assert f"erased row {cell // 4 + 1} column {cell % 4 + 1}" in env.observe("tool")["prompt"]


def test_format_error_is_the_format_penalty_with_a_reason():
    env = make_env()
    info = step_planner(env, "I think the answer is obvious.")
    assert info["local_reward"] == -1.0 and not info["parsed"] and not info["valid"]
    assert info["empty"] == 16 - env.clues
    assert "no grid or fill list found" in info["reason"]
    assert "turn 1: not read: no grid or fill list found" in env.observe("tool")["prompt"]


def test_tool_is_scored_on_a_copy_and_the_planner_sees_its_proposal():
    env = make_env()
    cell = first_free(env)
    text = fill_text(env, cell, env.solution[cell])
    env.step(env.oracle_action("tool"))
    tool = env.infos["tool"]
    assert tool["local_reward"] == pytest.approx(3.0) and tool["team_reward"] == 0.0
    assert not tool["success"] and not env.terminations["tool"]
    assert env.board == env.puzzle  # the proposal changed nothing
    prompt = env.observe("planner")["prompt"]
    assert (
        "The tool agent's proposal (as a board):\n" + format_grid(env.solution, 4, boxes=True)
        in prompt
    )
    assert "Rule check of the proposal: keeps every clue" in prompt and "0 cells empty" in prompt
    # The tool's reward for a move equals what that move earns the planner on the real board.
    twin = make_env()
    twin.step(text)
    planner = step_planner(make_env(), text)
    assert twin.infos["tool"]["local_reward"] == planner["local_reward"]


def test_planner_sees_an_unreadable_or_rejected_proposal_explained():
    env = make_env()
    env.step("no idea")
    assert "The tool agent's answer could not be read: no grid" in env.observe("planner")["prompt"]
    env = make_env()
    env.step("####\n" + format_grid(bytes(16), 4))
    prompt = env.observe("planner")["prompt"]
    assert "Rule check of the proposal: rejected by the rules: erases the given clue" in prompt


def test_tool_sees_the_rule_check_of_its_previous_proposal():
    env = make_env(max_turns=5)
    assert "Your proposal" not in env.observe("tool")["prompt"]
    env.step("####\n" + format_grid(bytes(16), 4))
    env.step("nothing")
    prompt = env.observe("tool")["prompt"]
    assert "Your proposal in turn 1 was rejected by the rules: erases the given clue" in prompt
    env.step("no idea")
    env.step("nothing")
    assert "Your proposal in turn 2 could not be read: no grid" in env.observe("tool")["prompt"]
    env.step(fill_text(env, first_free(env), env.solution[first_free(env)]))
    env.step("nothing")
    free = 16 - env.clues
    prompt = env.observe("tool")["prompt"]
    assert f"Your proposal in turn 3 kept the rules ({free - 1} cells empty)." in prompt


def test_truncation_after_max_turns_without_success():
    env = make_env(max_turns=2)
    for _ in range(2):
        step_planner(env, "nothing useful")
    assert env.truncations["planner"] and not env.terminations["planner"] and not env.success


# ---------------------------------------------------------------------------------- prompts


def test_prompt_shows_board_clues_counts_history_and_one_based_format():
    env = make_env()
    prompt = env.observe("tool")["prompt"]
    free = 16 - env.clues
    assert "Given clues (these never change):\n" + format_grid(env.puzzle, 4, boxes=True) in prompt
    assert f"Current board ({free} of 16 cells empty):" in prompt
    assert "Moves so far:\n(none yet)" in prompt and "Turn 1 of 3." in prompt
    assert "numbered from 1 (1-based)" in prompt and 'Answer after a line "####"' in prompt
    cell = first_free(env)
    step_planner(env, fill_text(env, cell, env.solution[cell]))
    prompt = env.observe("tool")["prompt"]
    assert f"Current board ({free - 1} of 16 cells empty):" in prompt
    assert f"turn 1: filled [[{cell // 4 + 1}, {cell % 4 + 1}, {env.solution[cell]}]]" in prompt
    assert "Turn 2 of 3." in prompt


def test_single_mode_has_one_planner_and_no_proposal():
    env = make_env(mode="single")
    assert env.possible_agents == ["planner"]
    obs = env.observe("planner")
    assert "proposal" not in obs["prompt"] and "tool agent" not in obs["system"]
    env.step(env.oracle_action())
    assert env.success and env.rewards["planner"] == pytest.approx(4.0)


def test_nine_by_nine_plays_and_prompts():
    env = mas_envs.make("mas/Sudoku-v0", size=9, split="test")
    result = play_episode(env, oracle_policy, seed=1)
    assert result.success and result.turns == 1 and result.format_errors == 0
    env.reset(seed=2)
    prompt = env.observe("tool")["prompt"]
    assert "Sudoku 9x9" in prompt and "3x3 box" in prompt and "------+-------+------" in prompt
    assert f"({81 - 30} of 81 cells empty)" in prompt
    rand = [play_episode(env, random_policy(s), seed=s) for s in range(3)]
    assert not any(r.success for r in rand) and all(r.format_errors == 0 for r in rand)


def test_nine_by_nine_passes_the_pettingzoo_api_test():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api_test(mas_envs.make("mas/Sudoku-v0", size=9, clues=40), num_cycles=10)
    unexpected = [str(w.message) for w in caught if not str(w.message).startswith(EXPECTED)]
    assert not unexpected


# ---------------------------------------------------------------------------------- numeric view


def test_numeric_actions_are_one_based_fills():
    env = make_env()
    assert env.numeric_action_count() == 64
    assert env.numeric_action_text("planner", 0) == "#### [[1, 1, 1]]"
    assert env.numeric_action_text("planner", 63) == "#### [[4, 4, 4]]"
    cell = first_free(env)
    action = cell * 4 + env.solution[cell] - 1
    step_planner(env, env.numeric_action_text("planner", action))
    assert env.board[cell] == env.solution[cell]
    with pytest.raises(ValueError, match=r"action must be in 0\.\.63"):
        env.numeric_action_text("planner", 64)


def test_numeric_observation_planes():
    env = make_env()
    obs = env.numeric_observation("tool")
    assert obs.shape == env.numeric_observation_shape() == (9, 4, 4) and obs.dtype == np.float32
    board = np.frombuffer(env.board, np.uint8).reshape(4, 4)
    for v in range(1, 5):
        assert (obs[v - 1] == (board == v)).all()
    assert (obs[4] == (board > 0)).all()
    assert not obs[5:].any()
    env.step(env.oracle_action("tool"))
    planner = env.numeric_observation("planner")
    solution = np.frombuffer(env.solution, np.uint8).reshape(4, 4)
    for v in range(1, 5):
        assert (planner[4 + v] == (solution == v)).all()
    assert planner.min() >= 0.0 and planner.max() <= 1.0
    assert not env.numeric_observation("tool")[5:].any()  # only the planner sees proposals


# ---------------------------------------------------------------------------------- render


def test_rgb_render_draws_clues_and_fills_differently():
    env = make_env(render_mode="rgb_array")
    img = env.render()
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    blue = np.array([30, 90, 200], np.uint8)
    assert not (img == blue).all(axis=2).any()  # only clues so far
    cell = first_free(env)
    step_planner(env, fill_text(env, cell, env.solution[cell]))
    assert (env.render() == blue).all(axis=2).any()
    text_env = make_env(render_mode="ansi")
    assert format_grid(text_env.puzzle, 4, boxes=True) in text_env.render()


@pytest.mark.parametrize(
    "text",
    [
        "[" + "[1]    " * 40 + "x",  # once made the fill-list regex backtrack exponentially
        "[" + "[1, 2, 3]  ,  " * 2000 + "x",
        "1 " * 300_000,
        "[" * 100_000 + "1",
        "(1,2,3" * 50_000,
        "#### " + "1 2 3 4\n" * 100_000,
        "Row 1: " * 50_000,
        "```" + "\n1" * 100_000,
        "####\n\ud800\x00\u202e 1 2 3 4",
    ],
)
def test_parser_rejects_hostile_text_quickly(text):
    parsed = parse_answer(text, 4)
    assert parsed.grid is None and parsed.fills is None and parsed.reason


@settings(max_examples=200, deadline=None)
@given(
    triples=st.lists(st.tuples(*[st.integers(0, 10)] * 3), min_size=1, max_size=12),
    sep=st.sampled_from([", ", ",", " , ", ",\n"]),
    outer=st.booleans(),
    paren=st.booleans(),
    n=st.sampled_from([4, 9]),
)
def test_fill_lists_parse_exactly_as_specified(triples, sep, outer, paren, n):
    """Any spelling of a fill list gives the same fills, or the same first error, as the spec."""
    o, c = "()" if paren else "[]"
    body = sep.join(f"{o}{r}{sep}{col}{sep}{v}{c}" for r, col, v in triples)
    parsed = parse_answer("#### " + (f"[{body}]" if outer else body), n)
    expected: dict[int, int] = {}
    for r, col, v in triples:
        if not (1 <= r <= n and 1 <= col <= n):
            assert "(1-based)" in parsed.reason
            return
        if not 1 <= v <= n:
            assert f"digits are 1 to {n}" in parsed.reason
            return
        if expected.setdefault((r - 1) * n + col - 1, v) != v:
            assert "filled twice with different digits" in parsed.reason
            return
    assert parsed == (None, tuple(expected.items()), "")


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    size=st.sampled_from([4, 9]),
    actions=st.lists(
        st.one_of(st.integers(0, 728), st.text(max_size=30), st.just("oracle")), max_size=12
    ),
)
def test_board_keeps_the_clues_and_the_rules_whatever_is_answered(seed, size, actions):
    """Invariants of the real board under any answers; shaping telescopes to phi(end)."""
    env = mas_envs.make("mas/Sudoku-v0", size=size, mode="single", max_turns=12)
    env.reset(seed=seed)
    free = size * size - env.clues
    shaping = 0.0
    for action in actions:
        if env.terminations["planner"] or env.truncations["planner"]:
            break
        if action == "oracle":
            text = env.oracle_action()
        elif isinstance(action, int):
            text = env.numeric_action_text("planner", action % size**3)
        else:
            text = action
        env.step(text)
        info = env.infos["planner"]
        if info["parsed"] and info["valid"]:
            shaping += info["local_reward"] - 2.0 * info["success"]
        board = env.board
        assert all(board[i] == v for i, v in enumerate(env.puzzle) if v)
        assert conflict(board, size) == ""
        assert info["success"] == (board == env.solution)
    correct = sum(
        1 for i, v in enumerate(env.board) if v and not env.puzzle[i] and v == env.solution[i]
    )
    wrong = sum(1 for i, v in enumerate(env.board) if v and not env.puzzle[i]) - correct
    assert shaping == pytest.approx((correct - wrong) / free)
