"""RolePlay (roles mapped onto one policy) and the string / chat-message observation views."""

from __future__ import annotations

import gymnasium
import pytest

import mas_envs
from mas_envs.adapters import RolePlay, scripted_policy
from mas_envs.chat import ChatObservation, ChatView, as_messages, as_text, convert
from mas_envs.policies import oracle_policy, play_episode, random_policy


def _play(play: RolePlay, policy, seed: int) -> list[str]:
    turn, seen = play.reset(seed=seed), []
    while turn is not None:
        seen.append(turn.agent)
        assert turn.observation == play.env.observe(turn.agent)
        turn = play.step(policy(play.env, turn.agent)).next
    return seen


@pytest.mark.parametrize("env_id", ["mas/PlanPath-v0", "mas/Sokoban-v0", "mas/Sudoku-v0"])
def test_every_role_played_by_the_policy_is_the_plain_episode(env_id):
    play = RolePlay(mas_envs.make(env_id))
    seen = _play(play, random_policy(1), seed=5)
    plain = play_episode(mas_envs.make(env_id), random_policy(1), seed=5)
    assert set(seen) == {"tool", "planner"} and seen[0] == "tool"
    assert play.success == plain.success and play.returns == pytest.approx(plain.returns)


def test_one_role_trained_against_a_scripted_teammate():
    play = RolePlay(mas_envs.make("mas/PlanPath-v0"), plays=["planner"], others=oracle_policy)
    turn = play.reset(seed=2)
    assert turn is not None and turn.agent == "planner"
    assert "proposal" in turn.observation["prompt"].lower()  # the oracle tool already spoke
    step = play.step("not a move list")
    assert step.reward == play.env.format_penalty and not step.info["parsed"]
    assert step.next is not None and step.next.agent == "planner"  # the tool spoke again
    assert not step.done
    while step.next is not None:
        step = play.step("#### U")
    assert step.done and step.truncated and play.turn is None
    with pytest.raises(RuntimeError, match="reset"):
        play.step("#### U")


def test_single_agent_mode_and_bad_configs():
    play = RolePlay(mas_envs.make("mas/PlanPath-v0", mode="single"))
    assert _play(play, oracle_policy, seed=0) == ["planner"] and play.success
    env = mas_envs.make("mas/PlanPath-v0")
    with pytest.raises(ValueError, match=r"\['tool'\] are not played"):
        RolePlay(env, plays=["planner"])
    with pytest.raises(ValueError, match="roles of this env"):
        RolePlay(env, plays=["coder"])
    with pytest.raises(ValueError, match="no policy for roles"):
        RolePlay(env, plays=["planner"], others={"planner": oracle_policy})
    with pytest.raises(ValueError, match="'oracle' or 'random'"):
        scripted_policy("greedy")


def test_text_and_message_views():
    obs = {"system": "rules", "prompt": "state"}
    assert as_messages(obs) == [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "state"},
    ]
    assert as_text(obs) == "rules\n\nstate" and convert(obs, "dict") == obs
    with pytest.raises(ValueError, match="unknown observation format"):
        convert(obs, "xml")

    env = ChatObservation(gymnasium.make("mas/PlanPath-v0"), "messages")
    messages, _ = env.reset(seed=0)
    inner = env.unwrapped.env
    assert messages == as_messages(inner.observe(inner.agent_selection))
    assert env.observation_space.contains(tuple(messages))
    text_env = ChatObservation(gymnasium.make("mas/PlanPath-v0"), "text")
    text, _ = text_env.reset(seed=0)
    assert text == as_text(inner.observe("planner")) and text_env.observation_space.contains(text)
    text, reward, *_ = text_env.step(inner.oracle_action())
    assert isinstance(text, str) and reward > 0

    aec = ChatView(mas_envs.make("mas/Sokoban-v0"), "text")
    aec.reset(seed=3)
    agent = aec.agent_selection
    assert aec.observe(agent) == as_text(aec.unwrapped.observe(agent))
    assert aec.observation_space(agent).contains(aec.observe(agent))
    with pytest.raises(ValueError, match="'text' or 'messages'"):
        ChatView(mas_envs.make("mas/Sokoban-v0"), "dict")
