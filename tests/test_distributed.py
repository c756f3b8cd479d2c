"""Two processes on the CPU with the project's multi-GPU accelerate config (``accelerate launch
--config_file configs/accelerate/multi_gpu.yaml --num_processes 2``: without CUDA, torchrun starts
the processes and they talk over gloo; accelerate's ``--cpu`` flag alone starts a single process).
SFT and GRPO keep identical weights on both ranks (in SFT one rank starts 2 s late, and the schedule
follows the time spent), the ranks play different games and draw different SFT batches, one
checkpoint is written per save, and a GRPO run resumes from its checkpoint."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("distributed_worker.py")
CONFIG = Path(__file__).resolve().parents[1] / "configs" / "accelerate" / "multi_gpu.yaml"


def _launch(*args: str) -> None:
    exe = shutil.which("accelerate") or str(Path(sys.executable).with_name("accelerate"))
    cmd = [
        exe,
        "launch",
        "--config_file",
        str(CONFIG),
        "--num_processes",
        "2",
        "--mixed_precision",
        "no",
        str(WORKER),
        *args,
    ]
    run = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "OMP_NUM_THREADS": "1"},
    )
    assert run.returncode == 0, run.stderr[-3000:]


def _records(out: Path) -> dict[int, list[dict]]:
    recs = {
        r: [json.loads(line) for line in (out / f"rank{r}.jsonl").read_text().splitlines()]
        for r in (0, 1)
    }
    assert all(x["processes"] == 2 for r in recs.values() for x in r)
    return recs


def _checkpoints(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob("checkpoint-*"))


@pytest.mark.slow
def test_two_process_sft_and_grpo_with_resume(trained_micro, tmp_path):
    root, model_path = trained_micro
    sft_out = tmp_path / "sft"
    _launch("sft", str(model_path), str(root / "sft"), str(sft_out))
    recs = _records(sft_out)
    assert [x["step"] for x in recs[0]] == [x["step"] for x in recs[1]] == [1, 2, 3, 4]
    assert [x["weights"] for x in recs[0]] == [
        x["weights"] for x in recs[1]
    ]  # gradients all-reduced
    assert len({x["weights"] for x in recs[0]}) == 4  # and every step moved them
    assert (
        _checkpoints(sft_out) == ["checkpoint-2", "checkpoint-4"]
        and (sft_out / "model.safetensors").is_file()
    )
    assert sorted(p.name for p in (sft_out / "checkpoint-4").glob("rng_state*")) == [
        "rng_state_0.pth",
        "rng_state_1.pth",
    ]

    grpo_out = tmp_path / "grpo"
    _launch("grpo", str(model_path), str(root / "rl"), str(grpo_out), str(root / "sft"))
    recs = _records(grpo_out)
    for a, b in zip(recs[0], recs[1]):
        assert a["step"] == b["step"] and a["weights"] == b["weights"]
        assert a["rows"] and sorted(map(json.dumps, a["rows"])) != sorted(
            map(json.dumps, b["rows"])
        )
        assert a["sft_games"] and a["sft_games"] != b["sft_games"]  # each rank its own SFT batch
    assert [x["step"] for x in recs[0]] == [1, 2] and _checkpoints(grpo_out) == ["checkpoint-2"]

    _launch("grpo", str(model_path), str(root / "rl"), str(grpo_out), str(root / "sft"), "--resume")
    recs = _records(grpo_out)
    # went on from step 2
    assert [x["step"] for x in recs[0]] == [x["step"] for x in recs[1]] == [1, 2, 3]
    assert recs[0][-1]["weights"] == recs[1][-1]["weights"]
    state = json.loads((grpo_out / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
