"""Shared pytest helpers: where the built programs and the test assets are.

FOLIO_BUILD names the build directory under test (the normal or the ASan
build); every program is in its bin/ folder. The repository's assets/
folder holds the tokenizer files, model shapes and ShareGPT data."""
import os
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
BUILD = pathlib.Path(os.environ.get("FOLIO_BUILD", REPO / "build"))
ASSETS = REPO / "assets"

sys.path.insert(0, str(REPO / "tests" / "fixtures"))
sys.path.insert(0, str(REPO / "tests" / "reference"))


def bin_path(name: str) -> pathlib.Path:
    """The built program NAME (folio, folio-scheduler, a tests/tools driver...)."""
    p = BUILD / "bin" / name
    if not p.exists():
        pytest.fail(f"{p} is not built: build {BUILD} first (cmake --build)")
    return p


@pytest.fixture(scope="session")
def assets_dir() -> pathlib.Path:
    return ASSETS


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> pathlib.Path:
    """The default tiny Llama (2 layers, hidden 64, GQA 4/2, bf16) with the Llama-2 tokenizer."""
    from make_tiny_model import make_tiny_model

    out = tmp_path_factory.mktemp("tiny-model")
    make_tiny_model(str(out))
    return out


def smollm2_gguf() -> pathlib.Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF), which deploy/setup.sh fetches into models/smollm2/; a
    test that needs it fails without it."""
    import tokenizer_refs

    try:
        return tokenizer_refs.smollm2_gguf()
    except tokenizer_refs.Missing as e:
        pytest.fail(str(e))
