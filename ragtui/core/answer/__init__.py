"""Answers with checked citations: the pack, the chat model, the prompt, HyDE, the check, the pipeline.

    pack      hits to a token budget: whole chunks, merged neighbours, each with its source lines
    llm       the OpenAI-compatible chat client: one deadline per request, bounded answers
    prompt    the chat messages: numbered sources with their [path:Lstart-Lend] labels
    hyde      the hypothetical answer searched beside the question, cached on disk by model and question
    check     each citation of an answer: verified, stale, not-in-context or unresolvable
    run       ask(): retrieve -> pack -> chat -> check, with the seconds of every stage

spec/answer.md is the normative description. Nothing here writes into an index.
"""

from ragtui.core.answer.check import VERDICTS, CitationCheck, check_answer
from ragtui.core.answer.hyde import HydeCache
from ragtui.core.answer.prompt import answer_messages, hyde_messages
from ragtui.core.answer.run import AskResult, ask

__all__ = [
    "VERDICTS",
    "AskResult",
    "CitationCheck",
    "HydeCache",
    "answer_messages",
    "ask",
    "check_answer",
    "hyde_messages",
]
