"""The server fuzz benchmark, small: generated HTTP requests (from the server's own OpenAPI
description) and WebSocket frames against a real ``wordle-rl serve`` process on loopback."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_fuzzed_server_answers_every_input_without_a_server_error(tmp_path):
    out = tmp_path / "fuzz.json"
    cmd = [sys.executable, "benchmarks/bench_fuzz_server.py", "--requests", "200"]
    subprocess.run([*cmd, "--frames", "150", "--out", str(out)], cwd=ROOT, check=True, timeout=900)
    report = json.loads(out.read_text())
    http, ws = report["http"], report["websocket"]
    assert http["requests"] >= 200 and http["server_error_count"] == 0
    # invalid inputs were generated and refused as the client's error
    assert sum(v for k, v in http["status_codes"].items() if k.startswith("4")) > 0
    assert ws["frames"] == 150 and ws["failure_count"] == 0
    assert ws["outcomes"].get("reply:error", 0) > 0
    assert ws["healthy_steps"] == 150 and ws["healthy_failures"] == 0
    assert report["health_after"] == {"status": "healthy"} and report["ok"]
