"""The chat messages of ``ragtui ask``: the packed sources, numbered and labelled, and the question."""

from __future__ import annotations

from ragtui.core.answer.llm import Message
from ragtui.core.answer.pack import Pack

__all__ = ["ANSWER_SYSTEM", "EXAMPLE_LABEL", "HYDE_SYSTEM", "PROMPT_VERSION", "answer_messages", "hyde_messages",
           "repair_messages"]

PROMPT_VERSION = "3"
"""Changes whenever a prompt below changes (it is part of the HyDE cache key)."""

EXAMPLE_LABEL = "EXAMPLE:L1-2"
"""The label of the worked example's source: a placeholder that names no document (every doc_id holds a ``/``),
so a model that copies it gets ``unresolvable``, never a citation of something it was not shown."""

ANSWER_SYSTEM = (
    "You answer questions using only the numbered sources given. After every claim, cite the source it "
    "comes from by writing that source's label in square brackets exactly as it is given above the source's "
    "text. Cite only labels that appear among the sources of the question. The worked example's label "
    f"[{EXAMPLE_LABEL}] is a placeholder that names no real source: never cite it. If the sources do not hold "
    "the answer, say that they do not."
)

HYDE_SYSTEM = (
    "Write one short paragraph that would answer the question as a passage of documentation would. "
    "Do not say that you are guessing; do not add citations."
)


# One worked exchange before the real one: small models follow an example of the citation form far
# more often than an instruction alone. Its label is the placeholder above.
EXAMPLE_QUESTION = f"Sources:\n\nSource 1: [{EXAMPLE_LABEL}]\nTea is a drink made by steeping leaves in hot " \
                   "water.\n\nQuestion: What is tea?"
EXAMPLE_ANSWER = f"Tea is a drink made by steeping leaves in hot water [{EXAMPLE_LABEL}]."


def answer_messages(question: str, pack: Pack) -> list[Message]:
    """System instructions, one worked example, then the sources (``Source n: [label]`` above each text)
    and the question."""
    sources = [f"Source {i}: [{s.label}]\n{s.text}" for i, s in enumerate(pack.snippets, 1)]
    body = pack.separator.join(sources) if sources else "(no sources were found)"
    return [
        {"role": "system", "content": ANSWER_SYSTEM},
        {"role": "user", "content": EXAMPLE_QUESTION},
        {"role": "assistant", "content": EXAMPLE_ANSWER},
        {"role": "user", "content": f"Sources:\n\n{body}\n\nQuestion: {question}"},
    ]


def repair_messages(question: str, pack: Pack, answer: str) -> list[Message]:
    """The follow-up when an answer cites nothing: the same sources, the answer, and a request for labels."""
    labels = ", ".join(f"[{s.label}]" for s in pack.snippets)
    return [
        *answer_messages(question, pack),
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "Rewrite the answer, citing after every claim the label of the source it "
                                    f"comes from, in square brackets. The labels are: {labels}."},
    ]


def hyde_messages(question: str) -> list[Message]:
    return [{"role": "system", "content": HYDE_SYSTEM}, {"role": "user", "content": question}]
