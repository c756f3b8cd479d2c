"""Fuzz the environment server: its HTTP API from its own OpenAPI description (schemathesis), and
its WebSocket endpoint with random and malformed frames (hypothesis), while one healthy session
keeps playing.

Run on an idle machine: ``python benchmarks/bench_fuzz_server.py --requests 5000 --frames 2000``.
Prints JSON (and writes it with ``--out``). The server runs as its own process (``wordle-rl
serve``) on a free loopback port; requests go to 127.0.0.1 only.

What counts as a failure:
- an HTTP answer of 500 or more, or a request the server does not answer;
- a WebSocket frame that gets neither a reply nor a close within ``--timeout`` seconds, or a close
  with an error code (1011, the server's internal error);
- a step of the healthy session that does not return its game's next observation;
- the server's ``/health`` not answering ``healthy`` at the end.
The server's resident memory is sampled as the fuzzing goes (``rss_mb``).
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from collections import Counter

# the server process and its memory, as the load benchmark starts and reads them (same folder)
from bench_server import _rss_mb, served
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

# what a frame's fields are drawn from: the protocol's own words, and others
TYPES = ["reset", "step", "state", "close", "call_tool", "", "RESET", "launch"]
KEYS = ["message", "seed", "answer", "history", "episode_id", "type", "tool_name", "arguments"]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# fresh inputs every time: no example database, no shrinking, no time limit
GENERATE_ONLY = dict(
    database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
)
GUESSES = st.sampled_from(["<guess>crane</guess>", "<guess>qqqqq</guess>", "<guess>", "crane"])


@st.composite
def frames(draw):
    """One WebSocket frame: ``("text", str)`` or ``("bytes", bytes)``."""
    kind = draw(
        st.sampled_from(["protocol", "protocol", "protocol", "json", "text", "bytes", "big"])
    )
    if kind == "protocol":
        data = draw(
            st.dictionaries(st.sampled_from(KEYS), JSON_VALUES | GUESSES, max_size=3) | JSON_VALUES
        )
        msg = {"type": draw(st.sampled_from(TYPES) | st.text(max_size=10))}
        if draw(st.booleans()):
            msg["data"] = data
        return "text", json.dumps(msg)
    if kind == "json":
        return "text", json.dumps(draw(JSON_VALUES))
    if kind == "text":
        return "text", draw(st.text(max_size=200))
    if kind == "bytes":
        return "bytes", draw(st.binary(max_size=200))
    return "text", "x" * draw(st.integers(60_000, 70_000))  # around the 65,536-byte limit


class Healthy:
    """One session that keeps playing real games between the fuzzer's frames."""

    GUESSES = ["crane", "slate", "pious", "dumpy", "rebut", "abide"]

    def __init__(self, url: str):
        self.ws = connect(url, max_size=2**22)
        self.steps = self.failures = 0
        self._reset()

    def _ask(self, msg: dict) -> dict:
        self.ws.send(json.dumps(msg))
        return json.loads(self.ws.recv(timeout=10))

    def _reset(self) -> None:
        self.turn = 0
        reply = self._ask({"type": "reset", "data": {"seed": self.steps}})
        self.failures += reply.get("type") != "observation"

    def step(self) -> None:
        guess = self.GUESSES[self.turn % len(self.GUESSES)]
        reply = self._ask({"type": "step", "data": {"message": f"<guess>{guess}</guess>"}})
        self.steps += 1
        self.turn += 1
        if reply.get("type") != "observation":
            self.failures += 1
        elif reply["data"]["done"]:
            self._reset()


def fuzz_http(base: str, requests: int, rng_seed: int, pid: int, rss: list) -> dict:
    """Schemathesis cases for every operation of ``/openapi.json`` (valid and invalid inputs)
    until ``requests`` were sent."""
    import schemathesis
    from schemathesis.generation import GenerationMode

    schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
    ops = [o.ok() for o in schema.get_all_operations()]
    codes: Counter = Counter()
    errors: list[str] = []

    def run(op, mode, n, s):
        @seed(s)
        @settings(max_examples=n, **GENERATE_ONLY)
        @given(case=op.as_strategy(generation_mode=mode))
        def one(case):
            try:
                status = case.call(base_url=base, timeout=10).status_code
            except Exception as exc:  # a request the server did not answer is a finding
                status = f"no answer: {type(exc).__name__}"
            codes[status] += 1
            if not isinstance(status, int) or status >= 500:
                errors.append(f"{case.method} {case.formatted_path}: {status}")

        try:
            one()
        except Unsatisfiable:  # nothing invalid to generate (an operation with no inputs)
            unsatisfiable.add(f"{op.method.upper()} {op.path} {mode.value}")

    unsatisfiable: set[str] = set()
    rounds = 0
    while sum(codes.values()) < requests:
        per_op = max(1, (requests - sum(codes.values())) // (2 * len(ops)) + 1)
        for i, op in enumerate(ops):
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                run(op, mode, per_op, rng_seed * 1000 + rounds * 100 + i)
        rounds += 1
        rss.append(round(_rss_mb(pid), 1))
    return {
        "operations": [f"{o.method.upper()} {o.path}" for o in ops],
        "requests": sum(codes.values()),
        "status_codes": {str(k): v for k, v in sorted(codes.items(), key=str)},
        "server_errors": errors[:20],
        "server_error_count": len(errors),
        "no_cases": sorted(unsatisfiable),
    }


def fuzz_ws(url: str, n: int, rng_seed: int, pid: int, rss: list, timeout: float) -> dict:
    """``n`` generated frames, each on a fuzzing session (reopened whenever the server closes
    it), with the healthy session stepping after every frame."""
    healthy = Healthy(url)
    outcomes: Counter = Counter()
    failures: list[str] = []
    ws = connect(url, max_size=2**22)

    @seed(rng_seed)
    @settings(max_examples=n, **GENERATE_ONLY)
    @given(frame=frames())
    def one(frame):
        nonlocal ws
        kind, payload = frame
        try:
            ws.send(payload)
            reply = json.loads(ws.recv(timeout=timeout))
            outcomes[f"reply:{reply.get('type')}"] += 1
        except TimeoutError:
            outcomes["no reply"] += 1
            failures.append(f"no reply to {kind} {payload[:80]!r}")
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            outcomes[f"closed:{code}"] += 1
            if code == 1011:
                failures.append(f"internal error on {kind} {payload[:80]!r}")
            ws = connect(url, max_size=2**22)
        healthy.step()
        total = sum(outcomes.values())
        if total % 250 == 0:
            rss.append(round(_rss_mb(pid), 1))

    one()
    ws.close()
    return {
        "frames": sum(outcomes.values()),
        "outcomes": dict(outcomes),
        "failures": failures[:20],
        "failure_count": len(failures),
        "healthy_steps": healthy.steps,
        "healthy_failures": healthy.failures,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=5000, help="HTTP requests to send.")
    ap.add_argument("--frames", type=int, default=2000, help="WebSocket frames to send.")
    ap.add_argument("--seed", type=int, default=0, help="Seed of the generated inputs.")
    ap.add_argument("--timeout", type=float, default=10.0, help="Seconds to wait for a reply.")
    ap.add_argument("--out", default=None, help="Also write the JSON report here.")
    args = ap.parse_args()
    with served(max_sessions=16) as (port, proc):
        base = f"http://127.0.0.1:{port}"
        rss = [round(_rss_mb(proc.pid), 1)]
        t0 = time.monotonic()
        http = fuzz_http(base, args.requests, args.seed, proc.pid, rss)
        t1 = time.monotonic()
        ws = fuzz_ws(
            f"ws://127.0.0.1:{port}/ws", args.frames, args.seed, proc.pid, rss, args.timeout
        )
        t2 = time.monotonic()
        with urllib.request.urlopen(f"{base}/health", timeout=5) as r:
            health = json.loads(r.read())
        rss.append(round(_rss_mb(proc.pid), 1))
    report = {
        "http": {**http, "seconds": round(t1 - t0, 1)},
        "websocket": {**ws, "seconds": round(t2 - t1, 1)},
        "health_after": health,
        "rss_mb": rss,
        "ok": http["server_error_count"] == 0
        and ws["failure_count"] == 0
        and ws["healthy_failures"] == 0
        and health.get("status") == "healthy",
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
