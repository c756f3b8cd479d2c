"""A real server on loopback, real WebSocket clients: games, isolation, the secret, and bad
input."""

import json
import urllib.request

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from wordle_rl.environment.client import EnvServerError, RemoteEnv
from wordle_rl.environment.env import EnvConfig
from wordle_rl.environment.prompts import PromptStyle
from wordle_rl.environment.server import ServerConfig, ServerThread


@pytest.fixture(scope="module")
def server():
    cfg = ServerConfig(
        port=0,
        max_sessions=4,
        idle_timeout_s=1.5,
        max_message_bytes=4096,
        env=EnvConfig(style=PromptStyle("xml", think=False)),
    )
    with ServerThread(cfg) as srv:
        yield srv


def _raw(url):
    return connect(url.replace("http://", "ws://") + "/ws", open_timeout=5)


def test_health(server):
    with urllib.request.urlopen(server.url + "/health", timeout=5) as r:
        assert json.loads(r.read())["status"] == "healthy"


def test_full_game_secret_only_at_end(server):
    with RemoteEnv(server.url) as env:
        obs = env.reset(answer="abide")
        assert "abide" not in json.dumps(obs.messages) + json.dumps(obs.state)
        s = env.step("<guess>speed</guess>")
        assert s.info["pattern"] == "XXYXY" and "abide" not in json.dumps(s.info) + json.dumps(
            s.observation.state
        )
        assert "answer" not in json.dumps(env.state())
        s = env.step("<guess>abide</guess>")
        assert s.done and s.info["won"] and s.info["answer"] == "abide"


def test_seeded_reset_is_reproducible(server):
    seen = []
    for _ in range(2):
        with RemoteEnv(server.url) as env:
            env.reset(seed=11)
            for _ in range(6):
                s = env.step("<guess>zzzzz</guess>")  # invalid: costs a turn, reveals nothing
                if s.done:
                    break
            seen.append(s.info["answer"])
    assert seen[0] == seen[1]


def test_sessions_are_isolated(server):
    with RemoteEnv(server.url) as a, RemoteEnv(server.url) as b:
        a.reset(answer="abide")
        b.reset(answer="crane")
        a.step("<guess>slate</guess>")
        assert b.state()["history"] == []  # b sees only its own game
        sb = b.step("<guess>crane</guess>")
        assert sb.done and sb.info["answer"] == "crane"
        assert a.state()["turn"] == 1 and not a.state()["done"]
    # attaching to another session by id is refused
    with pytest.raises(InvalidStatus):
        connect(server.url.replace("http://", "ws://") + "/ws?session_id=anything", open_timeout=5)


def test_bad_input_gets_errors_and_server_survives(server):
    with _raw(server.url) as ws:

        def ask(raw):
            ws.send(raw)
            return json.loads(ws.recv(timeout=5))

        assert ask("{not json")["data"]["code"] == "INVALID_JSON"
        assert ask(json.dumps({"type": "launch"}))["data"]["code"] == "UNKNOWN_TYPE"
        r = ask(json.dumps({"type": "step", "data": {"message": "<guess>crane</guess>"}}))
        assert r["type"] == "error" and "reset" in r["data"]["message"]
        assert ask(json.dumps({"type": "step", "data": {"wrong": 1}}))["type"] == "error"
        r = ask(
            json.dumps(
                {"type": "step", "data": {"type": "call_tool", "tool_name": "x", "arguments": {}}}
            )
        )
        assert r["type"] == "error"
        r = ask("x" * 5000)
        assert r["data"]["code"] == "MESSAGE_TOO_LARGE"
        assert ask(json.dumps({"type": "reset", "data": {"answer": "qqqqq"}}))["type"] == "error"
        assert ask(json.dumps({"type": "reset", "data": {"history": "crane"}}))["type"] == "error"
        assert (
            ask(json.dumps({"type": "reset", "data": {"answer": "abide"}}))["type"] == "observation"
        )
        r = ask(json.dumps({"type": "step", "data": {"message": "<guess>qqqqq</guess>"}}))
        assert (
            r["type"] == "observation"
            and r["data"]["observation"]["info"]["error"] == "not_in_word_list"
        )
    with RemoteEnv(server.url) as env:  # still serving
        env.reset(seed=0)


def test_capacity_busy_error(server):
    envs = [RemoteEnv(server.url) for _ in range(4)]
    try:
        for e in envs:
            e.reset(seed=1)
        extra = RemoteEnv(server.url)
        with pytest.raises((EnvServerError, ConnectionError)) as err:
            extra.reset(seed=1)
        assert "CAPACITY_REACHED" in str(err.value) or "capacity" in str(err.value).lower()
    finally:
        for e in envs:
            e.close()


def test_idle_sessions_expire(server):
    import time

    with _raw(server.url) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"seed": 3}}))
        json.loads(ws.recv(timeout=5))
        time.sleep(2.0)
        r = json.loads(ws.recv(timeout=5))
        assert r["data"]["code"] == "IDLE_TIMEOUT"


def test_dead_endpoint_is_a_clear_error():
    with pytest.raises(ConnectionError, match="cannot reach the wordle-rl server"):
        RemoteEnv("http://127.0.0.1:9", timeout=2)


def _lose(env) -> str:
    """Play a game to its end on refused moves (they reveal nothing) and return the secret it then
    discloses."""
    for _ in range(6):
        s = env.step("<guess>zzzzz</guess>")
        if s.done:
            return s.info["answer"]
    raise AssertionError("the game did not end")


def test_blind_server_secrets_are_not_predictable_from_what_a_client_sends():
    """An agent under evaluation tries what it could to learn the secret before it plays: choose a
    seed, choose the answer, replay a reset it already saw. The blind server refuses the first two
    and draws every secret itself."""
    from wordle_rl.engine.words import load_word_lists

    answers = load_word_lists().answers
    with ServerThread(ServerConfig(port=0, allow_answer=False)) as srv:
        with RemoteEnv(srv.url) as env:
            for data in ({"seed": 7}, {"answer": "crane"}, {"history": [["crane", None]]}):
                with pytest.raises(EnvServerError, match="blind|does not let clients choose"):
                    env.reset(**data)
        seen = []
        for _ in range(12):
            with RemoteEnv(srv.url) as env:
                env.reset()
                seen.append(_lose(env))
    assert all(a in answers for a in seen)
    # the same plain reset gives different secrets (12 equal draws from 2,315 words: odds below
    # 1e-36)
    assert len(set(seen)) > 1


def test_http_bad_input_is_a_4xx_with_the_reason():
    """OpenEnv's HTTP endpoints make a fresh environment per request: a step there has no game in
    play, and the answer says so with a 400 rather than a 500."""
    import urllib.error

    def post(url, body):
        req = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    with ServerThread(ServerConfig(port=0, allow_answer=False)) as srv:
        code, body = post(srv.url + "/step", {"action": {"message": "<guess>crane</guess>"}})
        assert code == 400 and "send a reset first" in body["detail"]
        code, body = post(srv.url + "/reset", {"seed": 3})
        assert code == 400 and "blind" in body["detail"]
        code, body = post(srv.url + "/reset", {})
        assert code == 200 and "answer" not in json.dumps(body["observation"]["state"])


def test_metadata_describes_the_game_as_this_server_plays_it(server):
    with urllib.request.urlopen(server.url + "/metadata", timeout=5) as r:
        meta = json.loads(r.read())
    assert meta["name"] == "wordle" and "5-letter" in meta["description"]
    readme = meta["readme_content"]
    assert "6 guesses" in readme and "hard mode off" in readme and "Prompt style: xml" in readme
    assert "random.Random(seed)" in readme  # this server lets clients seed games
    with ServerThread(
        ServerConfig(port=0, allow_answer=False, env=EnvConfig(max_turns=5, hard=True))
    ) as blind:
        with urllib.request.urlopen(blind.url + "/metadata", timeout=5) as r:
            readme = json.loads(r.read())["readme_content"]
    assert "5 guesses" in readme and "hard mode on" in readme and "takes no seed" in readme


def test_openenv_typed_client_plays_sync_and_async(server):
    import asyncio

    from wordle_rl.environment.client import (
        WordleAction,
        WordleClient,
        WordleObservation,
        WordleState,
    )

    with WordleClient(base_url=server.url).sync() as env:
        r = env.reset(answer="abide")
        assert isinstance(r.observation, WordleObservation) and not r.done and r.reward is None
        r = env.step(WordleAction(message="<guess>speed</guess>"))
        assert r.observation.info["pattern"] == "XXYXY" and "abide" not in json.dumps(
            r.observation.state
        )
        state = env.state()
        assert isinstance(state, WordleState) and state.turn == 1 and not state.done
        r = env.step(WordleAction(message="<guess>abide</guess>"))
        assert r.done and r.reward > 1 and r.observation.info["answer"] == "abide"

    async def play():
        async with WordleClient(base_url=server.url) as env:
            await env.reset(seed=5)
            # the server's refusal keeps its reason
            with pytest.raises(EnvServerError, match="answer"):
                await env.reset(answer="qqqqq")
            return await env.step(WordleAction(message="<guess>crane</guess>"))

    assert asyncio.run(play()).observation.state["turn"] == 1


def test_eval_plays_the_same_games_on_the_server_as_in_process():
    from wordle_rl.data.splits import make_splits
    from wordle_rl.engine.solvers import EntropySolver
    from wordle_rl.engine.words import load_word_lists
    from wordle_rl.evaluation.evaluate import EvalConfig, SolverPolicy, run_eval

    words = load_word_lists()
    answers = make_splits(words, seed=0).test[:12]
    policy = SolverPolicy(EntropySolver(words), PromptStyle("xml", think=False))
    cfg = ServerConfig(port=0, env=EnvConfig(style=PromptStyle("xml", think=False)))
    with ServerThread(cfg) as srv:  # every game of the split holds a session at once
        runs = [
            run_eval(
                policy,
                answers,
                EvalConfig(style="xml", think=False, train_sample=False, env_url=url),
                None,
                words,
            )
            for url in (None, srv.url)
        ]
    local, served = (r["metrics"] for r in runs)
    assert local == served and local["games"] == 12 and local["win_rate"] == 1.0
