"""Clients of the environment server, built on OpenEnv's ``EnvClient`` (its WebSocket session,
timeouts and reconnection; typed actions, observations and state).

    # the OpenEnv client, async or .sync()
    from wordle_rl.environment.client import WordleClient, WordleAction
    with WordleClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(seed=1)  # StepResult[WordleObservation]
        result = env.step(WordleAction(message="<guess>crane</guess>"))

    # the same client with WordleEnv's interface
    with RemoteEnv("http://127.0.0.1:8000") as env:
        obs = env.reset(seed=1)
        step = env.step("<guess>crane</guess>")

Training and evaluation use :class:`RemoteEnv` when ``--env-url`` is given. Server errors raise
:class:`EnvServerError` with the server's code; an unreachable server raises
:class:`ConnectionError` naming the address.
"""

from __future__ import annotations

import asyncio
from typing import Any

from openenv.core import EnvClient
from openenv.core.client_types import StepResult as TypedStep

from wordle_rl.environment.env import Observation, StepResult
from wordle_rl.environment.server import WordleAction, WordleObservation, WordleState

__all__ = [
    "EnvServerError",
    "WordleClient",
    "RemoteEnv",
    "WordleAction",
    "WordleObservation",
    "WordleState",
]


class EnvServerError(RuntimeError):
    """An error reply of the server (bad input, a refused reset, capacity reached, idle timeout),
    with its code."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code


class WordleClient(EnvClient[WordleAction, WordleObservation, WordleState]):
    """OpenEnv's typed client for ``wordle-rl serve``: one game session per connection."""

    def _step_payload(self, action: WordleAction) -> dict[str, Any]:
        return {"message": action.message}

    def _parse_result(self, payload: dict[str, Any]) -> TypedStep[WordleObservation]:
        done = bool(payload.get("done", False))
        obs = WordleObservation(
            **payload.get("observation", {}), reward=payload.get("reward"), done=done
        )
        return TypedStep(observation=obs, reward=payload.get("reward"), done=done)

    def _parse_state(self, payload: dict[str, Any]) -> WordleState:
        return WordleState(**payload)

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        """As OpenEnv's, but an error reply raises :class:`EnvServerError` carrying the server's
        code."""
        from websockets.exceptions import ConnectionClosed

        try:
            await self._send(message)
        except ConnectionClosed:
            pass  # a refused session sends its error and closes: read that error below
        reply = await self._receive()
        if reply.get("type") == "error":
            data = reply.get("data") or {}
            raise EnvServerError(str(data.get("code", "ERROR")), str(data.get("message", data)))
        return reply


class RemoteEnv(WordleClient):
    """One game on a server, with the interface of the in-process
    :class:`wordle_rl.environment.env.WordleEnv` (synchronous; ``reset`` returns an
    :class:`~wordle_rl.environment.env.Observation`, ``step`` takes the completion text)."""

    def __init__(self, url: str, timeout: float = 30.0):
        super().__init__(
            base_url=url,
            connect_timeout_s=timeout,
            message_timeout_s=timeout,
            websocket_ping_interval_s=None,
        )
        self.url = self.base_url
        self._io = self.sync()
        try:
            self._io.connect()
        except (ConnectionError, OSError, TimeoutError) as e:
            self._io.close()
            raise ConnectionError(f"cannot reach the wordle-rl server at {self.url}: {e}") from e

    def _call(self, method, *args, **kwargs):
        from websockets.exceptions import ConnectionClosed

        try:
            return method(*args, **kwargs)
        except TimeoutError as e:
            raise ConnectionError(
                f"no reply from {self.url} within {self._message_timeout} s"
            ) from e
        except ConnectionClosed as e:
            raise ConnectionError(f"the server at {self.url} closed the session: {e}") from e

    def reset(
        self, seed: int | None = None, answer: str | None = None, history=None
    ) -> Observation:
        data = {
            k: v
            for k, v in {"seed": seed, "answer": answer, "history": history}.items()
            if v is not None
        }
        if "history" in data:
            data["history"] = [[g, p] for g, p in data["history"]]
        r = self._call(self._io.reset, **data)
        return Observation(messages=r.observation.messages, state=r.observation.state, done=r.done)

    def step(self, completion: str | WordleAction) -> StepResult:
        action = (
            completion if isinstance(completion, WordleAction) else WordleAction(message=completion)
        )
        r = self._call(self._io.step, action)
        o = r.observation
        return StepResult(
            Observation(o.messages, o.state, r.done), float(r.reward or 0.0), r.done, o.info
        )

    def state(self) -> dict:
        return self._call(self._io.state).model_dump(exclude={"metadata"})

    def close(self):
        """End the session and stop the client's event-loop thread."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._io.close()
            return None
        # OpenEnv closing the client from its own loop (after a failed connect): awaitable
        return super().close()

    def __enter__(self) -> RemoteEnv:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
