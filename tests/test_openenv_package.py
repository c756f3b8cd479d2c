"""The repository as an OpenEnv environment package: OpenEnv's own validator, static (the manifest)
and runtime (a real server on loopback), and the app the manifest names."""

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from wordle_rl.environment.server import GuardMiddleware, ServerConfig, ServerThread

ROOT = Path(__file__).resolve().parents[1]


def _openenv(*args: str) -> dict:
    exe = shutil.which("openenv") or str(Path(sys.executable).with_name("openenv"))
    run = subprocess.run(
        [exe, "validate", *args, "--json"], capture_output=True, text=True, timeout=120
    )
    assert run.stdout.strip(), run.stderr
    return json.loads(run.stdout)


def test_openenv_validate_static_passes_on_the_repository():
    report = _openenv(str(ROOT), "--level", "static")
    assert report["verdict"] == "pass", report["results"]
    assert report["manifest"]["name"] == "wordle"


@pytest.mark.slow
def test_openenv_validate_runtime_passes_against_a_served_environment():
    with ServerThread(ServerConfig(port=0)) as srv:
        report = _openenv("--url", srv.url, "--level", "runtime")
    assert report["passed"], report["summary"]
    ids = {c["id"] for c in report["criteria"] if c["passed"]}
    assert {"health_endpoint", "metadata_endpoint", "schema_endpoint"} <= ids and len(ids) >= 6
    assert report["summary"]["failed_criteria"] == []


def test_manifest_app_is_the_default_server_built_on_first_access():
    manifest = yaml.safe_load((ROOT / "openenv.yaml").read_text())
    module, attr = manifest["app"].split(":")
    server = importlib.import_module(module)
    app = getattr(server, attr)
    assert isinstance(app, GuardMiddleware) and getattr(server, attr) is app
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        server.nope  # noqa: B018
    assert (ROOT / "server" / "Dockerfile").is_file()  # where `openenv build` looks first
