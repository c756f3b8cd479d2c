"""Scaling-out files load with accelerate's own loader."""

from pathlib import Path

import pytest
from accelerate.commands.config.config_args import load_config_from_file

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs" / "accelerate").glob("*.yaml"))


def test_all_present():
    assert {p.stem for p in CONFIGS} >= {"multi_gpu", "deepspeed_zero2", "deepspeed_zero3", "fsdp"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_accelerate_config_loads(path):
    cfg = load_config_from_file(str(path))
    assert cfg.num_processes >= 1 and cfg.mixed_precision == "bf16"
    assert str(cfg.distributed_type).split(".")[-1] in {"MULTI_GPU", "DEEPSPEED", "FSDP"}
    if "deepspeed" in path.stem:
        assert cfg.deepspeed_config["zero_stage"] in (2, 3)
