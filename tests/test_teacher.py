"""Teacher traces through the openai client against a real OpenAI-compatible HTTP server on loopback
with scripted replies, including ones that return garbage, hang, drop the connection, or answer 500
and 429."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from wordle_rl.data.files import read_jsonl
from wordle_rl.data.teacher import (
    TeacherConfig,
    play_teacher_games,
    summarize_teacher,
    teacher_to_sft,
)


class Script:
    """Fault injection: ``mode`` applies to the next ``failures_left`` requests (always for
    always_garbage)."""

    def __init__(self):
        self.mode = "ok"
        self.failures_left = 0
        self.calls = 0
        self.lock = threading.Lock()


def _handler(script: Script):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with script.lock:
                script.calls += 1
                failing = script.failures_left > 0
                if failing:
                    script.failures_left -= 1
            mode = script.mode if failing or script.mode == "always_garbage" else "ok"
            if mode in ("garbage", "always_garbage"):
                self._send(200, b"<html>not json</html>")
                return
            if mode == "hang":
                threading.Event().wait(3)
                self._send(200, b"{}")
                return
            if mode == "drop":
                self.connection.close()
                return
            if mode == "http500":
                self._send(500, b'{"error": "overloaded"}')
                return
            if mode == "http429":
                self._send(429, b'{"error": "rate limited"}', retry_after="0")
                return
            # scripted teacher: turn 1 guesses 'slate', turn 2 'qqqqq' (invalid) for 'crane' games,
            # then the answer
            turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
            answer = self.server.answer_for(body)
            guess = (
                ["slate", "qqqqq", answer][min(turns, 2)]
                if answer == "crane"
                else ["slate", answer][min(turns, 1)]
            )
            text = f"<think>turn {turns}</think><guess>{guess}</guess>"
            self._send(
                200,
                json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": text}}]}
                ).encode(),
            )

        def _send(self, code, data, retry_after=None):
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return H


@pytest.fixture()
def teacher_server():
    script = Script()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    games = {}
    from wordle_rl.engine.game import score
    from wordle_rl.environment.prompts import PromptStyle, feedback_message

    # the scripted teacher recognises its game's answer by the feedback to its first guess, SLATE,
    # as the default prompt style writes it

    def answer_for(body):
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        if len(users) < 2:
            return "slate"
        for a in games["answers"]:
            if users[1] == feedback_message(PromptStyle(), [("slate", score("slate", a))], 1):
                return a
        return "crane"

    server.answer_for = answer_for
    server.daemon_threads = True
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", script, games
    server.shutdown()


def _cfg(url, **kw):
    return TeacherConfig(
        base_url=url, model="scripted", concurrency=2, timeout_s=1.0, retries=2, **kw
    )


def test_games_appended_and_rerun_skips(teacher_server, tmp_path):
    url, script, games = teacher_server
    games["answers"] = ["crane", "abide", "light"]
    out = tmp_path / "games.jsonl"
    counts = play_teacher_games(_cfg(url), games["answers"], out)
    assert counts == {"skipped": 0, "played": 3, "errors": 0}
    rows = read_jsonl(out)
    by = {r["answer"]: r for r in rows}
    assert by["crane"]["won"] and by["crane"]["turns"] == 3 and by["crane"]["format_errors"] == 1
    assert by["abide"]["won"] and by["abide"]["turns"] == 2 and by["abide"]["format_errors"] == 0
    calls = script.calls
    again = play_teacher_games(_cfg(url), games["answers"], out)
    assert again["skipped"] == 3 and script.calls == calls and len(read_jsonl(out)) == 3
    # a crash cut the last line short: it goes, that game is played again, every line is whole
    text = out.read_text()
    out.write_text(text[: text.rindex('{"answer"') + 20])
    torn = play_teacher_games(_cfg(url), games["answers"], out)
    assert torn["skipped"] == 2 and torn["played"] == 1 and len(read_jsonl(out)) == 3
    assert sorted(r["answer"] for r in read_jsonl(out)) == sorted(games["answers"])
    summary = summarize_teacher(rows)
    assert summary["crane"] == {"games": 1, "wins": 1, "format_errors": 1, "mean_turns": 3.0}
    sft = teacher_to_sft(rows, won_only=True, format_clean=True)
    assert sorted(r["answer"] for r in sft) == ["abide", "light"]
    assert all(r["messages"][-1]["role"] == "assistant" for r in sft)
    assert len(teacher_to_sft(rows, format_clean=False)) == 3
    assert len(teacher_to_sft(rows, format_clean=False, max_turns=2)) == 2


@pytest.mark.parametrize("mode", ["hang", "drop", "http500", "http429"])
def test_transient_faults_are_retried_by_the_client(teacher_server, tmp_path, mode):
    url, script, games = teacher_server
    games["answers"] = ["abide"]
    script.mode, script.failures_left = mode, 2
    counts = play_teacher_games(_cfg(url), ["abide"], tmp_path / "g.jsonl")
    assert counts["played"] == 1 and counts["errors"] == 0
    assert read_jsonl(tmp_path / "g.jsonl")[0]["won"]
    assert script.calls == 2 + 2  # two failed attempts, then the game's two turns


def test_faults_past_the_retries_record_an_error_and_a_rerun_plays_the_game(
    teacher_server, tmp_path
):
    url, script, games = teacher_server
    games["answers"] = ["abide"]
    out = tmp_path / "g.jsonl"
    script.mode, script.failures_left = "http500", 3  # one more than the 2 retries
    assert play_teacher_games(_cfg(url), ["abide"], out) == {"skipped": 0, "played": 0, "errors": 1}
    assert script.calls == 3 and "InternalServerError" in read_jsonl(out)[0]["error"]
    assert play_teacher_games(_cfg(url), ["abide"], out)["played"] == 1
    assert [r["status"] for r in read_jsonl(out)] == ["error", "done"]


def test_garbage_reply_records_error_and_rerun_plays_the_game(teacher_server, tmp_path):
    """A 200 answer that is no chat completion is not transient to the openai client: the game is
    recorded as an error at once, and the next run plays it."""
    url, script, games = teacher_server
    games["answers"] = ["abide"]
    script.mode = "always_garbage"
    out = tmp_path / "g.jsonl"
    counts = play_teacher_games(_cfg(url), ["abide"], out)
    assert counts == {"skipped": 0, "played": 0, "errors": 1}
    row = read_jsonl(out)[0]
    assert row["status"] == "error" and "not a chat completion" in row["error"]
    script.mode = "ok"
    counts = play_teacher_games(_cfg(url), ["abide"], out)
    assert counts["played"] == 1
    assert [r["status"] for r in read_jsonl(out)] == ["error", "done"]


def test_dead_endpoint(tmp_path):
    counts = play_teacher_games(_cfg("http://127.0.0.1:9/v1"), ["abide"], tmp_path / "g.jsonl")
    assert counts["errors"] == 1
    assert "APIConnectionError" in read_jsonl(tmp_path / "g.jsonl")[0]["error"]
