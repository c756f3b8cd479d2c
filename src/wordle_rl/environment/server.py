"""The environment served over the network through OpenEnv: ``wordle-rl serve --host 127.0.0.1
--port 8000``.

Protocol (OpenEnv): a WebSocket at ``/ws`` holds one game per connection. Messages are JSON:
``{"type": "reset", "data": {"seed": 1}}`` (optionally ``answer``/``history`` when the server allows
it; a blind server, ``--blind``, takes none of the three and draws each secret from the operating
system's randomness), ``{"type": "step", "data": {"message": "<guess>crane</guess>"}}``, ``{"type":
"state"}``, ``{"type": "close"}``. Replies: ``{"type": "observation", "data": {"observation": {...},
"reward": r, "done": d}}`` or ``{"type": "error", "data": {"message": ..., "code": ...}}``. ``GET
/health`` answers ``{"status": "healthy"}``.

Safety: each connection owns its game and cannot attach to another session; the secret is sent only
once the game is over; messages over ``max_message_bytes`` get an error and the session goes on;
idle sessions expire after ``idle_timeout_s``; past ``max_sessions`` a new connection gets a "busy"
(``CAPACITY_REACHED``) error. Bad JSON, unknown types and wrong actions get errors; the server keeps
serving.
"""

from __future__ import annotations

import asyncio
import functools
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field

from wordle_rl.engine.words import WordList
from wordle_rl.environment.env import EnvConfig, WordleEnv
from wordle_rl.environment.rewards import RewardContext

__all__ = [
    "ServerConfig",
    "WordleAction",
    "WordleObservation",
    "WordleState",
    "WordleEnvironment",
    "build_app",
    "serve",
    "ServerThread",
]


class WordleAction(Action):
    """One model completion to play (parsed strictly by the server)."""

    message: str = Field(
        ..., max_length=16384, description="The model's completion text for this turn."
    )


class WordleObservation(Observation):
    messages: list[dict[str, str]] = Field(default_factory=list, description="The chat so far.")
    state: dict[str, Any] = Field(
        default_factory=dict, description="Turn, guesses left, history (no secret)."
    )
    info: dict[str, Any] = Field(
        default_factory=dict, description="Last move: guess, pattern, error, rewards."
    )


class WordleState(State):
    turn: int = 0
    guesses_left: int = 0
    history: list[dict[str, str]] = Field(default_factory=list)
    done: bool = False


@dataclass
class ServerConfig:
    """Settings of ``wordle-rl serve``."""

    host: str = field(default="127.0.0.1", metadata={"help": "Interface to bind."})
    port: int = field(default=8000, metadata={"help": "TCP port."})
    max_sessions: int = field(
        default=512, metadata={"help": "Concurrent WebSocket sessions; more get 'busy'."}
    )
    idle_timeout_s: float = field(
        default=300.0, metadata={"help": "A session idle this long is closed."}
    )
    max_message_bytes: int = field(
        default=65536, metadata={"help": "Larger messages get an error reply."}
    )
    allow_answer: bool = field(
        default=True,
        metadata={
            "help": "Let clients choose the answer, history or seed at reset (training); off "
            "(blind evaluation): the "
            "server draws every secret from the operating system's randomness."
        },
    )
    env: EnvConfig = field(
        default_factory=EnvConfig, metadata={"help": "Rules, prompt style, rewards."}
    )


class WordleEnvironment(Environment[WordleAction, WordleObservation, WordleState]):
    """OpenEnv adapter around :class:`wordle_rl.environment.env.WordleEnv`; one instance per
    session."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, config: EnvConfig, ctx: RewardContext, allow_answer: bool = True):
        super().__init__()
        self.game = WordleEnv(config, ctx=ctx)
        self.allow_answer = allow_answer
        # blind mode: the operating system's randomness, not a client seed
        self._secrets = secrets.SystemRandom()
        self.episode_id: str | None = None
        self.step_count = 0
        self.started = False

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        answer: str | None = None,
        history: list | None = None,
        **kwargs: Any,
    ) -> WordleObservation:
        if kwargs:
            raise ValueError(f"unknown reset field(s): {sorted(kwargs)}")
        if (answer is not None or history) and not self.allow_answer:
            raise ValueError("this server does not let clients choose the answer or history")
        if seed is not None and not self.allow_answer:
            raise ValueError(
                "this server is blind: it draws each secret itself, so a reset takes no seed (a "
                "seed would make the answer a public function of what the client sends)"
            )
        if history is not None and not isinstance(history, list):
            raise ValueError("history must be a list of [guess, pattern-or-null] pairs")
        if not self.allow_answer:
            answer = self.game.answers[self._secrets.randrange(len(self.game.answers))]
        obs = self.game.reset(
            seed=seed, answer=answer, history=[(h[0], h[1]) for h in history or []]
        )
        self.episode_id, self.step_count, self.started = episode_id, 0, True
        return WordleObservation(messages=obs.messages, state=obs.state, done=obs.done, reward=None)

    def step(
        self, action: WordleAction, timeout_s: float | None = None, **kwargs: Any
    ) -> WordleObservation:
        if not isinstance(action, WordleAction):
            raise ValueError("expected a step with data {'message': <completion text>}")
        if not self.started:
            raise ValueError("no game in this session: send a reset first")
        res = self.game.step(action.message)
        self.step_count += 1
        return WordleObservation(
            messages=res.observation.messages,
            state=res.observation.state,
            info=_jsonable(res.info),
            done=res.done,
            reward=res.reward,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        """What ``GET /metadata`` answers: the game, its rules as this server plays them, and the
        protocol."""
        cfg = self.game.config
        rules = (
            f"{cfg.max_turns} guesses; hard mode {'on' if cfg.hard else 'off'}; a word outside the "
            f"{len(self.game.words.allowed):,} allowed guesses is handled by the policy "
            f"'{cfg.invalid_policy}'; "
            f"secrets are drawn from {len(self.game.answers):,} answer words"
        )
        secret = (
            "drawn by the server from the operating system's randomness; a reset takes no seed, "
            "answer or history"
            if not self.allow_answer
            else "drawn with random.Random(seed) when the reset sends a seed "
            "(reproducible), or set by the reset's answer/history"
        )
        readme = "\n".join(
            [
                "# Wordle",
                "",
                "Guess the secret 5-letter word. Each turn, send the model's completion text as "
                "the action "
                '`{"message": "<guess>crane</guess>"}`; the server parses it strictly, scores the '
                "guess, and "
                "answers with the chat so far, the state (turn, guesses left, history of guesses "
                "and marks) and the "
                "reward of the move. Marks: G right letter in the right spot, Y in the word "
                "elsewhere, X not in the "
                "word (no more copies of that letter).",
                "",
                f"- Rules: {rules}.",
                f"- Secret: {secret}; it is sent only once the game is over.",
                f"- Prompt style: {cfg.style.name}; rewards: the weighted components of `wordle-rl "
                f"rewards explain`.",
                "- Protocol: OpenEnv (WebSocket `/ws`, or HTTP `/reset`, `/step`, `/state`); bad "
                "input is answered "
                "with an error and the reason, and the game goes on.",
            ]
        )
        return EnvironmentMetadata(
            name="wordle",
            description="Wordle: find the secret 5-letter word in "
            f"{cfg.max_turns} guesses from per-letter feedback (wordle-rl).",
            readme_content=readme,
            version=_version(),
            author="wordle-rl",
        )

    @property
    def state(self) -> WordleState:
        if not self.started:
            return WordleState(episode_id=self.episode_id, step_count=0)
        s = self.game._observation().state
        return WordleState(
            episode_id=self.episode_id,
            step_count=self.step_count,
            turn=s["turn"],
            guesses_left=s["guesses_left"],
            history=s["history"],
            done=s["done"],
        )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("wordle-rl")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "0+unknown"


def _jsonable(info: dict) -> dict:
    return json.loads(json.dumps(info, default=float))


class GuardMiddleware:
    """ASGI guard for ``/ws``: no attaching to other sessions, a message size cap, an idle
    timeout."""

    def __init__(self, app, max_message_bytes: int, idle_timeout_s: float):
        self.app = app
        self.max_bytes = max_message_bytes
        self.idle = idle_timeout_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        if b"session_id" in scope.get("query_string", b""):
            await receive()  # websocket.connect
            await send(
                {
                    "type": "websocket.close",
                    "code": 1008,
                    "reason": "attaching to a session is not allowed",
                }
            )
            return None
        state = {"closed": False}

        async def error(message: str, code: str) -> None:
            await send(
                {
                    "type": "websocket.send",
                    "text": json.dumps(
                        {"type": "error", "data": {"message": message, "code": code}}
                    ),
                }
            )

        async def guarded_receive():
            while True:
                try:
                    msg = await asyncio.wait_for(receive(), timeout=self.idle)
                except TimeoutError:
                    await error(
                        f"session closed after {self.idle:g} s without a message", "IDLE_TIMEOUT"
                    )
                    await send({"type": "websocket.close", "code": 1000, "reason": "idle timeout"})
                    state["closed"] = True
                    return {"type": "websocket.disconnect", "code": 1000}
                if msg["type"] == "websocket.receive":
                    size = len(msg.get("text") or "") + len(msg.get("bytes") or b"")
                    if size > self.max_bytes:
                        await error(
                            f"message of {size} bytes exceeds the {self.max_bytes}-byte limit",
                            "MESSAGE_TOO_LARGE",
                        )
                        continue
                return msg

        async def guarded_send(msg):
            if state["closed"]:
                return None
            return await send(msg)

        return await self.app(scope, guarded_receive, guarded_send)


def build_app(config: ServerConfig | None = None, words: WordList | None = None):
    """The ASGI app: OpenEnv's FastAPI app for :class:`WordleEnvironment`, behind
    :class:`GuardMiddleware`."""
    config = config or ServerConfig()
    ctx = RewardContext(words).warm_up()

    def factory() -> WordleEnvironment:
        return WordleEnvironment(config.env, ctx, allow_answer=config.allow_answer)

    app = create_app(
        factory,
        WordleAction,
        WordleObservation,
        env_name="wordle",
        max_concurrent_envs=config.max_sessions,
        state_cls=WordleState,
    )
    # the environment's refusals are the client's error
    app.add_exception_handler(ValueError, _bad_request)
    return GuardMiddleware(app, config.max_message_bytes, config.idle_timeout_s)


async def _bad_request(request, exc: ValueError):
    """HTTP ``/reset`` and ``/step``: bad input (a step with no game, an unknown field, a refused
    answer) answers 400 with the reason instead of a 500."""
    from fastapi.responses import JSONResponse

    return JSONResponse(status_code=400, content={"detail": str(exc)})


def serve(config: ServerConfig | None = None) -> None:
    """Run the server with uvicorn until interrupted."""
    import uvicorn

    config = config or ServerConfig()
    uvicorn.run(
        build_app(config),
        host=config.host,
        port=config.port,
        log_level="warning",
        ws_max_size=4 * config.max_message_bytes,
        ws_ping_interval=None,
    )


def __getattr__(name: str):
    """``wordle_rl.environment.server:app``, the app the OpenEnv manifest names (``uvicorn
    wordle_rl.environment.server:app`` runs it): the default server's app, built on first access
    instead of at import."""
    if name == "app":
        return _default_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _default_app():
    return build_app(ServerConfig())


class ServerThread:
    """Run the server in a background thread on a free loopback port (tests, benchmarks, notebooks).

    >>> with ServerThread(ServerConfig(port=0)) as srv:  # doctest: +SKIP
    ...     RemoteEnv(srv.url).reset(seed=0)
    """

    def __init__(self, config: ServerConfig | None = None, words: WordList | None = None):
        import threading

        import uvicorn

        self.config = config or ServerConfig(port=0)
        uv = uvicorn.Config(
            build_app(self.config, words),
            host=self.config.host,
            port=self.config.port,
            log_level="error",
            ws_max_size=4 * self.config.max_message_bytes,
            ws_ping_interval=None,
        )
        self.server = uvicorn.Server(uv)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServerThread:
        import time

        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the wordle-rl server did not start")
            time.sleep(0.02)
        host, port = self.server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
