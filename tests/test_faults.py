"""Faults and bad files: the main job killed at fixed points and resumed whole, a disk that fills
while saving, data made with another splits file, a run folder written by another config or
version. Each ends in one clear line and leaves nothing half-written."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wordle_rl.cli.main import app
from wordle_rl.data.files import save_dataset
from wordle_rl.data.sft_games import SftConfig, generate_sft
from wordle_rl.data.splits import make_splits
from wordle_rl.engine.storage import stale_temps, write_atomic
from wordle_rl.pipeline.config import load_config
from wordle_rl.pipeline.machine import run_apart

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def error_lines(output: str) -> list[str]:
    assert "Traceback" not in output, output
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_the_quick_job_killed_in_four_stages_resumes_to_a_whole_run(tmp_path):
    # SIGKILL as soon as each path appears: mid-SFT (a checkpoint folder being written), at the
    # first GRPO val record, mid-evaluation and at the report's first plot; then the same command
    # again
    out = tmp_path / "kills.json"
    points = ["sft/checkpoint-*", "grpo/val_eval.jsonl", "eval/test/sft-free", "plots/*.png"]
    cmd = [sys.executable, "benchmarks/bench_kill_pipeline.py", "--workdir", str(tmp_path / "w")]
    cmd += [x for p in points for x in ("--at", p)] + ["--out", str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True, timeout=900, capture_output=True)
    report = json.loads(out.read_text())
    (job,) = report["jobs"]
    assert job["kills"] == 4 and job["starts"] == 5 and job["exit"] == 0
    assert report["kills_by_stage"] == {"sft": 1, "grpo": 1, "eval": 1, "report": 1}
    assert job["problems"] == [] and report["ok"]


class _TwoPartError(Exception):
    def __init__(self, what, where):
        super().__init__(f"{what} at {where}")


def _raise_two_part_error():
    raise _TwoPartError("a broken thing", "step 3")


def test_a_training_stage_process_that_dies_is_one_error_and_dies_with_its_pipeline():
    """A pipeline training stage runs in a process of its own: one that dies without a word is a
    RuntimeError naming its exit code, and one whose pipeline is killed or interrupted stops with
    it."""
    with pytest.raises(RuntimeError, match="the sft process ended with exit code 3 before it"):
        run_apart(os._exit, 3, name="sft")
    with pytest.raises(RuntimeError, match="_TwoPartError: a broken thing at step 3"):
        run_apart(_raise_two_part_error, name="sft")  # an error that cannot be unpickled
    for how in (signal.SIGKILL, signal.SIGINT):  # killed, or interrupted alone (not its group)
        parent, pids = _stage_parent()
        parent.send_signal(how)
        assert parent.wait(timeout=30) != 0
        for _ in range(100):
            alive = [p for p in pids if _state(p) != "Z"]
            if not alive:
                break
            time.sleep(0.1)
        assert alive == [], how


def _stage_parent() -> tuple[subprocess.Popen, list[str]]:
    """A Python process in :func:`run_apart` of a five-minute stage, and its two children's pids
    (the stage's process and multiprocessing's resource tracker)."""
    code = (  # SIGINT raises KeyboardInterrupt even where the suite runs with it ignored
        "import signal, time, wordle_rl.pipeline.machine as m\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "m.run_apart(time.sleep, 300)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.DEVNULL)
    children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children")
    pids: list[str] = []
    for _ in range(300):
        pids = children.read_text().split()
        if len(pids) == 2:
            break
        time.sleep(0.1)
    assert len(pids) == 2
    return parent, pids


def _state(pid: str) -> str:
    """A process's state letter (Z: a zombie, already dead), or "Z" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "Z"


def test_a_write_killed_before_its_rename_leaves_nothing_once_the_file_is_written_again(tmp_path):
    # a real process killed with SIGKILL between writing its temporary file and renaming it
    target = tmp_path / "results.json"
    script = (
        "import os, sys, time\n"
        "from wordle_rl.engine.storage import write_atomic\n"
        "os.replace = lambda *a: (print('written', flush=True), time.sleep(600))\n"
        "write_atomic(sys.argv[1], 'half')\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(target)], stdout=subprocess.PIPE)
    assert child.stdout.readline() == b"written\n"
    child.kill()
    child.wait(timeout=60)
    (left,) = stale_temps(target)
    assert left.read_text() == "half" and not target.exists()
    live = tmp_path / f".results.json.{os.getpid()}.x.tmp"  # a writer still at work: kept
    live.write_text("")
    write_atomic(target, "{}")
    assert target.read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["results.json", live.name])


def in_small_disk(tmp_path: Path, script: str) -> None:
    """Run ``script`` (sh) with ``$DISK`` a 1 MiB tmpfs of its own mount namespace; skip where
    this machine lets no test make one."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if shutil.which("unshare") is None:
        pytest.skip("no unshare here to make a small filesystem")
    mount = f"mount -t tmpfs -o size=1m tmpfs {disk} || exit 90\nDISK={disk}\n"
    r = subprocess.run(["unshare", "-rm", "sh", "-c", mount + script], timeout=600)
    if r.returncode == 90:
        pytest.skip("this machine lets no test mount a small filesystem")
    assert r.returncode == 0


def test_a_full_disk_while_saving_is_one_line_and_a_resume_loses_nothing(tmp_path, micro):
    wordle = str(Path(sys.executable).with_name("wordle-rl"))
    splits, data = tmp_path / "splits.json", tmp_path / "sft"
    make_splits(seed=0).save(splits)
    save_dataset(generate_sft(make_splits(seed=0), SftConfig(games=64, seed=0)), data, "sft")
    logs = tmp_path / "logs"
    logs.mkdir()
    train = (
        f"{wordle} sft --model {micro} --data {data} --splits {splits} --output-dir $DISK/sft "
        "--max-steps 4 --save-steps 2 --per-device-train-batch-size 4 --threads 1"
    )
    # 2,000 games do not fit in 1 MiB; in 2.5 MiB SFT fills the disk at its second checkpoint
    # (1.6 MB each); with room again it resumes from the first, the last whole one
    in_small_disk(
        tmp_path,
        f"{wordle} data sft --games 2000 --splits {splits} --out $DISK/games > {logs}/data 2>&1\n"
        f"echo $? > {logs}/data.rc\n"
        f"ls -A $DISK/games > {logs}/games.ls\n"
        f"mount -o remount,size=2560k tmpfs $DISK || exit 91\n"  # one checkpoint and a bit
        f"{train} > {logs}/full 2>&1; echo $? > {logs}/full.rc\n"
        f"mount -o remount,size=64m tmpfs $DISK || exit 91\n"
        f"{train} --resume > {logs}/resumed 2>&1; echo $? > {logs}/resumed.rc\n"
        f"cp -r $DISK/sft {tmp_path}/sft-out\n",
    )
    read = lambda name: (logs / name).read_text()  # noqa: E731
    assert read("data.rc").strip() == "2" and read("games.ls") == ""
    (line,) = error_lines(read("data"))
    assert "sft.jsonl: no space left on the disk" in line
    assert read("full.rc").strip() == "2", read("full")
    (line,) = error_lines(read("full"))
    assert "no space left on the disk" in line and "--resume" in line
    assert read("resumed.rc").strip() == "0", read("resumed")
    out = tmp_path / "sft-out"
    for ckpt in out.glob("checkpoint-*"):
        json.loads((ckpt / "trainer_state.json").read_text())
    log = json.loads((out / "wordle_rl_sft_log.json").read_text())
    assert max(e["step"] for e in log) == 4
    from wordle_rl.models.embedded import load_model

    load_model(str(out), threads=1)


def test_data_made_with_another_splits_file_is_one_line_before_any_training(tmp_path, micro):
    data, same, other = tmp_path / "sft", tmp_path / "same.json", tmp_path / "other.json"
    make_splits(seed=0).save(same)
    make_splits(seed=1).save(other)
    args = ["--games", "64", "--out", str(data)]
    assert runner.invoke(app, ["data", "sft", "--splits", str(same), *args]).exit_code == 0
    for cmd in (
        ["data", "check", str(data / "sft.jsonl"), "--splits", str(other)],
        ["sft", "--model", str(micro), "--data", str(data), "--splits", str(other),
         "--output-dir", str(tmp_path / "run"), "--max-steps", "1"],
    ):  # fmt: skip
        r = runner.invoke(app, cmd)
        (line,) = error_lines(r.output)
        assert r.exit_code == 2 and f"made with other splits (seed 0) than {other}" in line
    assert not (tmp_path / "run").exists()
    # with the splits file it was made with, the check passes (recall games on outside words)
    check = ["data", "check", str(data / "sft.jsonl"), "--splits", str(same), "--allow-outside"]
    r = runner.invoke(app, check)
    assert r.exit_code == 0, r.output


def test_a_run_folder_of_another_config_or_version_is_refused_by_name(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    saved = json.loads(json.dumps(asdict(load_config("quick"))))
    saved["sft"]["settings"]["max_steps"] = 99
    (out / "config.json").write_text(json.dumps(saved))
    (out / "versions.json").write_text(json.dumps({"wordle-rl": "0.0.1"}))
    r = runner.invoke(app, ["pipeline", "--config", "quick", "--out", str(out)])
    (line,) = error_lines(r.output)
    assert r.exit_code == 2 and "different config" in line
    assert "sft.settings.max_steps: 99 -> 30" in line and "wordle-rl 0.0.1 wrote it" in line
    (out / "config.json").write_text('{"name": "qu')
    r = runner.invoke(app, ["pipeline", "--config", "quick", "--out", str(out)])
    (line,) = error_lines(r.output)
    assert r.exit_code == 2 and "config.json: not a saved config" in line
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "versions.json"]


def test_a_damaged_checkpoint_is_one_line_naming_it(tmp_path, micro):
    splits, data, out = tmp_path / "splits.json", tmp_path / "sft", tmp_path / "run"
    make_splits(seed=0).save(splits)
    save_dataset(generate_sft(make_splits(seed=0), SftConfig(games=32, seed=0)), data, "sft")
    args = ["sft", "--model", str(micro), "--data", str(data), "--splits", str(splits)]
    args += ["--output-dir", str(out), "--max-steps", "2", "--save-steps", "2", "--threads", "1"]
    assert runner.invoke(app, args).exit_code == 0
    weights = out / "checkpoint-2" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    r = runner.invoke(app, [*args, "--resume"])
    (line,) = error_lines(r.output)
    assert r.exit_code == 2 and f"{out / 'checkpoint-2'}: its weights are damaged" in line, r.output


def test_a_grpo_run_a_budget_ends_records_its_last_step_and_keeps_best_val_whole(
    tmp_path, trained_micro
):
    from wordle_rl.evaluation.val_callback import (
        BEST_FILE,
        PREV_DIR,
        read_records,
        val_callbacks,
    )
    from wordle_rl.training.grpo import run_grpo
    from wordle_rl.training.grpo_config import WordleGRPOConfig

    root, model_path = trained_micro
    splits = tmp_path / "splits.json"
    make_splits(seed=0).save(splits)
    cfg = WordleGRPOConfig(
        model=str(model_path),
        data=str(root / "rl"),
        output_dir=str(tmp_path / "grpo"),
        splits=str(splits),
        sft_coef=0.0,
        num_generations=2,
        per_device_train_batch_size=4,
        max_turn_tokens=10,
        max_steps=100,
        time_budget_minutes=0.001,  # ends it after its first step
        eval_val_every=50,
        eval_val_games=4,
        eval_val_batch_size=3,  # a batch of 3, then one of 1
        threads=1,
        save_steps=50,
    )
    out = run_grpo(cfg, callbacks=val_callbacks(cfg))
    steps = [r["step"] for r in read_records(out)]
    last = json.loads(next(out.glob("checkpoint-*/trainer_state.json")).read_text())["global_step"]
    assert steps == [0, last] and 0 < last < 100
    assert [r["games"] for r in read_records(out)] == [4, 4]
    best = json.loads((out / BEST_FILE).read_text())
    assert best["step"] in steps and not (out / PREV_DIR).exists()
