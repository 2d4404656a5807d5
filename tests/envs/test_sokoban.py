"""Sokoban: rules from small tables, solver optimality, generation, parsing, rewards, prompts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mas_envs
from mas_envs.moves import parse_moves
from mas_envs.policies import oracle_policy, play_episode
from mas_envs.sokoban import SokobanEnv
from mas_envs.sokoban.board import Rewards, parse_level, play, player_region
from mas_envs.sokoban.generate import generate_level
from mas_envs.sokoban.prompts import answer_text, parse_answer
from mas_envs.sokoban.render import TILE, render_rgb
from mas_envs.sokoban.solver import is_deadlocked, solve

R = Rewards()
NO_SHAPING = Rewards(shaping_scale=0.0)

CORRIDOR = """
#######
#@_$_.#
#######
"""
AROUND = """
######
#____#
#_$@_#
#_.__#
######
"""
CORNER = """
######
#.___#
#____#
#_$__#
#___@#
######
"""
TWO_BOXES = """
#######
#@$_.##
#_$_.##
#######
"""
BLOCKED = """
########
#@$$_..#
########
"""


def _level(text: str):
    return parse_level(text)


# ------------------------------------------------------------------------------------ rules

# (level, moves, picture afterwards, reward without shaping, failed moves, solved)
RULES = [
    # walking on floor costs a move each
    (CORRIDOR, "R", "#######\n#_@$_.#\n#######", -0.01, 0, False),
    # walking into a wall: player stays, -0.05
    (CORRIDOR, "L", "#######\n#@_$_.#\n#######", -0.05, 1, False),
    (CORRIDOR, "U", "#######\n#@_$_.#\n#######", -0.05, 1, False),
    # pushing a box
    (CORRIDOR, "RR", "#######\n#__@$.#\n#######", -0.02, 0, False),
    # pushing it onto the goal solves: +1 and +10
    (CORRIDOR, "RRR", "#######\n#___@*#\n#######", -0.03 + 1 + 10, 0, True),
    # moves after the solving one are ignored
    (CORRIDOR, "RRRLLL", "#######\n#___@*#\n#######", -0.03 + 1 + 10, 0, True),
    # pushing a box into a wall fails, the player stays
    ("#####\n#@$_#\n#.__#\n#####", "RR", "#####\n#_@$#\n#.__#\n#####", -0.06, 1, False),
    # pushing a box into another box fails, and the rest of the plan goes on
    (BLOCKED, "RL", "########\n#@$$_..#\n########", -0.10, 2, False),
    # pushing a box off a goal: -0.5
    ("#######\n#@*_$.#\n#######", "R", "#######\n#_+$$.#\n#######", -0.51, 0, False),
    # a box onto one goal of two: +1, not solved
    ("#######\n#@$.$.#\n#######", "R", "#######\n#_@*$.#\n#######", 0.99, 0, False),
]


@pytest.mark.parametrize(("level", "moves", "after", "reward", "failed", "solved"), RULES)
def test_rules_table(level, moves, after, reward, failed, solved):
    board, player, boxes = _level(level)
    res = play(board, player, boxes, tuple(moves), NO_SHAPING)
    assert board.render(res.player, res.boxes) == after
    assert res.reward == pytest.approx(reward)
    assert len(res.invalid) == failed
    assert res.solved is solved


def test_shaping_is_potential_based():
    board, player, boxes = _level(CORRIDOR)
    # Two pushes bring the box from distance 2 to 0: +0.1 per unit of distance.
    res = play(board, player, boxes, tuple("RRR"), R)
    assert res.reward == pytest.approx(-0.03 + 1 + 10 + 0.1 * 2)
    # Walking away and back again earns no shaping at gamma = 1.
    res = play(board, player, boxes, tuple("RL"), R)
    assert res.reward == pytest.approx(-0.02)
    # With gamma < 1 each move adds (1 - gamma) * scale * D, D the distance sum (here 2).
    g = Rewards(shaping_scale=0.1, shaping_gamma=0.9)
    res = play(board, player, boxes, ("R",), g)
    assert res.reward == pytest.approx(-0.01 + 0.1 * (2 - 0.9 * 2))


def test_failed_moves_are_reported_by_position():
    board, player, boxes = _level(CORRIDOR)
    res = play(board, player, boxes, tuple("LURU"), NO_SHAPING)
    assert res.invalid == ((0, "L"), (1, "U"), (3, "U"))
    assert res.made == ("R",)


def test_parse_level_and_board_validation():
    board, player, boxes = _level(AROUND)
    assert (board.width, board.height) == (6, 5)
    assert divmod(player, 6) == (2, 3)
    assert [divmod(b, 6) for b in boxes] == [(2, 2)]
    assert [divmod(g, 6) for g in board.goals] == [(3, 2)]
    assert board.render(player, boxes) == AROUND.strip()
    with pytest.raises(ValueError, match="one player"):
        parse_level("#####\n#_$.#\n#####")
    with pytest.raises(ValueError, match="unknown symbol 'X'"):
        parse_level("#####\n#@X.#\n#####")
    with pytest.raises(ValueError, match="equal length"):
        parse_level("#####\n#@$.#\n####")
    with pytest.raises(ValueError, match="outer ring"):
        parse_level("#####\n_@$.#\n#####")


def test_dead_cells_are_non_goal_corners_and_walls_along_them():
    board, _, boxes = _level(CORNER)
    dead = {divmod(c, board.width) for c in board.dead}
    # The goal sits in the top-left corner: the other corners, and the bottom row and right
    # column (a box there can only slide along a wall that holds no goal), are dead.
    assert {(1, 4), (4, 1), (4, 4)} <= dead
    assert {(4, 2), (4, 3), (2, 4), (3, 4)} <= dead
    assert (1, 1) not in dead and (1, 2) not in dead and (2, 2) not in dead
    assert not is_deadlocked(board, boxes)
    assert is_deadlocked(board, frozenset({4 * board.width + 1}))


# ----------------------------------------------------------------------------------- solver

# Optimal move counts, checked by hand (see the comments for the reasoning).
OPTIMAL = [
    (CORRIDOR, 3),  # R, R, R: walk one, push two
    (AROUND, 3),  # U, L, D: reach the cell above the box, push it down
    (CORNER, 7),  # push up twice then left, or left then up twice: 7 either way
    (TWO_BOXES, 7),  # R, R (top box home), L, L, D, R, R (bottom box home)
]


@pytest.mark.parametrize(("level", "length"), OPTIMAL)
def test_solver_is_optimal_on_known_levels(level, length):
    board, player, boxes = _level(level)
    moves = solve(board, player, boxes)
    assert moves is not None and len(moves) == length
    res = play(board, player, boxes, moves, R)
    assert res.solved and not res.invalid


def _bfs_length(board, player, boxes) -> int | None:
    """Fewest moves by plain breadth-first search (no heuristic, no pruning): the reference."""
    steps = [board.steps[m] for m in "UDLR"]
    seen = {(player, boxes)}
    frontier = [(player, boxes)]
    depth = 0
    while frontier:
        nxt = []
        for p, bs in frontier:
            if bs <= board.goals:
                return depth
            for d in steps:
                q = p + d
                if q in board.walls:
                    continue
                nbs = bs
                if q in bs:
                    if q + d in board.walls or q + d in bs:
                        continue
                    nbs = (bs - {q}) | {q + d}
                if (q, nbs) not in seen:
                    seen.add((q, nbs))
                    nxt.append((q, nbs))
        frontier, depth = nxt, depth + 1
    return None


@pytest.mark.parametrize(("width", "height", "n_boxes"), [(6, 6, 1), (7, 6, 2)])
def test_solver_matches_plain_bfs_on_generated_levels(width, height, n_boxes):
    for seed in range(200):
        board, player, boxes = generate_level(np.random.default_rng(seed), width, height, n_boxes)
        moves = solve(board, player, boxes)
        assert moves is not None and len(moves) == _bfs_length(board, player, boxes)


def test_solver_reports_unsolvable_and_solved():
    board, player, boxes = _level(BLOCKED)
    assert solve(board, player, boxes) is None
    board, player, boxes = _level("#####\n#@*_#\n#####")
    assert solve(board, player, boxes) == ()


def test_solver_gives_up_at_the_state_limit():
    board, player, boxes = _level(CORNER)
    assert solve(board, player, boxes, max_states=5) is None


# ------------------------------------------------------------------------------- generation


@pytest.mark.parametrize(
    ("width", "height", "n_boxes", "seeds"), [(6, 6, 1, 300), (7, 5, 1, 60), (8, 8, 2, 40)]
)
def test_generated_levels_are_valid_solvable_and_unsolved(width, height, n_boxes, seeds):
    lengths = []
    for seed in range(seeds):
        board, player, boxes = generate_level(np.random.default_rng(seed), width, height, n_boxes)
        assert (board.width, board.height) == (width, height)
        assert len(boxes) == len(board.goals) == n_boxes
        assert player not in boxes and player not in board.walls
        assert not boxes & board.walls
        assert not boxes <= board.goals, "a level is never solved at the start"
        moves = solve(board, player, boxes)
        assert moves, f"seed {seed} gave an unsolvable level"
        lengths.append(len(moves))
    # Reverse play makes real puzzles, not only one-push levels.
    assert np.median(lengths) >= 3


def test_generation_is_deterministic_per_level_id_and_varies():
    a = generate_level(np.random.default_rng(42))
    b = generate_level(np.random.default_rng(42))
    assert a == b
    pictures = {
        lvl.board.render(lvl.player, lvl.boxes)
        for lvl in (generate_level(np.random.default_rng(s)) for s in range(50))
    }
    assert len(pictures) > 40


def test_generation_rejects_impossible_configs():
    with pytest.raises(ValueError, match="fewer boxes or a larger room"):
        generate_level(np.random.default_rng(0), 5, 5, 9)


# ---------------------------------------------------------------------------------- parsing

ACCEPT = [
    ("#### U, R, R", ("U", "R", "R")),
    ("#### U R D L", ("U", "R", "D", "L")),
    ("#### URRD", ("U", "R", "R", "D")),
    ("I push the box right.\n####\nR, R", ("R", "R")),
    ("#### u, r", ("U", "R")),
    ("#### up, right, down", ("U", "R", "D")),
    ('**Actions List**: ["U", "R", "D"]', ("U", "R", "D")),
    ("Plan:\n```\nleft left up\n```", ("L", "L", "U")),
    ("Moves: LURD", ("L", "U", "R", "D")),
    ("first #### U\nthen\n#### D, D.", ("D", "D")),
]
REJECT = [
    ("", "no moves"),
    ("I am not sure what to do here.", "unexpected"),
    ("#### U, X, R", "unexpected 'X'"),
    ("#### north", "unexpected 'north'"),
    ("#### " + "U, " * 200, "more than 144 moves"),
]


@pytest.mark.parametrize(("text", "moves"), ACCEPT)
def test_parser_accepts_what_llms_write(text, moves):
    assert parse_answer(text, 144) == (moves, "")


@pytest.mark.parametrize(("text", "reason"), REJECT)
def test_parser_rejects_with_a_reason(text, reason):
    moves, why = parse_answer(text, 144)
    assert moves == () and reason in why


_ANSWERISH = st.text(alphabet="UDLRudlr ,.\n\t#`[]\"'x", max_size=20)


@settings(max_examples=400, deadline=None)
@given(_ANSWERISH, _ANSWERISH, st.booleans(), st.integers(1, 8))
def test_fast_path_agrees_with_the_general_parser(head, tail, marked, limit):
    text = f"{head}####{tail}" if marked else head + tail
    assert parse_answer(text, limit) == parse_moves(text, limit)


def test_oracle_answer_is_the_prompted_format():
    assert answer_text(("U", "R")) == "#### U, R"
    assert parse_answer(answer_text(("U", "R")), 10).moves == ("U", "R")


# -------------------------------------------------------------------------------------- env


def _env(level: str, **kwargs) -> SokobanEnv:
    env = SokobanEnv(**kwargs)
    env.reset(options={"task_id": level})
    return env


def test_tool_plan_is_simulated_and_planner_moves_are_real():
    env = _env(CORRIDOR, width=7, height=6)
    env.step("#### R, R, R")  # tool: would solve
    tool = env.infos["tool"]
    assert env.rewards["tool"] == pytest.approx(-0.03 + 11 + 0.2)
    assert tool["team_reward"] == 0.0 and not tool["success"]
    assert env.board.render(env.player, env.boxes) == CORRIDOR.strip(), (
        "the tool's plan must not move anything"
    )
    prompt = env.observe("planner")["prompt"]
    assert "The tool agent's proposal: R, R, R (3 moves)" in prompt
    env.step("#### R")  # planner: one real move
    assert env.player == 1 * 7 + 2
    assert env.rewards["planner"] == pytest.approx(-0.01)
    assert env.turn == 1 and env.agents
    env.step("#### R")
    env.step("I'll finish it.\n#### R, R")
    info = env.infos["planner"]
    assert info["success"] and info["team_reward"] == 1.0
    assert env.rewards["planner"] == pytest.approx(1.0 + (-0.02 + 11 + 0.2))
    assert all(env.terminations.values())


def test_alpha_scales_the_team_reward():
    env = _env(CORRIDOR, width=7, height=6, mode="single", alpha=0.5)
    env.step("#### R, R, R")
    assert env.rewards["planner"] == pytest.approx(0.5 + (-0.03 + 11 + 0.2))


def test_format_error_penalty_and_feedback():
    env = _env(CORRIDOR, width=7, height=6)
    env.step("I think the box should go somewhere")
    assert env.rewards["tool"] == -1.0
    assert not env.infos["tool"]["parsed"] and env.infos["tool"]["reason"]
    assert (
        "The tool agent's proposal: none (its answer did not parse:"
        in env.observe("planner")["prompt"]
    )
    env.step("#### X")
    assert env.rewards["planner"] == -1.0
    assert (
        "The planner's last answer did not parse, nothing moved:" in env.observe("tool")["prompt"]
    )
    assert "Your last answer did not parse, nothing moved:" in env.observe("planner")["prompt"]


def test_prompt_shows_live_state_history_and_failures():
    env = _env(CORRIDOR, width=7, height=6, mode="single")
    first = env.observe("planner")["prompt"]
    assert "#@_$_.#" in first and "boxes on goals: 0/1" in first
    assert "Moves made so far (0): (none)" in first and "#### U, R, R, D" in first
    env.step("#### R, U, R")
    prompt = env.observe("planner")["prompt"]
    assert "#__@$.#" in prompt and "you are at row 1, column 3" in prompt
    assert "Moves made so far (2): R, R" in prompt
    assert "Failed moves of your last answer (you stayed put): U (move 2)" in prompt
    assert "turn 2 of 3" in prompt


def test_stuck_box_is_flagged():
    env = _env("######\n#@_._#\n#_$__#\n#____#\n######", mode="single")
    env.step("#### R, D")  # the box lands on the bottom row, which has no goal
    assert env.infos["planner"]["stuck"]
    assert "the puzzle cannot be solved any more" in env.observe("planner")["prompt"]
    assert env.solution() is None


def test_hand_made_level_that_starts_stuck_says_so():
    env = _env("######\n#@_._#\n#____#\n#_$__#\n######", mode="single")
    assert "the puzzle cannot be solved any more" in env.observe("planner")["prompt"]


def test_oracle_is_optimal_and_solves_in_one_turn():
    env = mas_envs.make("mas/Sokoban-v0", mode="single", split="test")
    for seed in range(10):
        env.reset(seed=seed)
        optimal = env.solution()
        assert optimal
        result = play_episode(env, oracle_policy, seed=seed)
        assert result.success and result.turns == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"width": 4}, "width must be an int from 5 to 16"),
        ({"height": 17}, "height must be an int from 5 to 16"),
        ({"width": "6"}, "width must be an int"),
        ({"boxes": 0}, "boxes must be an int from 1 to 4 for a 6x6 room"),
        ({"boxes": 5}, "boxes must be an int from 1 to 4"),
        ({"shaping_gamma": 0.0}, "shaping_gamma must be in"),
        ({"shaping_scale": -1.0}, "shaping_scale must be a finite number >= 0"),
        ({"mode": "duo"}, "unknown mode"),
    ],
)
def test_config_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SokobanEnv(**kwargs)


def test_level_ids_of_numpy_type_give_the_same_level():
    a, b = SokobanEnv(), SokobanEnv()
    a.reset(options={"task_id": 12345})
    b.reset(options={"task_id": np.int64(12345)})
    assert a.observe("tool") == b.observe("tool")


def test_bad_task_ids_are_refused():
    env = SokobanEnv()
    for bad in (-1, 1.5, True, b"x"):
        with pytest.raises(ValueError, match="a level id"):
            env.reset(options={"task_id": bad})
    with pytest.raises(ValueError, match="does not fit"):
        env.reset(options={"task_id": "#" * 8 + "\n#@_$_.##\n" + "#" * 8})
    with pytest.raises(ValueError, match="solved already"):
        env.reset(options={"task_id": "#####\n#@*_#\n#####"})


def test_bigger_config_plays():
    env = mas_envs.make("mas/Sokoban-v0", width=8, height=7, boxes=2, mode="single")
    result = play_episode(env, oracle_policy, seed=5)
    assert result.success
    assert env.numeric_observation("planner").shape == (8, 7, 8)


# ------------------------------------------------------------------------- numeric, render


def test_numeric_view():
    env = _env(CORRIDOR, width=7, height=6)
    assert env.numeric_action_count() == 4
    assert [env.numeric_action_text("tool", a) for a in range(4)] == [
        "#### U",
        "#### D",
        "#### L",
        "#### R",
    ]
    obs = env.numeric_observation("tool")
    assert obs.shape == env.numeric_observation_shape() == (8, 6, 7)
    assert obs.dtype == np.float32
    assert obs[3, 1, 1] == 1 and obs[2, 1, 3] == 1 and obs[1, 1, 5] == 1
    assert obs[0, 0].all() and obs[0, 3:].all(), "rows below a smaller level are wall"
    assert not obs[4:].any()
    env.step(env.numeric_action_text("tool", 3))
    planner = env.numeric_observation("planner")
    assert planner[7].all() and not planner[4:7].any(), "the tool's first move R, one-hot"
    with pytest.raises(ValueError, match="0-3"):
        env.numeric_action_text("tool", 4)


def test_rgb_render_draws_each_tile_distinctly():
    # Row 1 holds cells 8-15: wall, player, box, box on goal, goal, floor, goal, wall.
    board, player, boxes = _level("########\n#@$*._.#\n########")
    img = render_rgb(board, player, boxes)
    assert img.shape == (3 * TILE, 8 * TILE, 3) and img.dtype == np.uint8

    def tile(image: np.ndarray, cell: int) -> bytes:
        r, c = divmod(cell, board.width)
        return image[r * TILE : (r + 1) * TILE, c * TILE : (c + 1) * TILE].tobytes()

    kinds = {
        "wall": tile(img, 8),
        "player": tile(img, 9),
        "box": tile(img, 10),
        "box on goal": tile(img, 11),
        "goal": tile(img, 12),
        "floor": tile(img, 13),
        "player on goal": tile(render_rgb(board, 12, boxes), 12),
    }
    assert len(set(kinds.values())) == len(kinds), "every kind of tile looks different"
    assert tile(img, 14) == kinds["goal"] and tile(img, 0) == kinds["wall"]
    env = mas_envs.make("mas/Sokoban-v0", render_mode="rgb_array")
    env.reset(seed=0)
    assert env.render().shape == (6 * TILE, 6 * TILE, 3)


def test_player_region_is_one_puzzle_however_far_the_player_walked():
    # A level's identity across splits uses the player's region, not its cell.
    left = parse_level("#######\n#@_$_.#\n#_____#\n#######")
    walked = parse_level("#######\n#__$_.#\n#____@#\n#######")  # around the box: same region
    walled = parse_level("#######\n#_#$@.#\n#_#####\n#######")  # behind the box: another region
    region = player_region(left.board, left.player, left.boxes)
    assert region == 8  # row 1, column 1: the smallest reachable cell
    assert player_region(walked.board, walked.player, walked.boxes) == region
    assert player_region(walled.board, walled.player, walled.boxes) == 11  # only (1, 4)


@pytest.mark.parametrize("mode", ["mas", "single"])
def test_cached_prompt_equals_the_rebuilt_one(mode):
    # The env builds its prompt from cached pieces (per turn, per state of the level) and a moves
    # line it appends to; prompts.build_prompt rebuilds it from the whole state. They must agree
    # after every step, through failed moves, unparsed answers, stuck boxes, clones and resets.
    from mas_envs.sokoban import prompts

    env = SokobanEnv(width=6, height=6, boxes=2, mode=mode, max_turns=8)
    rng = np.random.default_rng(5)
    texts = ["#### U", "#### L", "#### D, D, R", "no moves", "#### R, R, R, R, U, U", "#### UL"]
    saw = {"note": False, "stuck": False, "made": False}
    for seed in range(16):
        env.reset(seed=seed)
        while env.agents:
            board = env.board
            assert board is not None
            row, col = divmod(env.player, board.width)
            for agent in env.agents:
                expected = prompts.build_prompt(
                    agent,
                    board.render(env.player, env.boxes),
                    min(env.turn + 1, env.max_turns),
                    env.max_turns,
                    len(env.boxes & board.goals),
                    len(env.boxes),
                    row,
                    col,
                    env.made,
                    env.note[agent == "tool"],
                    not board.dead.isdisjoint(env.boxes),
                    env.proposal if agent == "planner" and mode == "mas" else None,
                )
                assert env.observe(agent)["prompt"] == expected
                saw["note"] |= bool(env.note[0])
                saw["stuck"] |= "Warning: a box is stuck" in expected
                saw["made"] |= len(env.made) > 1
            if env.terminations[env.agent_selection] or env.truncations[env.agent_selection]:
                break
            text = texts[int(rng.integers(len(texts)))]
            if rng.random() < 0.3:
                text = env.random_action(rng)
            if rng.random() < 0.3:
                env = env.clone()  # type: ignore[assignment]
            env.step(text)
    assert all(saw.values()), saw
