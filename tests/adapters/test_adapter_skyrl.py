"""skyrl-gym: every env id registered as a `BaseTextEnv`, played as SkyRL's generator plays it.

The loop below is the one SkyRL's generator runs over a skyrl-gym env (make from the dataset
row, `init` on the row's prompt, then `step` on each completion, appending the returned
observations to one chat, until `done`); the env is the real package's registry entry.
Marked `adapters`.
"""

from __future__ import annotations

import pytest

pytest.importorskip("skyrl_gym", reason="needs the extra: pip install -e '.[skyrl]'")

import skyrl_gym

import mas_envs
from mas_envs.adapters.skyrl import MasTextEnv, dataset_rows
from mas_envs.policies import play_episode

pytestmark = pytest.mark.adapters


def _generate(row: dict, policy) -> tuple[list[dict], float, MasTextEnv]:
    """SkyRL's agent loop: returns the chat, the summed reward and the env."""
    env = skyrl_gym.make(row["env_class"], env_config={}, extras=row)
    chat, _ = env.init(row["prompt"])
    total, done = 0.0, False
    while not done:
        action = policy(env, chat)
        out = env.step(action)
        chat = [*chat, {"role": "assistant", "content": action}, *out["observations"]]
        total += out["reward"]
        done = out["done"]
    env.close()
    return chat, total, env


def _oracle(env, chat):
    inner = env.play.env
    return inner.oracle_action(inner.agent_selection)


def test_every_id_is_registered_as_a_base_text_env():
    from skyrl_gym.envs.base_text_env import BaseTextEnv

    for env_id in mas_envs.list_envs():
        env = skyrl_gym.make(env_id, extras={"extra_info": {"split": "test", "seed": 1}})
        assert isinstance(env, BaseTextEnv) and env.spec.id == env_id
        chat, meta = env.init(None)
        assert [m["role"] for m in chat] == ["system", "user"] and meta["agent"]


def test_generator_loop_plays_the_team_and_rewards_every_turn():
    (row,) = dataset_rows("mas/PlanPath-v0", n=1, split="test", env_kwargs={"rows": 5, "cols": 5})
    assert row["env_class"] == "mas/PlanPath-v0" and row["prompt"][0]["role"] == "system"
    chat, total, env = _generate(row, _oracle)
    plain = play_episode(
        mas_envs.make("mas/PlanPath-v0", rows=5, cols=5, split="test"),
        mas_envs.policies.oracle_policy,
        options={"task_id": row["extra_info"]["task_id"]},
    )
    assert total == pytest.approx(sum(plain.returns.values()))
    assert chat[:2] == row["prompt"]  # init serves the row's episode
    assert chat[2]["role"] == "assistant" and chat[3]["role"] == "user"
    assert "You are the planner" in chat[3]["content"]  # a new role brings its system text
    metrics = env.get_metrics()
    assert metrics["success"] == 1.0 and metrics["format_errors"] == 0.0
    agg = MasTextEnv.aggregate_metrics([metrics, {**metrics, "success": 0.0}])
    assert agg["success"] == 0.5


def test_one_role_with_a_scripted_teammate_and_the_single_mode():
    rows = dataset_rows("mas/Sokoban-v0", n=2, plays=["planner"], others="oracle")
    for row in rows:
        chat, total, env = _generate(row, lambda env, chat: "no idea")
        assert env.play.returns["tool"] > 0  # the scripted tool played every turn
        assert env.get_metrics()["format_errors"] == env.play.env.max_turns
        assert total == pytest.approx(env.play.returns["planner"]) and total < 0
        assert all("You are the tool" not in m["content"] for m in chat)
    (row,) = dataset_rows("mas/Sudoku-v0", n=1, mode="single", split="test")
    _, _, env = _generate(row, _oracle)
    assert env.get_metrics()["success"] == 1.0 and env.play.env.possible_agents == ["planner"]
    with pytest.raises(ValueError, match="unknown extra_info keys"):
        skyrl_gym.make("mas/Sudoku-v0", extras={"extra_info": {"task": 3}})


def test_the_docs_parquet_dataset_round_trips_into_episodes(tmp_path):
    """Issue 32: `pd.DataFrame(dataset_rows(...)).to_parquet(...)` failed with "Cannot write
    struct type 'env_kwargs' with no child field"; rows read back from Parquet make their env."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")

    path = tmp_path / "train.parquet"
    pd.DataFrame(dataset_rows("mas/PlanPath-v0", n=3, split="test")).to_parquet(path)
    sized = dataset_rows("mas/PlanPath-v0", n=2, split="test", env_kwargs={"rows": 5, "cols": 5})
    pd.DataFrame(sized).to_parquet(tmp_path / "sized.parquet")
    one_role = dataset_rows("mas/PlanPath-v0", n=2, split="test", plays=["planner"])
    pd.DataFrame(one_role).to_parquet(tmp_path / "planner.parquet")
    for name, rows in (("train", 3), ("sized", 2), ("planner", 2)):
        frame = pd.read_parquet(tmp_path / f"{name}.parquet")
        assert len(frame) == rows
        for record in frame.to_dict("records"):
            _chat, total, env = _generate(record, _oracle)
            assert env.play.success and total > 0
            if name == "sized":
                assert (env.play.env.rows, env.play.env.cols) == (5, 5)
            if name == "planner":
                assert list(env.play.plays) == ["planner"]


def test_env_kwargs_as_json_text_or_dict_make_the_same_env():
    text = skyrl_gym.make(
        "mas/PlanPath-v0", extras={"extra_info": {"env_kwargs": '{"rows": 4, "cols": 6}'}}
    )
    mapping = skyrl_gym.make(
        "mas/PlanPath-v0", extras={"extra_info": {"env_kwargs": {"rows": 4, "cols": 6}}}
    )
    assert (text.play.env.rows, text.play.env.cols) == (mapping.play.env.rows, 6)
    with pytest.raises(ValueError, match="JSON object"):
        skyrl_gym.make("mas/PlanPath-v0", extras={"extra_info": {"env_kwargs": "[1]"}})
