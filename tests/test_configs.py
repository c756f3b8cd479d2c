"""Config files: the pipeline presets load and mean what they say; scaling-out files load with
accelerate."""

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


PRESET_DIR = Path(__file__).resolve().parents[1] / "src" / "wordle_rl" / "pipeline" / "presets"
PRESET_FILES = sorted(PRESET_DIR.glob("*.yaml"))


def test_pipeline_presets_are_the_package_config_files(tmp_path):
    """Each preset is a YAML file in the package; its values override the dataclass defaults,
    nothing else."""
    import yaml

    from wordle_rl.pipeline.config import PRESETS, ConfigError, PipelineConfig, load_config

    assert sorted(p.stem for p in PRESET_FILES) == sorted(PRESETS)
    for path in PRESET_FILES:
        values = yaml.safe_load(path.read_text())
        cfg = load_config(path.stem)
        assert cfg.name == path.stem == values["name"]
        for section, table in values.items():
            if not isinstance(table, dict):
                continue
            for key, value in table.items():
                got = getattr(cfg, section)
                if section in ("sft", "grpo", "control") and key != "enabled":
                    got = got.settings  # a stage section holds its config class's fields
                got = got[key] if isinstance(got, dict) else getattr(got, key)
                assert got == value, (path.stem, section, key)
    # the main job is the dataclasses' defaults
    assert load_config("cpu-default") == PipelineConfig()
    (tmp_path / "bad.yaml").write_text("sft: [unclosed\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_config(str(tmp_path / "bad.yaml"))


def test_a_preset_starts_from_another(monkeypatch):
    """``preset:`` in a package preset merges its base first, key by key: smollm2-gpu is
    smollm2-cpu wherever it says nothing, and a chain that comes back to itself is refused."""
    import yaml

    from wordle_rl.pipeline import config
    from wordle_rl.pipeline.config import ConfigError, load_config

    own = yaml.safe_load((PRESET_DIR / "smollm2-gpu.yaml").read_text())
    assert own.pop("preset") == "smollm2-cpu"
    gpu, cpu = load_config("smollm2-gpu"), load_config("smollm2-cpu")
    assert gpu.data.sft == cpu.data.sft and gpu.model == cpu.model
    assert gpu.data.rl["rows"] == own["data"]["rl"]["rows"] != cpu.data.rl["rows"]
    for stage in ("sft", "grpo"):
        mine, base = getattr(gpu, stage).settings, getattr(cpu, stage).settings
        assert {k: v for k, v in mine.items() if k not in own[stage]} == {
            k: v for k, v in base.items() if k not in own[stage]
        }
        assert all(mine[k] == v for k, v in own[stage].items())
    for key in ("decodes", "solvers", "max_new_tokens"):
        assert getattr(gpu.eval, key) == getattr(cpu.eval, key)
    assert gpu.control == cpu.control

    loops = {"quick": {"preset": "gpu-qwen3"}, "gpu-qwen3": {"preset": "quick"}}
    monkeypatch.setattr(config, "preset_values", lambda name: dict(loops[name]))
    with pytest.raises(ConfigError, match="starts from itself: quick -> gpu-qwen3 -> quick"):
        load_config("quick")
