"""An OpenEnv (`openenv-core` >= 0.3) server for every env id: typed Action, Observation, State.

One command starts it (or build `environments/openenv/Dockerfile`)::

    pip install -e '.[openenv]'      # from a clone of the repository
    mas-openenv --env mas/PlanPath-v0 --port 8000     # python -m mas_envs.adapters.openenv

OpenEnv's own server (`openenv.core.env_server.create_app`) serves it: `POST /reset`,
`POST /step`, `GET /state`, `GET /schema`, `GET /health` and the `/ws` WebSocket, where each
connection is one session with its own env. HTTP `/reset` and `/step` are one-shot (a fresh env
per request, as OpenEnv defines them): `/reset` shows a task's first observation, and `/step`,
which would act on an env that was never reset, is refused with 409 and a message naming the
WebSocket client; episodes run over `/ws` or `MasEnvClient`. Bad reset options (an unknown id,
option or role, bad `env_kwargs`) answer 400 with the message over HTTP, an error message over
the WebSocket; a WebSocket message that is JSON but not an object gets an error message and the
session goes on.

`reset` takes any of `seed`, `env_id`, `task_id`, `split`, `mode`, `plays`, `others` and
`env_kwargs` (`mas_envs.make` options), so one server serves every id. Each observation names the
role to act now (`agent`) with its `system` text, `prompt` and the same as chat `messages`;
`step` takes that role's text. `reward` is the reward of the action just taken; `info` is the
acting role's `infos` entry. With `plays=["planner"]` and `others="oracle"` the other roles are
played on the server (see `mas_envs.adapters.roles`)::

    from mas_envs.adapters.openenv import MasAction, MasEnvClient

    with MasEnvClient(base_url="http://127.0.0.1:8000").sync() as client:
        result = client.reset(env_id="mas/PlanPath-v0", seed=0)
        while not result.done:
            result = client.step(MasAction(text=my_model(result.observation.messages)))
        print(client.state().success)
"""

from __future__ import annotations

import argparse
import functools
import json
from typing import Any
from uuid import uuid4

from mas_envs.optional import missing

try:
    from openenv.core import EnvClient
    from openenv.core.client_types import StepResult
    from openenv.core.env_server import Action, Environment, Observation, State, create_app
    from openenv.core.env_server.types import WSErrorCode, WSErrorResponse
except ImportError as e:  # pragma: no cover - depends on the environment
    raise missing("openenv", e, purpose="mas_envs.adapters.openenv") from e

from pydantic import Field

import mas_envs
from mas_envs.adapters.roles import RolePlay, make_role_play
from mas_envs.chat import as_messages

__all__ = [
    "MasAction",
    "MasEnvClient",
    "MasEnvironment",
    "MasObservation",
    "MasState",
    "NoEpisodeError",
    "ResetOptionsError",
    "main",
    "make_app",
]

DEFAULT_ENV = "mas/PlanPath-v0"


class ResetOptionsError(ValueError):
    """`reset` was given an option it cannot use (unknown id, option or role; bad env_kwargs).

    HTTP answers 400 with the message; the WebSocket sends it as an error message."""


class NoEpisodeError(RuntimeError):
    """`step` in a session with no episode: before `reset`, or any HTTP `POST /step`."""


NO_EPISODE = (
    "step() before reset(): this env has no episode. Over HTTP every request gets a fresh env "
    "(OpenEnv's one-shot /reset and /step), so POST /step can never continue an episode: play "
    "episodes over the WebSocket, with `MasEnvClient(base_url=...).sync()` (reset, then step) "
    "or the /ws endpoint. Over the WebSocket: reset the session first."
)


class MasAction(Action):
    """The acting role's text (the model's reply, any string)."""

    text: str = Field(..., description="The acting role's text, e.g. '#### R, R, D'")


class MasObservation(Observation):
    """What the role to act now sees, and what the last action did."""

    env_id: str = Field("", description="The env id of this episode")
    agent: str | None = Field(None, description="The role to act now; None when done")
    system: str = Field("", description="The system text for that role")
    prompt: str = Field("", description="The user prompt for that role")
    messages: list[dict[str, str]] = Field(
        default_factory=list, description="system and prompt as chat messages"
    )
    acted: str | None = Field(None, description="The role whose action led here")
    info: dict[str, Any] = Field(default_factory=dict, description="That role's infos entry")
    success: bool = Field(False, description="The task is solved")


class MasState(State):
    """The episode's state (besides OpenEnv's `episode_id` and `step_count`)."""

    env_id: str = ""
    task_id: int | str | None = None
    split: str = "train"
    mode: str = "mas"
    plays: list[str] = Field(default_factory=list)
    agent: str | None = None
    turn: int = 0
    success: bool = False
    returns: dict[str, float] = Field(default_factory=dict)


class MasEnvironment(Environment[MasAction, MasObservation, MasState]):
    """One session: one `mas_envs` env, made afresh by each `reset`.

    Args:
        env_id: The id served when `reset` names none.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session owns its env; nothing is shared

    def __init__(self, env_id: str = DEFAULT_ENV) -> None:
        super().__init__()
        mas_envs.registry.entry(env_id)  # an unknown id fails at start, with a did-you-mean
        self.default_env_id = env_id
        self._play: RolePlay | None = None
        self._state = MasState(env_id=env_id)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        env_id: str | None = None,
        task_id: int | str | None = None,
        split: str = "train",
        mode: str = "mas",
        plays: list[str] | None = None,
        others: str = "oracle",
        env_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> MasObservation:
        """Start an episode (see the module docstring for the arguments)."""
        if kwargs:
            raise ResetOptionsError(
                f"unknown reset options {sorted(kwargs)}; known: seed, episode_id, env_id, "
                "task_id, split, mode, plays, others, env_kwargs"
            )
        env_id = env_id or self.default_env_id
        try:  # what the caller got wrong, as a 400 and not the server's 500
            self._play = make_role_play(
                env_id, mode=mode, split=split, plays=plays, others=others, env_kwargs=env_kwargs
            )
            options = {"task_id": task_id} if task_id is not None else None
            turn = self._play.reset(seed=seed, options=options)
        except (KeyError, ValueError, TypeError) as err:
            self._play = None
            msg = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
            raise ResetOptionsError(f"reset: {msg}") from err
        env = self._play.env
        self._state = MasState(
            episode_id=episode_id or str(uuid4()),
            env_id=env_id,
            task_id=env.task_id,
            split=split,
            mode=mode,
            plays=list(self._play.plays or ()),
        )
        return self._observe(turn.agent if turn else None, None, 0.0, {})

    def step(
        self, action: MasAction, timeout_s: float | None = None, **kwargs: Any
    ) -> MasObservation:
        """Apply the acting role's text."""
        if self._play is None:
            raise NoEpisodeError(NO_EPISODE)
        acted = self._play.env.agent_selection
        out = self._play.step(action.text)
        self._state.step_count += 1
        return self._observe(out.next.agent if out.next else None, acted, out.reward, out.info)

    @property
    def state(self) -> MasState:
        if self._play is not None:
            env = self._play.env
            turn = self._play.turn
            self._state.agent = turn.agent if turn else None
            self._state.turn = env.turn
            self._state.success = bool(env.success)
            self._state.returns = dict(self._play.returns)
        return self._state

    def _observe(
        self, agent: str | None, acted: str | None, reward: float, info: dict[str, Any]
    ) -> MasObservation:
        assert self._play is not None
        env = self._play.env
        obs = env.observe(agent) if agent else {"system": "", "prompt": ""}
        return MasObservation(
            done=agent is None,
            reward=reward,
            env_id=self._state.env_id,
            agent=agent,
            system=obs["system"],
            prompt=obs["prompt"],
            messages=as_messages(obs) if agent else [],
            acted=acted,
            info=info,
            success=bool(env.success),
        )


class MasEnvClient(EnvClient[MasAction, MasObservation, MasState]):
    """OpenEnv's WebSocket client, typed for this server (`.sync()` for a blocking one)."""

    def _step_payload(self, action: MasAction) -> dict[str, Any]:
        return {"text": action.text}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[MasObservation]:
        obs = MasObservation(
            **payload.get("observation", {}),
            done=payload.get("done", False),
            reward=payload.get("reward"),
        )
        return StepResult(observation=obs, reward=payload.get("reward"), done=obs.done)

    def _parse_state(self, payload: dict[str, Any]) -> MasState:
        return MasState(**payload)


def make_app(env_id: str = DEFAULT_ENV, max_sessions: int = 16) -> Any:
    """The FastAPI app: OpenEnv's server around `MasEnvironment`, with the caller's mistakes
    answered as 4xx with their message (OpenEnv's server answers them with a bare 500)."""
    from fastapi.responses import JSONResponse

    mas_envs.registry.entry(env_id)
    app = create_app(
        functools.partial(MasEnvironment, env_id=env_id),
        MasAction,
        MasObservation,
        env_name="mas-rl",
        max_concurrent_envs=max_sessions,
    )

    async def bad_reset(request: Any, exc: Exception) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    async def no_episode(request: Any, exc: Exception) -> JSONResponse:
        return JSONResponse(status_code=409, content={"detail": str(exc)})

    app.add_exception_handler(ResetOptionsError, bad_reset)
    app.add_exception_handler(NoEpisodeError, no_episode)
    app.add_middleware(_ObjectMessagesOnly)
    return app


class _ObjectMessagesOnly:
    """ASGI middleware: a `/ws` message that is valid JSON but not an object (`[]`, `3`) gets an
    error message and the session goes on. openenv-core 0.3 reads `message.get("type")` outside
    its error handling, so such a message ended the session; invalid JSON it already answers."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return

        async def receive_objects() -> Any:
            while True:
                message = await receive()
                text = message.get("text") if message["type"] == "websocket.receive" else None
                if text is None or _is_object_or_not_json(text):
                    return message
                error = WSErrorResponse(
                    data={
                        "message": "a message must be a JSON object such as "
                        '{"type": "step", "data": {"text": "..."}}, got a JSON '
                        f"{type(json.loads(text)).__name__}",
                        "code": WSErrorCode.VALIDATION_ERROR,
                    }
                )
                await send({"type": "websocket.send", "text": error.model_dump_json()})

        await self.app(scope, receive_objects, send)


def _is_object_or_not_json(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:  # not JSON: OpenEnv's server answers INVALID_JSON itself
        return True


def main(argv: list[str] | None = None) -> None:
    """`mas-openenv`: serve the envs over OpenEnv's HTTP/WebSocket interface."""
    parser = argparse.ArgumentParser(
        prog="mas-openenv",
        description=main.__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--env", default=DEFAULT_ENV, help="env id when reset names none")
    parser.add_argument("--host", default="127.0.0.1", help="address (0.0.0.0 in a container)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port")
    parser.add_argument("--max-sessions", type=int, default=16, help="concurrent /ws sessions")
    args = parser.parse_args(argv)
    import uvicorn

    uvicorn.run(make_app(args.env, args.max_sessions), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
