"""The TUI's headless parts: what workers call, highlighting, number formats, the history."""

from __future__ import annotations

from ragtui.core.search.retriever import Retriever
from ragtui.tui import backend, fmt
from ragtui.tui.highlight import TERM_STYLE, highlighted, query_terms, snippet
from ragtui.tui.history import QueryHistory
from tests.helpers.imports import UI_LIBRARIES, loaded_by_import


def _lit(text) -> list[str]:
    return [text.plain[s.start : s.end] for s in text.spans if str(s.style) == TERM_STYLE]


def test_backend_loads_no_ui_library():
    assert loaded_by_import("ragtui.tui.backend", UI_LIBRARIES, resolve_all=True) == set()


def test_terms_are_lit_by_the_index_analyzer():
    terms = query_terms("BM25 Ranking!")
    assert terms == {"bm25": 1.0, "ranking": 1.0}
    text = highlighted("bm25 does ranking; BM25_x is not a term; RANKING is", terms)
    assert _lit(text) == ["bm25", "ranking", "RANKING"]  # "BM25_x" is one analyzer term, not "bm25"


def test_terms_are_lit_by_their_weight_in_the_index(demo_index):
    """A term in nearly every chunk ("the", "a") is not lit; a weaker term is lit less boldly than a strong one."""
    from ragtui.tui.highlight import WEAK_TERM_STYLE, query_weights

    r = backend.open_index(backend.locate_index(_settings(demo_index), None), _settings(demo_index))
    weights = query_weights(r.data.bm25, "the a ivf probe")
    assert "the" not in weights and "a" not in weights and weights["ivf"] > 0
    text = highlighted("the IVF lists: a probe of the lists", weights)
    lit = {text.plain[s.start : s.end].lower(): str(s.style) for s in text.spans}
    assert set(lit) <= {"ivf", "probe"} and "the" not in lit and "a" not in lit
    assert all(style in (TERM_STYLE, WEAK_TERM_STYLE) for style in lit.values())
    assert max(weights.values()) == 1.0


def _settings(demo_index):
    from ragtui.config import load_settings

    return load_settings().with_flags(artifacts=str(demo_index[0]))


def test_document_text_is_neutralised_before_display():
    text = highlighted("evil \x1b[2J title\x1b]0;owned\x07 end", frozenset())
    assert "\x1b" not in text.plain and "\x07" not in text.plain
    line = snippet("a\x1b[31mred\nline", frozenset({"red"}), 40)
    assert "\x1b" not in line.plain and "\n" not in line.plain


def test_a_snippet_is_one_line_around_the_first_term():
    body = "word " * 50 + "needle here " + "tail " * 50
    line = snippet(body, frozenset({"needle"}), 40)
    assert len(line.plain) <= 40 and line.plain.startswith("…") and line.plain.endswith("…")
    assert _lit(line) == ["needle"]
    assert snippet("short text", frozenset(), 40).plain == "short text"


def test_scores_and_times_are_formatted_for_people():
    assert fmt.score(12.3456, "bm25") == "12.35"
    assert fmt.score(0.812345, "flat") == "0.8123"
    assert fmt.score(0.0327869, "hybrid") == "0.03279"
    assert fmt.ms(0.000412) == "0.41 ms" and fmt.ms(0.0234) == "23.4 ms" and fmt.ms(0.4) == "400 ms"


def test_history_walks_like_a_shell_and_drops_repeats(tmp_path):
    h = QueryHistory(tmp_path / "h", limit=3)
    for q in ("a", "b", "a", "c", "d"):
        h.add(q)
    assert h.entries == ["a", "c", "d"]
    assert h.older("draft") == "d" and h.older("x") == "c" and h.older("x") == "a" and h.older("x") is None
    assert h.newer() == "c" and h.newer() == "d" and h.newer() == "draft" and h.newer() is None
    assert QueryHistory(tmp_path / "h").load().entries == ["a", "c", "d"]
    assert QueryHistory(tmp_path / "missing").load().entries == []


def test_compare_measures_overlap_and_ivf_recall(demo_index):
    from ragtui.config import Settings
    from ragtui.tui.backend import compare, open_index
    from tests.unit.fakes import HashEmbedder

    settings = Settings(artifacts=demo_index[0])
    retriever: Retriever = open_index(backend.locate_index(settings, None), settings)
    retriever.embedder = HashEmbedder()
    nlist, _ = backend.resolved_ivf(retriever)
    full = compare(retriever, "vectors and lists", 5, nlist, None)
    assert full.ivf_recall == 1.0 and full.overlap[("flat", "ivf")] == len(full.runs["flat"])
    off = compare(retriever, "vectors", 5, None, "no embedder")
    assert set(off.runs) == {"bm25"} and off.off == {"flat": "no embedder", "ivf": "no embedder"}
    assert off.overlap == {} and off.ivf_recall is None
    hit = off.runs["bm25"][0]
    assert off.rank_in("bm25", hit.chunk_id) == 1 and off.rank_in("flat", hit.chunk_id) is None


def test_the_ui_paints_at_up_to_240_frames_a_second_unless_told_otherwise():
    """Textual's 60 fps frame timer alone adds up to 17 ms to every keystroke: ragtui.tui raises the cap
    before Textual loads, and a TEXTUAL_FPS the person set wins."""
    import os
    import subprocess
    import sys

    probe = "import ragtui.tui, textual.constants as c; print(c.MAX_FPS)"
    env = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "240"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={**env, "TEXTUAL_FPS": "30"}, check=True)
    assert out.stdout.strip() == "30"


def test_the_nprobe_shown_is_the_calibrated_one_ivf_probes(demo_index):
    """The mode bar, the compare view and the index picker show what a search without nprobe really probes:
    the calibrated number, known once the lists are built (0, shown as "auto", before); never the fixed rule's."""
    from ragtui.config import Settings
    from ragtui.core.search.ivf import IVFParams
    from tests.unit.fakes import HashEmbedder

    settings = Settings(artifacts=demo_index[0])
    retriever = backend.open_index(backend.locate_index(settings, None), settings)
    retriever.embedder = HashEmbedder()
    nlist, nprobe = backend.resolved_ivf(retriever)
    assert nprobe == 0 and nlist == IVFParams().resolve(retriever.meta.n_chunks).nlist
    info = backend.build_ivf(retriever)
    ivf = retriever.ivf()
    assert ivf.calibration is not None and backend.resolved_ivf(retriever) == (ivf.nlist, ivf.default_nprobe)
    assert info.nprobe == ivf.default_nprobe == backend.index_stats(retriever, "built").nprobe
    assert retriever.snapshot().built_ivf() is ivf  # a snapshot shares the lists, it does not rebuild them
