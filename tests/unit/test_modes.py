"""The mode table is the one place a mode is described: every front end's list of modes is read from it, and
every row has its ranking in Retriever (adding a mode is a row and a ``_rank_<name>`` method)."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

from ragtui.core.search import modes
from ragtui.core.search.modes import MODE_TABLE, MODES
from ragtui.core.search.retriever import PARAMS, Retriever


def test_every_mode_has_its_ranking_and_one_key():
    for m in MODE_TABLE:
        assert callable(getattr(Retriever, f"_rank_{m.name}", None)), m.name
        assert PARAMS[m.name] == m.options and m.kind in ("lexical", "vector", "fusion")
        lo, hi = m.score_range
        assert lo < hi and m.help and m.label and m.short
    assert len({m.key for m in MODE_TABLE}) == len(MODE_TABLE) == len(set(MODES))
    assert modes.LEXICAL_MODES == tuple(m.name for m in MODE_TABLE if not m.needs_embedder)


def test_the_cli_the_mcp_schema_eval_and_the_tui_read_the_table():
    from ragtui import cli
    from ragtui.commands import eval as eval_command
    from ragtui.mcp.tools import TOOLS
    from ragtui.tui.keys import mode_bindings
    from ragtui.tui.widgets.mode_bar import LEXICAL_MODES, MODE_KEYS, MODE_LABELS

    out = io.StringIO()
    with redirect_stdout(out):
        try:
            cli.main(["search", "--help"])
        except SystemExit:
            pass
    helped = " ".join(out.getvalue().split())
    for m in MODE_TABLE:
        assert f"{m.name}: {m.help}" in helped
    for tool in TOOLS:
        if "mode" in tool.properties:
            assert tool.properties["mode"]["enum"] == list(MODES)
    assert eval_command.MODES == MODES
    assert {b.key for b in mode_bindings(function_keys=True)} == {f"f{m.key}" for m in MODE_TABLE}
    assert {b.action for b in mode_bindings(function_keys=False)} == {f"app.set_mode('{m}')" for m in MODES}
    assert set(MODE_LABELS) == set(MODE_KEYS) == set(MODES) and LEXICAL_MODES == modes.LEXICAL_MODES
