"""core.answer.llm.ChatClient against a real chat server on loopback, with injected faults."""

from __future__ import annotations

import pytest

from ragtui.core.answer.llm import AnswerCut, ChatClient, answer_limits
from ragtui.core.errors import LLMError, UsageError
from tests.helpers.chat_server import ChatServer, Fault

MESSAGES = [{"role": "system", "content": "Cite sources."},
            {"role": "user", "content": "Sources:\n[1] [docs/a.md:L1-3]\nCats.\n\nQuestion: cats?"}]


@pytest.fixture
def server():
    with ChatServer(model="m") as s:
        yield s


def client(server, **kw):
    waits: list[float] = []
    kw.setdefault("sleep", waits.append)
    c = ChatClient(server.url, "m", **kw)
    c.waits = waits  # type: ignore[attr-defined]
    return c


def test_plain_answer_with_usage(server):
    answer = client(server).chat(MESSAGES)
    assert answer.text == "The sources say so [docs/a.md:L1-3]."
    assert (answer.prompt_tokens, answer.completion_tokens) == (8, 5)  # the server counts words
    assert answer.finish_reason == "stop" and not answer.streamed and answer.model == "m"
    body = server.chat_bodies()[0]
    assert body["stream"] is False and body["model"] == "m" and body["messages"] == MESSAGES


def test_streamed_answer_arrives_in_pieces(server):
    pieces: list[str] = []
    answer = client(server).chat(MESSAGES, on_delta=pieces.append)
    assert len(pieces) > 1 and "".join(pieces) == answer.text == "The sources say so [docs/a.md:L1-3]."
    assert answer.streamed and answer.first_token_seconds is not None
    assert answer.completion_tokens == 5
    assert server.chat_bodies()[0]["stream"] is True


def test_a_server_that_ignores_stream_still_answers(server):
    server.queue(Fault("plain"))
    pieces: list[str] = []
    answer = client(server).chat(MESSAGES, on_delta=pieces.append)
    assert pieces == [answer.text] and not answer.streamed


@pytest.mark.parametrize("stream", [False, True])
def test_429_with_retry_after_is_waited_for_then_retried(server, stream):
    server.queue(Fault("status", status=429, retry_after="3"), Fault("status", status=503))
    c = client(server, retries=2)
    answer = c.chat(MESSAGES, on_delta=(lambda _t: None) if stream else None)
    assert answer.text.startswith("The sources")
    assert c.waits[0] == 3.0 and len(c.waits) == 2
    assert len(server.chat_bodies()) == 3 and c.calls == 1


def test_500_every_time_fails_after_the_retries(server):
    server.queue(*[Fault("status", status=500, message="boom")] * 3)
    with pytest.raises(LLMError, match=r"failed after 3 attempt\(s\): HTTP 500.*boom"):
        client(server, retries=2).chat(MESSAGES)


def test_timeout_is_an_error_not_a_hang(server):
    server.queue(Fault("hang"))
    with pytest.raises(LLMError, match=r"no answer within 0.3s"):
        client(server, retries=0, timeout=0.3).chat(MESSAGES)


def test_malformed_json_is_retried_then_fails(server):
    server.queue(Fault("garbage"), Fault("garbage"))
    with pytest.raises(LLMError, match="not JSON"):
        client(server, retries=1).chat(MESSAGES)
    server.queue(Fault("garbage"))
    assert client(server, retries=1).chat(MESSAGES).text  # one bad body, then a good one


def test_empty_answer_and_no_choices_are_errors(server):
    server.queue(Fault("empty"))
    with pytest.raises(LLMError, match="empty text"):
        client(server).chat(MESSAGES)
    server.queue(Fault("empty"))
    with pytest.raises(LLMError, match="empty text"):
        client(server).chat(MESSAGES, on_delta=lambda _t: None)
    server.queue(Fault("no_choices"))
    with pytest.raises(LLMError, match="no choices"):
        client(server).chat(MESSAGES)


def test_a_dropped_stream_is_an_error_after_the_text_shown(server):
    server.queue(Fault("drop"))
    pieces: list[str] = []
    with pytest.raises(LLMError, match="broke off after"):
        client(server).chat(MESSAGES, on_delta=pieces.append)
    assert pieces  # what arrived was shown; it is not repeated by a retry
    assert len(server.chat_bodies()) == 1


def test_a_stream_that_ends_without_its_end_is_an_error(server):
    server.queue(Fault("truncated"))
    with pytest.raises(LLMError, match="without its end"):
        client(server).chat(MESSAGES, on_delta=lambda _t: None)
    server.queue(Fault("bad_event"))
    with pytest.raises(LLMError, match="not JSON"):
        client(server).chat(MESSAGES, on_delta=lambda _t: None)


def test_no_usage_is_reported_as_unknown(server):
    server.queue(Fault("no_usage"))
    answer = client(server).chat(MESSAGES, on_delta=lambda _t: None)
    assert answer.prompt_tokens is None and answer.completion_tokens is None


def test_wrong_model_names_the_servers_message(server):
    with pytest.raises(LLMError, match=r"HTTP 404.*model `other` does not exist"):
        ChatClient(server.url, "other", sleep=lambda _s: None).chat(MESSAGES)


def test_server_down_says_so():
    with ChatServer() as s:
        url = s.url
    with pytest.raises(LLMError, match="is the chat server running"):
        ChatClient(url, "m", retries=1, sleep=lambda _s: None).chat(MESSAGES)


def test_the_key_goes_in_the_header_and_never_into_messages(server):
    server.queue(Fault("status", status=401, message="bad key", echo_auth=True))
    c = ChatClient.from_settings({"base_url": server.url, "model": "m", "api_key_env": "MY_LLM_KEY"},
                                 {"MY_LLM_KEY": "sk-secret-123"}, sleep=lambda _s: None)
    with pytest.raises(LLMError) as info:
        c.chat(MESSAGES)
    assert "sk-secret-123" not in str(info.value) and "***" in str(info.value)
    assert server.seen[0].headers["Authorization"] == "Bearer sk-secret-123"


def test_settings_are_checked():
    with pytest.raises(UsageError, match=r"no chat model configured \(base_url and model missing\)"):
        ChatClient.from_settings({})
    with pytest.raises(UsageError, match="MISSING_VAR.*not set"):
        ChatClient.from_settings({"base_url": "http://127.0.0.1:1", "model": "m", "api_key_env": "MISSING_VAR"}, {})
    for key, value in (("temperature", 9), ("max_tokens", 0), ("timeout", -1), ("retries", 99), ("timeout", True)):
        with pytest.raises(UsageError, match=key):
            ChatClient.from_settings({"base_url": "http://127.0.0.1:1", "model": "m", key: value}, {})
    with pytest.raises(UsageError, match="invalid chat base_url"):
        ChatClient.from_settings({"base_url": "ftp://x", "model": "m"}, {})


@pytest.mark.parametrize("stream", [False, True])
def test_a_lone_surrogate_in_the_answer_cannot_break_printing(server, stream):
    server.reply = "bad \ud800 text [docs/a.md:L1-3]"
    pieces: list[str] = []
    answer = client(server).chat(MESSAGES, on_delta=pieces.append if stream else None)
    assert answer.text == "bad ? text [docs/a.md:L1-3]"
    answer.text.encode("utf-8")  # printable
    assert all("\ud800" not in p for p in pieces)


def test_an_answer_larger_than_the_bound_is_refused(server):
    from ragtui.core.answer.llm import MAX_ANSWER_BYTES

    server.reply = "x" * (MAX_ANSWER_BYTES + 10)
    with pytest.raises(LLMError, match="larger than"):
        client(server).chat(MESSAGES)


# -- the deadline of the whole request and the bounds of an answer ------------------------------------------------

STALLS = ["pings", "empty_deltas", "trickle", "slow_body", "slow_head"]
"""Servers that keep the answer open without ever ending it (tests/helpers/chat_server.py)."""


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("kind", STALLS)
def test_an_answer_that_never_ends_is_cut_at_the_deadline(kind, stream):
    with ChatServer(model="m", hang_limit=120.0) as s:
        s.queue(Fault(kind))
        pieces: list[str] = []
        with pytest.raises(LLMError) as info:
            client(s, timeout=1.5, retries=2).chat(MESSAGES, on_delta=pieces.append if stream else None)
        message = str(info.value)
        assert "within 1.5s" in message and "\n" not in message, message
        assert len(s.chat_bodies()) == 1  # no retry starts past the deadline
        if kind in ("empty_deltas", "trickle"):  # text came: it is kept, as what arrived before the cut
            assert isinstance(info.value, AnswerCut) and info.value.text
            assert ("The sources say so [docs/a.md:L1-3]." * 3).startswith(info.value.text)
            assert "".join(pieces) == (info.value.text if stream else "")
        else:
            assert not isinstance(info.value, AnswerCut)


def test_the_deadline_covers_the_retries_and_their_waits():
    with ChatServer(model="m", hang_limit=120.0) as s:
        s.queue(Fault("status", status=503, retry_after="30"))
        c = ChatClient(s.url, "m", timeout=2.0, retries=3)  # the real sleep: a 30 s wait would pass the deadline
        with pytest.raises(LLMError, match=r"failed after 1 attempt\(s\): HTTP 503.*no time was left for a retry"):
            c.chat(MESSAGES)


@pytest.mark.parametrize("stream", [True, False])
def test_an_answer_past_max_tokens_is_cut(stream):
    with ChatServer(model="m", hang_limit=120.0) as s:
        s.queue(Fault("endless"))  # text as fast as it can be read, never an end
        with pytest.raises(AnswerCut, match="ran past max_tokens = 20") as info:
            client(s, timeout=60.0).chat(MESSAGES, on_delta=(lambda _t: None) if stream else None, max_tokens=20)
        pieces, most = answer_limits(20)
        assert 0 < len(info.value.text.encode("utf-8")) <= most
        s.reply = "many words " * 2000  # one plain body, far longer than 20 tokens
        with pytest.raises(AnswerCut, match="longer than max_tokens = 20") as info:
            client(s).chat(MESSAGES, max_tokens=20)
        assert s.reply.startswith(info.value.text) and len(info.value.text.encode("utf-8")) <= most


# -- the model's context length ------------------------------------------------------------------------------------


def test_the_context_window_is_read_from_the_server_or_the_settings(server):
    assert client(server).context_window() is None  # /props absent, /v1/models without a length
    server.n_ctx = 3072
    c = client(server)
    assert c.context_window() == 3072 and c.window_source == "GET /props"
    server.props = False  # a server that gives it in /v1/models only is read below
    c = ChatClient.from_settings({"base_url": server.url, "model": "m", "context_window": 1500}, {})
    assert c.context_window() == 1500 and c.window_source == "[llm] context_window"
    with pytest.raises(UsageError, match="context_window"):
        ChatClient.from_settings({"base_url": server.url, "model": "m", "context_window": 0}, {})


def test_a_context_length_in_v1_models_is_read():
    from ragtui.core.answer.llm import _models_window

    assert _models_window({"data": [{"id": "m", "max_model_len": 8192}]}, "m") == 8192  # vLLM
    assert _models_window({"data": [{"id": "x", "context_length": 4096}]}, "m") == 4096  # the only model
    assert _models_window({"data": [{"id": "a", "n_ctx": 5}, {"id": "b"}]}, "m") is None
    assert _models_window({"data": [{"id": "m", "meta": {"n_ctx_train": 8192}}]}, "m") is None  # training length
    assert _models_window({"data": [{"id": "m", "max_model_len": True}]}, "m") is None


def test_an_http_400_about_the_context_names_the_fix(server):
    server.n_ctx = 20
    with pytest.raises(LLMError, match=r"exceeds the available context size.*set \[llm\] context_window"):
        client(server).chat(MESSAGES)
