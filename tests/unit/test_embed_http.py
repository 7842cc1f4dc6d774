"""The OpenAI-compatible HTTP embedder, against a real loopback server and injected faults."""

from __future__ import annotations

import email.utils
import inspect
import json
import logging
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.embedders import Tokenizer, empty_text_vector, make_embedder
from ragtui.core.embedders._transport import parse_retry_after
from ragtui.core.embedders.http import HTTPEmbedder, Pace, plan_batches
from ragtui.core.embedders.http_tokenizer import align_pieces, vocab_piece_candidates
from ragtui.core.embedders.wordllama import WordLlamaEmbedder
from ragtui.core.errors import EmbeddingError, UsageError
from tests.helpers.embed_server import EmbedServer, Fault


def implements_embedder(obj) -> bool:
    """The Embedder protocol's members exist, found without running properties."""
    members = ("model", "dim", "tokenizer", "embed", "close")
    return all(inspect.getattr_static(obj, m, None) is not None for m in members)


ROOT = Path(__file__).resolve().parents[2]
EMB = "/v1/embeddings"
TEXTS = [
    "Hello world",
    "naïve café — «quotes»",
    "日本語のテキスト",
    "emoji 😀 ok 👩\u200d👩\u200d👧",
    "windows\r\nline\r\n",
    "\ttab and  spaces ",
    "a <s> b </s>",
    "word " * 300,
]
SECRET = "sk-test-5ecret-value-0123456789"


@pytest.fixture(scope="module")
def local() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


@pytest.fixture
def server(local):
    with EmbedServer(local) as srv:
        yield srv


class Clock:
    """Injected sleep and clock: records waits, never waits."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make(server, local, clock):
    made: list[HTTPEmbedder] = []

    def _make(**options) -> HTTPEmbedder:
        options.setdefault("base_url", server.url)
        options.setdefault("model", local.model)
        options.setdefault("sleep", clock.sleep)
        options.setdefault("clock", clock.time)
        options.setdefault("jitter", 0.0)
        options.setdefault("timeout", 10.0)
        options.setdefault("adaptive", False)  # fixed batches: the adaptive pace has its own tests
        e = HTTPEmbedder(**options)
        made.append(e)
        return e

    yield _make
    for e in made:
        e.close()


def request_sizes(server: EmbedServer) -> list[int]:
    return [len(b["input"]) for b in server.seen_bodies(EMB)]


# --- real embeddings through a real server ------------------------------------------

def test_http_embeddings_equal_in_process(make, server, local):
    e = make(batch_size=3)
    assert implements_embedder(e) and isinstance(e.tokenizer, Tokenizer)
    assert server.seen == []  # the conformance check itself sent nothing (no dim probe)
    v = e.embed(TEXTS)
    assert v.shape == (len(TEXTS), 256) and v.dtype == np.float32 and v.flags.c_contiguous
    np.testing.assert_allclose(v, local.embed(TEXTS), rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    assert e.dim == 256 and e.model == local.model


def test_server_in_a_separate_process(local):
    """The same, against the helper started as its own process (python -m ...)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.embed_server"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        with HTTPEmbedder(url, local.model, tokenize_style="llama.cpp", adaptive=False) as e:
            np.testing.assert_allclose(e.embed(TEXTS), local.embed(TEXTS), atol=1e-6)
            assert e.tokenizer.spans(TEXTS[3]) == local.tokenizer.spans(TEXTS[3])
        seen = httpx.get(url + "/_admin/seen").json()
        assert [s["path"] for s in seen].count(EMB) == 1
    finally:
        proc.stdin.close()  # the server exits when its stdin closes
        assert proc.wait(timeout=30) == 0
        proc.stdout.close()


def test_make_embedder_http(server, local):
    e = make_embedder("http", base_url=server.url + "/v1/", model=local.model, dim=256)
    try:
        assert isinstance(e, HTTPEmbedder)
        np.testing.assert_allclose(e.embed(["hi"]), local.embed(["hi"]), atol=1e-6)
    finally:
        e.close()


def test_answers_are_ordered_by_index(make, server, local):
    server.queue(Fault("reorder"))
    np.testing.assert_allclose(make().embed(TEXTS[:4]), local.embed(TEXTS[:4]), atol=1e-6)


def test_empty_texts_are_not_sent(make, server, local):
    v = make().embed(["", "word", ""])
    assert server.seen_bodies(EMB) == [{"model": local.model, "input": ["word"]}]
    np.testing.assert_array_equal(v[0], empty_text_vector(256))
    np.testing.assert_array_equal(v[2], empty_text_vector(256))


def test_empty_call_with_configured_dim_sends_nothing(make, server):
    assert make(dim=256).embed([]).shape == (0, 256)
    assert server.seen == []


def test_non_str_texts_are_refused(make, server):
    with pytest.raises(TypeError, match=r"texts\[1\] is NoneType"):
        make().embed(["a", None])
    with pytest.raises(TypeError):
        make().embed("a single str")
    assert server.seen == []


def test_dim_is_probed_once_when_not_configured(make, server):
    e = make()
    assert e.dim == 256 and e.dim == 256
    assert e.embed([]).shape == (0, 256)
    assert len(server.seen_bodies(EMB)) == 1


# --- batching ------------------------------------------------------------------------

def test_batches_by_count(make, server, local):
    texts = [f"text number {i}" for i in range(10)]
    v = make(batch_size=3, concurrency=1).embed(texts)
    assert request_sizes(server) == [3, 3, 3, 1]
    assert [t for b in server.seen_bodies(EMB) for t in b["input"]] == texts
    np.testing.assert_allclose(v, local.embed(texts), atol=1e-6)


def test_batches_by_token_budget_with_local_tokenizer(make, server, local):
    texts = ["alpha beta gamma delta " * k for k in (1, 5, 2, 8, 1, 1, 3)]
    counts = local.tokenizer.count_many(texts)
    budget = 40
    e = make(tokenizer=local.tokenizer, max_batch_tokens=budget, batch_size=64, concurrency=1)
    v = e.embed(texts)
    bodies = server.seen_bodies(EMB)
    assert request_sizes(server) == [hi - lo for lo, hi in plan_batches(counts, 64, budget)]
    for body in bodies:
        assert len(body["input"]) == 1 or sum(local.tokenizer.count_many(body["input"])) <= budget
    assert len(bodies) > 1
    np.testing.assert_allclose(v, local.embed(texts), atol=1e-6)
    assert server.seen_bodies("/v1/tokenize") == []  # local counts: no tokenize round trips


def test_token_budget_estimate_without_local_tokenizer(make, server):
    # ASCII: estimated tokens = bytes + 1 = 10 per text, so 3 texts fit a budget of 30.
    texts = ["abcdefghi"] * 7
    make(max_batch_tokens=30, concurrency=1).embed(texts)
    assert request_sizes(server) == [3, 3, 1]


def test_oversized_text_goes_alone():
    assert plan_batches([5, 50, 5, 5], 10, 20) == [(0, 1), (1, 2), (2, 4)]
    assert plan_batches([], 10, 20) == []
    assert plan_batches([1] * 5, 2, 100) == [(0, 2), (2, 4), (4, 5)]


def test_concurrent_batches_keep_input_order(make, server, local):
    texts = [f"sentence {i} about {'cats' if i % 2 else 'ships'}" for i in range(40)]
    v = make(batch_size=3, concurrency=4).embed(texts)
    assert sorted(request_sizes(server)) == sorted([3] * 13 + [1])
    np.testing.assert_allclose(v, local.embed(texts), atol=1e-6)


# --- faults that are retried ----------------------------------------------------------

def test_429_retry_after_seconds_is_honoured(make, server, clock, local):
    server.queue(Fault("status", status=429, retry_after="7"))
    v = make().embed(["hello"])
    assert clock.slept == [7.0]
    assert len(server.seen_bodies(EMB)) == 2
    np.testing.assert_allclose(v, local.embed(["hello"]), atol=1e-6)


def test_retry_after_http_date_is_honoured(make, server, clock):
    when = email.utils.formatdate(clock.now + 30, usegmt=True)
    server.queue(Fault("status", status=503, retry_after=when))
    make().embed(["hello"])
    assert clock.slept == [pytest.approx(30.0, abs=1.0)]


def test_retry_after_is_capped(make, server, clock):
    server.queue(Fault("status", status=429, retry_after="86400"))
    make(retry_after_max=60.0).embed(["hello"])
    assert clock.slept == [60.0]


def test_5xx_backs_off_exponentially(make, server, clock):
    server.queue(Fault("status", status=500), Fault("status", status=503), Fault("status", status=502))
    make(backoff=0.5).embed(["hello"])
    assert clock.slept == [0.5, 1.0, 2.0]


def test_backoff_is_capped_and_jittered(make, server, clock):
    server.queue(*[Fault("status", status=503)] * 4)
    make(backoff=1.0, backoff_max=3.0, jitter=0.5, random=lambda: 1.0).embed(["hello"])
    assert clock.slept == [1.5, 3.0, 4.5, 4.5]


def test_hang_times_out_and_is_retried(make, server, clock, local):
    server.queue(Fault("hang"))  # waits until server teardown releases it
    v = make(timeout=0.3).embed(["hello"])
    assert len(clock.slept) == 1
    np.testing.assert_allclose(v, local.embed(["hello"]), atol=1e-6)


def test_dropped_connection_is_retried(make, server, clock, local):
    server.queue(Fault("drop"))
    v = make().embed(["hello"])
    assert len(clock.slept) == 1 and len(server.seen_bodies(EMB)) == 2
    np.testing.assert_allclose(v, local.embed(["hello"]), atol=1e-6)


def test_garbage_json_is_retried(make, server, clock):
    server.queue(Fault("garbage"))
    make().embed(["hello"])
    assert len(server.seen_bodies(EMB)) == 2


def test_retries_are_bounded(make, server, clock):
    server.queue(*[Fault("status", status=503, message="overloaded")] * 10)
    with pytest.raises(EmbeddingError) as info:
        make(retries=3).embed(["hello"])
    msg = str(info.value)
    assert "failed after 4 attempt(s)" in msg and "503" in msg and "overloaded" in msg
    assert len(server.seen_bodies(EMB)) == 4 and len(clock.slept) == 3
    assert info.value.exit_code == 3


def test_one_failing_batch_fails_the_call(make, server):
    server.queue(Fault("status", status=400, message="input too long", path=EMB))
    with pytest.raises(EmbeddingError, match="input too long"):
        make(batch_size=1, concurrency=4).embed([f"t{i}" for i in range(8)])


# --- faults that are not -------------------------------------------------------------

def test_4xx_is_permanent_with_status_and_server_message(make, server, clock):
    server.queue(Fault("status", status=400, message="model 'x' not found"))
    with pytest.raises(EmbeddingError) as info:
        make().embed(["hello"])
    assert "HTTP 400" in str(info.value) and "model 'x' not found" in str(info.value)
    assert len(server.seen_bodies(EMB)) == 1 and clock.slept == []


def test_wrong_path_says_check_base_url(make, server):
    with pytest.raises(EmbeddingError) as info:
        make(base_url=server.url + "/nope").embed(["hello"])
    assert "404" in str(info.value) and "base_url" in str(info.value)


def test_nothing_listening_says_cannot_connect(make, clock):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens here
    with pytest.raises(EmbeddingError) as info:
        make(base_url=f"http://127.0.0.1:{port}", retries=2).embed(["hello"])
    assert "cannot connect" in str(info.value) and f"127.0.0.1:{port}" in str(info.value)
    assert len(clock.slept) == 2


def test_bad_base_url_is_a_usage_error(make):
    with pytest.raises(UsageError, match="base_url"):
        make(base_url="localhost:8080")
    with pytest.raises(UsageError, match="base_url"):
        make(base_url="ftp://example.com")


def test_wrong_dimension_after_the_first_answer(make, server):
    e = make()
    e.embed(["fixes the dimension"])
    server.queue(Fault("wrong_dim"))
    with pytest.raises(EmbeddingError, match="got 255-dimensional embeddings, expected 256"):
        e.embed(["hello"])
    assert len(server.seen_bodies(EMB)) == 2  # not retried


def test_configured_dimension_is_enforced(make):
    with pytest.raises(EmbeddingError, match="got 256-dimensional embeddings, expected 768 .configured"):
        make(dim=768).embed(["hello"])


@pytest.mark.parametrize(("kind", "match"), [
    ("nan", "NaN or infinity"),
    ("zero", "all zeros"),
    ("short", r"sent 3 text\(s\) but got 2 embedding\(s\)"),
    ("bad_index", "index 0; expected each of 0..2 once"),
])
def test_bad_answers_are_rejected(make, server, kind, match):
    server.queue(Fault(kind))
    with pytest.raises(EmbeddingError, match=match):
        make().embed(["one", "two", "three"])
    assert len(server.seen_bodies(EMB)) == 1


# --- the API key ---------------------------------------------------------------------

def test_api_key_is_sent_and_never_leaks(make, server, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("RAGTUI_TEST_KEY", SECRET)
    e = make(api_key_env="RAGTUI_TEST_KEY")
    e.embed(["hello"])
    assert server.seen[0].headers["Authorization"] == f"Bearer {SECRET}"
    # A retried error and a permanent one, both echoing the key back.
    server.queue(Fault("status", status=503, echo_auth=True),
                 Fault("status", status=401, message="bad key", echo_auth=True))
    with pytest.raises(EmbeddingError) as info:
        e.embed(["hello"])
    texts = [str(info.value), repr(info.value), repr(e), repr(e.tokenizer), caplog.text]
    cause = info.value.__cause__ or info.value.__context__
    texts.append(repr(cause))
    assert "401" in texts[0] and "***" in texts[0] and "api_key_env" in texts[0]
    assert "***" in caplog.text  # the retry was logged, redacted
    for text in texts:
        assert SECRET not in text
    assert "RAGTUI_TEST_KEY" in repr(e)


def test_api_key_variable_must_be_set(make, monkeypatch):
    monkeypatch.delenv("RAGTUI_TEST_KEY", raising=False)
    with pytest.raises(UsageError, match="RAGTUI_TEST_KEY"):
        make(api_key_env="RAGTUI_TEST_KEY")


# --- the tokenizer over HTTP ----------------------------------------------------------

STYLES = ["native", "llama.cpp", "vllm", "tei"]
TOKEN_TEXTS = TEXTS + ["", "😀", "\tx", " leading", "  two", "\nline", "x\u0301y"]


@pytest.mark.parametrize("style", STYLES)
def test_remote_tokenizer_matches_local(make, local, style):
    tok = make(tokenize_style=style).tokenizer
    assert tok.name == local.model
    assert tok.count_many(TOKEN_TEXTS) == local.tokenizer.count_many(TOKEN_TEXTS)
    for text in TOKEN_TEXTS:
        assert tok.count(text) == local.tokenizer.count(text)
        assert tok.spans(text) == local.tokenizer.spans(text), text


def test_tei_byte_offsets_are_recognised(make, server, local):
    server.tei_byte_offsets = True
    tok = make(tokenize_style="tei").tokenizer
    for text in TOKEN_TEXTS:
        assert tok.spans(text) == local.tokenizer.spans(text), text


def test_tokenize_requests_ask_for_no_special_tokens(make, server):
    for style in STYLES:
        make(tokenize_style=style).tokenizer.spans("hi <s>")
    bodies = server.seen_bodies("/tokenize")
    assert bodies[0] == {"content": "hi <s>", "add_special": False, "parse_special": False,
                         "with_pieces": True}
    assert bodies[1]["add_special_tokens"] is False and bodies[1]["return_token_strs"] is True
    assert bodies[2] == {"inputs": "hi <s>", "add_special_tokens": False}
    assert server.seen_bodies("/v1/tokenize")[0]["return_offsets"] is True


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\u2581"), max_size=40))
def test_piece_alignment_property(text):
    """vLLM-style raw vocabulary strings, aligned, give the local spans (no server needed)."""
    local = _shared_local()
    enc = local.tokenizer.encode(text)
    spans = align_pieces(text, [vocab_piece_candidates(t) for t in enc.tokens]) if text else []
    assert spans == local.tokenizer.spans(text)


_LOCAL: list[WordLlamaEmbedder] = []


def _shared_local() -> WordLlamaEmbedder:
    if not _LOCAL:
        _LOCAL.append(WordLlamaEmbedder())
    return _LOCAL[0]


@pytest.mark.parametrize("style", STYLES)
def test_spans_unavailable_is_a_clear_error(make, server, style):
    server.queue(Fault("no_pieces"))
    # llama.cpp's server without pieces would still give spans by decoding; one without /detokenize cannot.
    server.queue(*[Fault("status", status=404, path="/detokenize")] * 4)
    tok = make(tokenize_style=style).tokenizer
    with pytest.raises(EmbeddingError, match="spans are unavailable.*tokenizer_file"):
        tok.spans("hello there")


def test_normalising_server_tokenizer_cannot_give_spans():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"tokens": [{"id": 1, "piece": "hello"}]})

    e = HTTPEmbedder("http://tei.invalid", "m", tokenize_style="llama.cpp",
                     transport=httpx.MockTransport(handler))
    with pytest.raises(EmbeddingError, match="does not match the text.*local tokenizer"):
        e.tokenizer.spans("HELLO")


def test_local_tokenizer_file_replaces_the_endpoint(make, server, local):
    from ragtui.core.embedders.wordllama import bundled_files

    e = make(tokenize_style="none", tokenizer_file=str(bundled_files()[1]))
    assert e.tokenizer.spans("a😀") == local.tokenizer.spans("a😀")
    assert e.tokenizer.name == local.model
    assert not [s for s in server.seen if "tokenize" in s.path]
    with pytest.raises(UsageError, match="tokenize_style='none' needs tokenizer_file"):
        make(tokenize_style="none")


# --- faults easier to inject with a MockTransport --------------------------------------

def mock(handler, **options) -> HTTPEmbedder:
    options.setdefault("sleep", lambda s: None)
    return HTTPEmbedder("http://embed.invalid", "m", transport=httpx.MockTransport(handler), **options)


def test_base64_embeddings_are_decoded():
    import base64

    vec = np.array([3.0, 4.0], dtype="<f4")

    def handler(request):
        n = len(json.loads(request.content)["input"])
        data = [{"index": i, "embedding": base64.b64encode(vec.tobytes()).decode()} for i in range(n)]
        return httpx.Response(200, json={"data": data})

    np.testing.assert_allclose(mock(handler).embed(["a", "b"]), [[0.6, 0.8], [0.6, 0.8]], atol=1e-7)


@pytest.mark.parametrize(("answer", "match"), [
    ([1, 2], 'no "data" list'),
    ({"data": [{"index": 0}]}, 'has no "embedding"'),
    ({"data": [{"index": 0, "embedding": [1, "x"]}]}, "not lists of numbers"),
    ({"data": [{"index": 0, "embedding": []}]}, "not lists of numbers"),
    ({"data": [{"index": 5, "embedding": [1.0]}]}, "index 5"),
    # A server without pooling: a vector per token (llama.cpp, llama-cpp-python).
    ({"data": [{"index": 0, "embedding": [[1.0, 2.0], [3.0, 4.0]]}]},
     r"one per token.*--pooling mean.*llama\.pooling_type=int:1"),
])
def test_malformed_answers(answer, match):
    with pytest.raises(EmbeddingError, match=match):
        mock(lambda r: httpx.Response(200, json=answer)).embed(["a"])


def test_ragged_embeddings_are_rejected():
    answer = {"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]}
    with pytest.raises(EmbeddingError, match="one length"):
        mock(lambda r: httpx.Response(200, json=answer)).embed(["a", "b"])


def test_transport_errors_are_retried_then_succeed():
    calls = []

    def handler(request):
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ReadTimeout("timed out", request=request)
        if len(calls) == 2:
            raise httpx.RemoteProtocolError("peer closed connection", request=request)
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0, 0.0]}]})

    slept = []
    assert mock(handler, sleep=slept.append, jitter=0, adaptive=False).embed(["a"]).tolist() == [[1.0, 0.0]]
    assert len(calls) == 3 and slept == [0.5, 1.0]
    # Adaptive (the default): a timeout is not waited for but sent again at once, in a smaller batch.
    calls.clear()
    slept.clear()
    assert mock(handler, sleep=slept.append, jitter=0).embed(["a"]).tolist() == [[1.0, 0.0]]
    assert len(calls) == 3 and slept == [0.5]


def test_redirect_is_reported_not_followed():
    def handler(request):
        return httpx.Response(301, headers={"location": "https://elsewhere/v1/embeddings"})

    with pytest.raises(EmbeddingError, match="redirected to https://elsewhere"):
        mock(handler).embed(["a"])


def test_error_body_shapes():
    for body, expected in [({"error": "tei says no"}, "tei says no"),
                           ({"object": "error", "message": "vllm says no"}, "vllm says no"),
                           ({"detail": [{"msg": "field required"}]}, "field required")]:
        with pytest.raises(EmbeddingError, match=expected):
            mock(lambda r, b=body: httpx.Response(422, json=b)).embed(["a"])
    with pytest.raises(EmbeddingError, match="plain text failure"):
        mock(lambda r: httpx.Response(400, text="plain text failure")).embed(["a"])


def test_retry_after_parsing():
    assert parse_retry_after(None, 0) is None
    assert parse_retry_after("3", 0) == 3.0
    assert parse_retry_after(" 1.5 ", 0) == 1.5
    assert parse_retry_after("-1", 0) is None
    assert parse_retry_after("soon", 0) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470.0) == 10.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412490.0) == 0.0


def test_options_are_validated():
    for bad in ({"batch_size": 0}, {"concurrency": 0}, {"timeout": 0}, {"retries": -1},
                {"dim": 0}, {"tokenize_style": "bert"}, {"max_batch_tokens": 0}):
        with pytest.raises(UsageError):
            HTTPEmbedder("http://x.invalid", "m", **bad)
    with pytest.raises(UsageError, match="model"):
        HTTPEmbedder("http://x.invalid", "")


# --- the adaptive pace ----------------------------------------------------------------

WORDS = [f"text number {i} " + "lorem ipsum " * (i % 7) for i in range(200)]


def estimated(texts) -> int:
    return sum(len(t.encode("utf-8")) + 1 for t in texts)


def test_pace_starts_small_and_grows_to_the_maxima(local):
    """Answers that take no time at all (a virtual clock that never moves): the pace grows to every maximum, never past."""
    with EmbedServer(local) as srv:
        e = HTTPEmbedder(srv.url, local.model, batch_size=16, max_batch_tokens=2048, concurrency=3,
                         monotonic=srv.virtual_clock)
        with e:
            np.testing.assert_allclose(e.embed(WORDS), local.embed(WORDS), atol=1e-6)
            assert (e.pace.batch_tokens, e.pace.concurrency) == (2048, 3)
            assert e.pace.timeouts == 0
        bodies = srv.seen_bodies(EMB)
        assert estimated(bodies[0]["input"]) <= Pace.START_TOKENS
        for body in bodies:
            assert len(body["input"]) <= 16
            assert len(body["input"]) == 1 or estimated(body["input"]) <= 2048


def test_pace_holds_where_answers_take_a_quarter_to_half_the_timeout(local):
    """A one-slot server doing 1 byte in 1 ms against a 4-second timeout: batches settle between 1 and 2 seconds of work."""
    with EmbedServer(local) as srv:
        srv.work_per_byte = 0.001
        with HTTPEmbedder(srv.url, local.model, timeout=4.0, monotonic=srv.virtual_clock) as e:
            e.embed(WORDS)
            assert e.pace.timeouts == 0 and e.pace.concurrency == 1
            assert 1000 <= e.pace.batch_tokens <= 2048 + len(WORDS[-1])
        sizes = [estimated(b["input"]) for b in srv.seen_bodies(EMB)]
        assert max(sizes) <= 2048 + 2 * max(map(len, WORDS))


def test_pace_shrinks_on_timeouts_and_succeeds(local):
    """A server that never answers requests over 1,500 bytes: each text still gets its vector, after few timeouts."""
    with EmbedServer(local) as srv:
        srv.hang_above_bytes = 1500
        with HTTPEmbedder(srv.url, local.model, timeout=1.0, monotonic=srv.virtual_clock) as e:
            np.testing.assert_allclose(e.embed(WORDS), local.embed(WORDS), atol=1e-6)
            first_timeouts = e.pace.timeouts
            assert 1 <= first_timeouts <= 2
            assert e.pace.batch_tokens <= 1500
            e.embed(WORDS)  # the ceiling learnt stays: no more timeouts
            assert e.pace.timeouts == first_timeouts
        assert srv.abandoned.acquire(timeout=10)  # the abandoned request's connection was closed


def test_a_text_that_always_times_out_fails_with_advice(local):
    with EmbedServer(local) as srv:
        srv.hang_above_bytes = 0
        with HTTPEmbedder(srv.url, local.model, timeout=0.3, retries=1) as e, \
                pytest.raises(EmbeddingError) as info:
            e.embed(["one", "two"])
        msg = str(info.value)
        assert "no answer within 0.3s" in msg and "raise timeout" in msg
        assert len(srv.seen_bodies(EMB)) <= 4  # [one, two], then [one] twice


def test_a_failed_call_closes_the_requests_still_in_flight(local):
    with EmbedServer(local) as srv:
        srv.queue(Fault("hang", path=EMB), Fault("status", status=400, message="bad input", path=EMB))
        with HTTPEmbedder(srv.url, local.model, batch_size=1, concurrency=2, adaptive=False) as e, \
                pytest.raises(EmbeddingError, match="bad input"):
            e.embed(["one", "two"])
        assert srv.abandoned.acquire(timeout=10)


def test_embed_parts_yields_each_text_once(make, local):
    e = make(batch_size=3, concurrency=2)
    texts = ["a", "", "b c", "d", "e", "", "f"]
    seen: list[int] = []
    for positions, rows in e.embed_parts(texts):
        seen.extend(positions)
        np.testing.assert_allclose(rows, local.embed([texts[i] for i in positions]), atol=1e-6)
    assert sorted(seen) == [0, 2, 3, 4, 6]


# --- spans by decoding (llama-cpp-python: ids without offsets) ------------------------

def _decoded_spans_agree(text: str, spans, local) -> None:
    """Spans tile the text, one per local token, and each holds its token's text (less the space SentencePiece drops)."""
    assert len(spans) == local.tokenizer.count(text)
    if not text:
        return
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    enc = local.tokenizer.encode(text)
    for (s, e), token in zip(spans, enc.tokens):
        if s < e and not (token.startswith("<0x") and token.endswith(">")):
            assert text[s:e].strip() == token.replace("\u2581", " ").strip() or text[s:e].isspace(), (text, s, e, token)


@pytest.mark.parametrize("style", ["llama-cpp-python", "llama.cpp"])
def test_spans_by_decoding_when_the_server_gives_ids_only(make, server, local, style):
    tok = make(tokenize_style=style).tokenizer
    for text in TEXTS:
        if style == "llama.cpp":
            server.queue(Fault("no_pieces", path="/tokenize"))
        _decoded_spans_agree(text, tok.spans(text), local)
        assert tok.count(text) == local.tokenizer.count(text)
    # A character made of byte tokens is decoded as a group: the emoji's four bytes give one span.
    spans = tok.spans("emoji 😀")
    assert [(s, e) for s, e in spans if s < e][-1] == (6, 7)
    # Single tokens are decoded once and remembered.
    before = len(server.seen_bodies(DETOK := {"llama-cpp-python": "/extras/detokenize", "llama.cpp": "/detokenize"}[style]))
    tok.spans(TEXTS[0])
    assert len(server.seen_bodies(DETOK)) == before


@settings(max_examples=40, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\u2581"), max_size=30))
def test_spans_by_decoding_property(text):
    from ragtui.core.embedders.http_tokenizer import align_by_decoding

    local = _shared_local()
    vocab = local.tokenizer._tk

    def decode(ids):
        raw = b"".join(b"".join([bytes([int(t[3:5], 16)])]) if t.startswith("<0x") and len(t) == 6
                       else t.replace("\u2581", " ").encode() for t in map(vocab.id_to_token, ids))
        raw = raw[1:] if raw.startswith(b" ") else raw
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return None

    ids = local.tokenizer.encode(text).ids
    _decoded_spans_agree(text, align_by_decoding(text, ids, lambda i: decode([i]), decode), local)


def test_special_token_spelling_goes_to_the_token_that_decodes_to_nothing():
    from ragtui.core.embedders.http_tokenizer import align_by_decoding

    # llama-cpp-python parses "<|im_start|>" as one special token (id 1), which decodes to "".
    pieces = {7: "Hello", 1: "", 8: " é"}
    text = "Hello<|im_start|> é"
    spans = align_by_decoding(text, [7, 1, 8], pieces.get, lambda ids: "".join(pieces[i] for i in ids))
    assert [text[s:e] for s, e in spans] == ["Hello", "<|im_start|>", " é"]
    with pytest.raises(EmbeddingError, match="does not match the text.*tokenizer_file"):
        align_by_decoding("Hello there", [7, 8], pieces.get, lambda ids: None)


def test_special_token_spellings_at_the_end_and_in_a_row():
    from ragtui.core.embedders.http_tokenizer import align_by_decoding

    pieces = {7: "Hello", 1: "", 2: ""}
    text = "Hello <|a|><|b|>"
    spans = align_by_decoding(text, [7, 1, 2], pieces.get, lambda ids: "".join(pieces[i] for i in ids))
    assert [text[s:e] for s, e in spans] == ["Hello ", "<|a|>", "<|b|>"]


def test_the_defaults_suit_a_one_slot_server_at_200_tokens_a_second(local):
    """~800 bytes/s (200 English tokens/s), one request at a time; a request over 30 s of work would hang."""
    texts = [f"document {i}: " + "The quick brown fox jumps over the lazy dog. " * 20 for i in range(120)]
    with EmbedServer(local) as srv:
        srv.work_per_byte = 1 / 800
        srv.hang_above_bytes = 30 * 800
        with HTTPEmbedder(srv.url, local.model, monotonic=srv.virtual_clock) as e:  # every option at its default
            np.testing.assert_allclose(e.embed(texts), local.embed(texts), atol=1e-6)
            assert e.pace.timeouts == 0 and e.pace.concurrency == 1
        bodies = srv.seen_bodies(EMB)
        work = [estimated(b["input"]) / 800 for b in bodies]
        assert max(work) <= 0.5 * 30 and len(bodies[0]["input"]) == 1  # none over half the timeout; a small start


def test_closing_embed_parts_early_abandons_the_requests_in_flight(local):
    with EmbedServer(local) as srv:
        srv.queue(Fault("hang", path=EMB))  # whichever of the two requests comes first never answers
        with HTTPEmbedder(srv.url, local.model, batch_size=1, concurrency=2, adaptive=False) as e:
            parts = e.embed_parts(["one", "two"])
            positions, rows = next(parts)
            assert len(positions) == 1 and rows.shape == (1, 256)
            parts.close()
            assert srv.abandoned.acquire(timeout=10)
            np.testing.assert_allclose(e.embed(["three"]), local.embed(["three"]), atol=1e-6)  # still usable


def test_a_passing_stall_does_not_lower_the_pace_for_good(local):
    """One request hangs (a stall), then the server is fast again: the pace climbs back to the maxima."""
    texts = [f"text {i} " + "lorem ipsum " * 40 for i in range(400)]
    with EmbedServer(local) as srv:
        with HTTPEmbedder(srv.url, local.model, timeout=1.0, batch_size=64, max_batch_tokens=8192,
                          concurrency=1, monotonic=srv.virtual_clock) as e:
            e.embed(texts[:8])  # the pace has grown past its start
            srv.queue(Fault("hang", path=EMB))
            e.embed(texts)
            assert e.pace.timeouts == 1
            stalled_ceiling = e.pace.token_ceiling
            assert stalled_ceiling < 8192
            e.embed(texts)
            assert e.pace.token_ceiling > stalled_ceiling and e.pace.timeouts == 1


def test_a_missing_tokenize_endpoint_names_each_servers_style(make, server):
    tok = make(tokenize_style="llama.cpp", tokenize_path="/nowhere").tokenizer
    with pytest.raises(EmbeddingError) as info:
        tok.count("hello")
    msg = str(info.value)
    assert "HTTP 404" in msg and "/extras/tokenize ('llama-cpp-python')" in msg and "tokenizer_file" in msg


# -- every request's deadline and every answer's size bound ------------------------------------------------------

ENDPOINTS = {
    "embeddings": (EMB, "native"),
    "tokenize": ("/tokenize", "llama.cpp"),
    "detokenize": ("/extras/detokenize", "llama-cpp-python"),
}


def _ask(emb, endpoint: str):
    if endpoint == "embeddings":
        return emb.embed(["some text to embed"])
    if endpoint == "tokenize":
        return emb.tokenizer.count("some text to count")
    return emb.tokenizer.spans("some text to align")


@pytest.mark.parametrize("kind", ["trickle", "slow_head", "endless", "oversized"])
@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_an_answer_that_never_ends_or_is_too_large_fails_in_time(local, endpoint, kind):
    path, style = ENDPOINTS[endpoint]
    with EmbedServer(local, hang_limit=120.0) as srv:
        url = srv.url
        # The fault meets every attempt; adaptive=False retries a timeout like any failure.
        srv.queue(*[Fault(kind, path=path)] * 2)
        emb = HTTPEmbedder(srv.url, local.model, dim=local.dim, tokenize_style=style, timeout=1.0, retries=1,
                           backoff=0.0, adaptive=False)
        with pytest.raises(EmbeddingError) as info:
            _ask(emb, endpoint)
        emb.close()
    message = str(info.value)
    assert url in message and "\n" not in message, message
    if kind in ("endless", "oversized"):
        assert "larger than" in message and "bytes" in message, message
        bodies = [json.dumps(s.body, sort_keys=True) for s in srv.seen if s.path == path]
        assert len(bodies) == len(set(bodies)), "a too-large answer was asked for again"
    else:
        assert "within 1s" in message, message


def test_the_answer_bound_follows_the_batch(local):
    from ragtui.core.embedders.http import answer_bound

    with EmbedServer(local) as srv:
        emb = HTTPEmbedder(srv.url, local.model, dim=local.dim, tokenizer=local.tokenizer, batch_size=64)
        vectors = emb.embed(TEXTS)  # real answers are well inside the bound
        assert vectors.shape == (len(TEXTS), local.dim)
        one = len(json.dumps({"data": [{"index": 0, "embedding": [-0.123456789] * local.dim}]}))
        assert one < answer_bound(1, local.dim) and 64 * one < answer_bound(64, local.dim) < 8 * 64 * one
        emb.close()


def test_pace_grows_by_measured_speed_so_a_superlinear_server_never_times_out(local):
    """Work that grows as the batch to the power 2.5; 512 bytes cost a fifth of the timeout.

    Doubling on any answer within a quarter of the timeout would send 1,024 bytes next: 5.7 times the work,
    past the timeout. Growing by the measured speed (as if work grew as the square of the batch) stays
    well inside it.
    """
    with EmbedServer(local) as srv:
        srv.work_exponent = 2.5
        srv.work_per_byte = 0.2 * 2.0 / 512 ** 2.5
        srv.hang_above_work = 2.0  # what would take longer than the timeout never comes
        with HTTPEmbedder(srv.url, local.model, timeout=2.0, concurrency=1, monotonic=srv.virtual_clock) as e:
            np.testing.assert_allclose(e.embed(WORDS), local.embed(WORDS), atol=1e-6)
            assert e.pace.timeouts == 0, e.pace
            assert 512 <= e.pace.batch_tokens <= 700
        assert max(srv.work(b["input"]) for b in srv.seen_bodies(EMB)) < 2.0 * 0.5  # well inside the timeout


def test_timeouts_are_counted_with_the_work_they_cost(local):
    with EmbedServer(local) as srv:
        srv.hang_above_bytes = 1500
        with HTTPEmbedder(srv.url, local.model, timeout=1.0, monotonic=srv.virtual_clock) as e:
            e.embed(WORDS)
            counts = e.pace.counters()
        assert counts["timeouts"] >= 1 and counts["resent_texts"] >= 1 and counts["resent_tokens"] > 1500
        assert counts["requests"] == len(srv.seen_bodies(EMB))


# --- where requests may go: base_url's scheme, host and port only ---------------------

@pytest.mark.parametrize("path", [":22011/steal", "@127.0.0.1:22011/steal", "//127.0.0.1:22011/x",
                                  "http://127.0.0.1:22011/x", "/a/../b", "/%2e%2e/b", "/t?u=x", "/t#x",
                                  "/t\\x", "/t x", "/t\r\nHost: x", "tokenize", "", 7])
def test_tokenize_path_must_be_a_plain_path(server, local, path):
    with pytest.raises(UsageError, match="tokenize_path"):
        HTTPEmbedder(base_url="http://127.0.0.1", model=local.model, dim=local.dim, tokenize_path=path,
                     api_key_env=None)
    assert server.seen == []


def test_plain_tokenize_paths_are_appended_to_the_base_path(local):
    from ragtui.core.embedders._transport import check_url_path

    for path in ("/tokenize", "/v1/tokenize", "/extras/tok-en_ize.json", "/a/b/", "/"):
        assert check_url_path(path, "k") == path
    with EmbedServer(local) as other:
        e = HTTPEmbedder(base_url=other.url + "/prefix/", model=local.model, dim=local.dim, retries=0)
        try:
            assert str(e._poster.url("/v1/tokenize")) == other.url + "/prefix/v1/tokenize"
        finally:
            e.close()


def test_no_request_leaves_for_another_port_even_past_the_url_builder(local, monkeypatch):
    # Whatever builds a URL, the client that carries the key checks every request's origin on the wire.
    monkeypatch.setenv("RAGTUI_TEST_KEY", "sk-leak-check")
    with EmbedServer(local) as mine, EmbedServer(local) as other:
        e = HTTPEmbedder(base_url=mine.url, model=local.model, dim=local.dim, retries=0,
                         api_key_env="RAGTUI_TEST_KEY")
        try:
            with pytest.raises(UsageError, match="only http://127.0.0.1"):
                e._poster._client.post(other.url + "/v1/embeddings", json={"input": ["x"], "model": "m"})
            with pytest.raises(UsageError):
                e._poster._client.post(mine.url.replace("127.0.0.1", "localhost") + "/v1/embeddings", json={})
        finally:
            e.close()
        assert other.seen == [] and mine.seen == []
