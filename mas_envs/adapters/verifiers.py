"""The envs as `verifiers` (>= 0.4) environments: tasksets, and a team ``Env`` whose roles are
the framework's agents.

verifiers loads an environment by id: ``vf-eval mas-planpath`` imports the package
``mas_planpath``, which exports one ``Taskset`` subclass and one ``Env`` subclass. The packages
for each env family are in ``environments/`` of the repository (installable, and pushable to the
Environments Hub); each is a few lines over the classes here::

    pip install -e '.[verifiers]' -e environments/mas_planpath
    vf-eval mas-planpath --model my-model --client.base-url http://127.0.0.1:8000/v1 \\
        --client.api-key-var NO_KEY --no-push --no-rich -n 5

How an episode runs: the team env plays the ``mas_envs`` env turn by turn. Each turn of a role is
one rollout of that role's agent (``--env.<role>.model``, ``.sampling``, ``.client`` configure it
separately, so two roles can be two models): its task is the role's observation now (system text
and prompt, which already carry the state and the history), its reply is the action, and its trace
records the reward of that action (``reward``: ``alpha * team + local``) and the episode's
outcome (``success``, on every trace of the episode, as a metric). One trace per (role, turn) is
exactly AT-GRPO's sample. Roles named in ``--env.scripted`` (``{"tool": "oracle"}``) are played by
a reference policy inside the env and make no model call; ``--env.frozen`` marks roles whose
traces are not training data (a frozen model: ``trainable = False``).
"""

from __future__ import annotations

import types
from typing import Any, Literal

from mas_envs.optional import missing

try:
    import verifiers.v1 as vf
except ImportError as e:  # pragma: no cover - depends on the environment
    raise missing("verifiers", e, purpose="mas_envs.adapters.verifiers") from e

from pydantic import Field

import mas_envs
from mas_envs.adapters.roles import scripted_policy, task_ids

__all__ = [
    "CodeTeamEnv",
    "CodeTeamEnvConfig",
    "GameTeamEnv",
    "GameTeamEnvConfig",
    "MasData",
    "MasTask",
    "MasTaskset",
    "MasTasksetConfig",
    "MathTeamEnv",
    "MathTeamEnvConfig",
    "family_taskset",
    "load_environment",
    "role_agent",
]


def role_agent() -> Any:
    """The default seat of a role: a tool-less chat turn (the ``null`` harness) run locally.

    One rollout is one turn of the role, so one model call (``max_turns=1``). Override per role
    on the command line, e.g. ``--env.planner.runtime.type docker``.
    """
    return vf.AgentConfig(harness={"id": "null"}, runtime={"type": "subprocess"}, max_turns=1)


class MasData(vf.TaskData):
    """One task: an env id, its options and a task id (the prompt is the first role's)."""

    env_id: str
    task_id: int | str
    mode: str = "mas"
    env_kwargs: dict[str, Any] = Field(default_factory=dict)


class MasTask(vf.Task[MasData]):
    """A task of a ``mas_envs`` env; the team env records its rewards on each role's trace."""


class MasTasksetConfig(vf.TasksetConfig):
    env_id: str = "mas/PlanPath-v0"
    """The env id (``mas_envs.list_envs()`` lists them)."""
    split: Literal["train", "validation", "test"] = "test"
    """The split whose task ids are served, in order."""
    num_tasks: int = Field(100, ge=1)
    """How many tasks: the first N ids of a held-out split; for train, seeds 0..N-1."""
    mode: Literal["mas", "single"] = "mas"
    """``mas``: the team; ``single``: one role does the whole task (the single-agent baseline)."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Options of ``mas_envs.make`` (``{"rows": 4, "cols": 4}``, ``{"max_turns": 2}``, ...)."""


class MasTaskset(vf.Taskset[MasTask, MasTasksetConfig]):
    """The first ``num_tasks`` tasks of a split (train: seeds 0..N-1), each with its first role's
    observation as the task prompt."""

    def load(self) -> list[MasTask]:
        cfg = self.config
        if cfg.env_id not in mas_envs.ENVS:
            mas_envs.registry.entry(cfg.env_id)  # raises with a did-you-mean
        env = mas_envs.make(cfg.env_id, mode=cfg.mode, split=cfg.split, **cfg.env_kwargs)
        tasks = []
        for i, task_id in enumerate(task_ids(env, cfg.split, cfg.num_tasks)):
            env.reset(seed=i, options=None if task_id is None else {"task_id": task_id})
            task_id = env.task_id
            obs = env.observe(env.agent_selection)
            data = MasData(
                id=str(task_id),
                name=f"{cfg.env_id}#{task_id}",
                prompt=obs["prompt"],
                system_prompt=obs["system"],
                env_id=cfg.env_id,
                task_id=task_id,
                mode=cfg.mode,
                env_kwargs={"split": cfg.split, **cfg.env_kwargs},
            )
            tasks.append(MasTask(data, cfg.task))
        return tasks


class _TeamConfig(vf.EnvConfig):
    scripted: dict[str, Literal["oracle", "random"]] = Field(default_factory=dict)
    """Roles played by a reference policy inside the env (no model call), e.g.
    ``{"tool": "oracle"}``: train or evaluate the other roles against a perfect teammate."""
    frozen: list[str] = Field(default_factory=list)
    """Roles whose traces are not training data (``trainable = False``): a frozen teammate."""


def _reply(trace: vf.Trace) -> str:
    """The assistant's last reply in a one-turn trace ("" when the model said nothing)."""
    for node in reversed(trace.nodes):
        if node.sampled:
            return vf.types.content_text(node.message.content or "")
    return ""


class _TurnTask(MasTask):
    """One turn of one role: scoring applies the reply to the live episode and reads its reward.

    The env builds one per (role, turn) around the running ``mas_envs`` env, so the reward that
    verifiers reports for the rollout is the reward of that action (``alpha * team + local``).
    """

    env: Any = None
    agent: str = ""

    @vf.metric(priority=1)
    async def outcome(self, trace: vf.Trace) -> dict[str, float]:
        env, agent = self.env, self.agent
        env.step(_reply(trace))
        info = env.infos[agent]
        self.step_reward = float(env.rewards[agent])
        trace.info["mas"] = {"role": agent, "turn": info["turn"], "reason": info["reason"]}
        return {
            "team_reward": float(info["team_reward"]),
            "local_reward": float(info["local_reward"]),
            "parsed": float(info["parsed"]),
        }

    @vf.reward(weight=1.0)
    async def reward(self, trace: vf.Trace) -> float:
        return self.step_reward


class _TeamEnv:
    """The shared episode loop of the three team envs (mixed into each ``vf.Env``)."""

    config: _TeamConfig

    async def setup(self, agents: vf.Agents) -> None:
        for role in self.config.frozen:
            getattr(agents, role).trainable = False

    async def run(self, task: MasTask, agents: vf.Agents) -> None:
        data = task.data
        env = mas_envs.make(data.env_id, mode=data.mode, **data.env_kwargs)
        env.reset(options={"task_id": data.task_id})
        unknown = (set(self.config.scripted) | set(self.config.frozen)) - set(env.possible_agents)
        if unknown:
            raise ValueError(
                f"roles {sorted(unknown)} in scripted/frozen are not roles of {data.env_id} "
                f"{env.possible_agents}"
            )
        scripted = {r: scripted_policy(p, seed=0) for r, p in self.config.scripted.items()}
        traces = []
        while not (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
            agent = env.agent_selection
            if agent in scripted:
                env.step(scripted[agent](env, agent))
                continue
            obs = env.observe(agent)
            name = f"{data.name}/{agent}/turn{env.turn}"
            turn = _TurnTask(
                data.model_copy(
                    update={"prompt": obs["prompt"], "system_prompt": obs["system"], "name": name}
                ),
                task.config,
            )
            turn.env, turn.agent = env, agent
            turns_before = env.turn, agent
            trace = await getattr(agents, agent).run(turn)
            traces.append(trace)
            if (env.turn, env.agent_selection) == turns_before:
                break  # the rollout failed before scoring (no reply): the episode is no result
        for trace in traces:
            trace.record_metric("success", float(env.success))
            trace.record_metric("turns", float(env.turn))


class GameTeamEnvConfig(_TeamConfig):
    tool: vf.AgentConfig = role_agent()
    planner: vf.AgentConfig = role_agent()


class GameTeamEnv(_TeamEnv, vf.Env[GameTeamEnvConfig]):
    """Sokoban, Plan-Path, Sudoku (and their Code variants): ``tool`` proposes, ``planner`` acts."""


class MathTeamEnvConfig(_TeamConfig):
    tool: vf.AgentConfig = role_agent()
    reasoner: vf.AgentConfig = role_agent()


class MathTeamEnv(_TeamEnv, vf.Env[MathTeamEnvConfig]):
    """Math: ``tool`` runs Python in the sandbox, ``reasoner`` answers."""


class CodeTeamEnvConfig(_TeamConfig):
    coder: vf.AgentConfig = role_agent()
    tester: vf.AgentConfig = role_agent()


class CodeTeamEnv(_TeamEnv, vf.Env[CodeTeamEnvConfig]):
    """Code: ``coder`` writes the program, ``tester`` writes cases."""


def family_taskset(name: str, env_ids: list[str]) -> type[MasTaskset]:
    """A taskset class for one env family: its config takes only ``env_ids`` (default: the first).

    An environment package exports it with the family's team env, e.g.
    ``PlanPathTaskset = family_taskset("PlanPath", ["mas/PlanPath-v0", "mas/PlanPathCode-v0"])``.
    """
    config = type(
        f"{name}Config",
        (MasTasksetConfig,),
        {"__annotations__": {"env_id": Literal[tuple(env_ids)]}, "env_id": env_ids[0]},
    )
    return types.new_class(f"{name}Taskset", (MasTaskset, vf.Taskset[MasTask, config]))


def load_environment(taskset_id: str, **config: Any) -> vf.Env:
    """Build the env of an installed environment package, as ``vf-eval`` would.

    Args:
        taskset_id: The package id, e.g. ``"mas-planpath"``.
        **config: The env config as a dict, e.g. ``taskset={"num_tasks": 5}``,
            ``planner={"model": "m"}``, ``scripted={"tool": "oracle"}``.
    """
    taskset = {**config.pop("taskset", {}), "id": taskset_id}
    return vf.load_environment(vf.resolve_env_config({**config, "taskset": taskset}))
