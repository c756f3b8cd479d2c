"""Client for the environment server, with the same interface as the in-process :class:`WordleEnv`.

    with RemoteEnv("http://127.0.0.1:8000") as env:
        obs = env.reset(seed=1)
        step = env.step("<guess>crane</guess>")

Training and evaluation use it when ``--env-url`` is given. Server errors raise :class:`EnvServerError`
with the server's code; an unreachable server raises :class:`ConnectionError` naming the address.
"""

from __future__ import annotations

import json

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.sync.client import connect

from wordle_rl.env import Observation, StepResult

__all__ = ["EnvServerError", "RemoteEnv"]


class EnvServerError(RuntimeError):
    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code


def _ws_url(url: str) -> str:
    url = url.rstrip("/")
    if url.startswith("http://"):
        url = "ws://" + url[len("http://"):]
    elif url.startswith("https://"):
        url = "wss://" + url[len("https://"):]
    elif not url.startswith(("ws://", "wss://")):
        url = "ws://" + url
    return url if url.endswith("/ws") else url + "/ws"


class RemoteEnv:
    """One game session on a ``wordle-rl serve`` server (one WebSocket connection)."""

    def __init__(self, url: str, timeout: float = 30.0):
        self.url = _ws_url(url)
        self.timeout = timeout
        try:
            self._conn = connect(self.url, open_timeout=timeout, close_timeout=2, max_size=2**22)
            self.ws = self._conn.__enter__()
        except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as e:
            raise ConnectionError(f"cannot reach the wordle-rl server at {self.url}: {e}") from e

    def _call(self, msg: dict) -> dict:
        try:
            self.ws.send(json.dumps(msg))
            reply = json.loads(self.ws.recv(timeout=self.timeout))
        except TimeoutError as e:
            raise ConnectionError(f"no reply from {self.url} within {self.timeout} s") from e
        except ConnectionClosed as e:
            reply = self._last_words()
            if reply is None:
                raise ConnectionError(f"the server at {self.url} closed the session: {e}") from e
        if reply.get("type") == "error":
            data = reply.get("data", {})
            raise EnvServerError(str(data.get("code", "ERROR")), str(data.get("message", data)))
        return reply["data"]

    def _last_words(self) -> dict | None:
        """A message the server sent before closing (e.g. a capacity or idle-timeout error), if any."""
        try:
            return json.loads(self.ws.recv(timeout=0.5))
        except (ConnectionClosed, TimeoutError, json.JSONDecodeError):
            return None

    def reset(self, seed: int | None = None, answer: str | None = None, history=None) -> Observation:
        data = {k: v for k, v in {"seed": seed, "answer": answer, "history": history}.items() if v is not None}
        if "history" in data:
            data["history"] = [[g, p] for g, p in data["history"]]
        d = self._call({"type": "reset", "data": data})
        o = d["observation"]
        return Observation(messages=o["messages"], state=o["state"], done=d["done"])

    def step(self, completion: str) -> StepResult:
        d = self._call({"type": "step", "data": {"message": completion}})
        o = d["observation"]
        return StepResult(Observation(o["messages"], o["state"], d["done"]), float(d["reward"] or 0.0), d["done"],
                          o["info"])

    def state(self) -> dict:
        return self._call({"type": "state"})

    def close(self) -> None:
        try:
            self.ws.send(json.dumps({"type": "close"}))
        except ConnectionClosed:
            pass  # already closed by the server (idle timeout, shutdown): nothing left to release
        self._conn.__exit__(None, None, None)

    def __enter__(self) -> RemoteEnv:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
