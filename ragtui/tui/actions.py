"""What the keys, the mouse and the command palette do: the app's actions.

``Actions`` is a mixin for ``RagtuiApp``; it changes the session's mode, k
and nprobe, follows a result to its source or to ``$EDITOR``, and opens the
other views. Everything slow it starts is a worker (``workers.Workers``).
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

from textual.app import SuspendNotSupported, SystemCommand

from ragtui.core.textsafe import inline
from ragtui.tui import backend, fmt
from ragtui.tui.screens.compare import CompareScreen
from ragtui.tui.screens.help import HelpScreen
from ragtui.tui.screens.indexes import IndexScreen
from ragtui.tui.session import Session
from ragtui.tui.widgets.mode_bar import LEXICAL_MODES, MODE_LABELS

if TYPE_CHECKING:
    from ragtui.core.search.retriever import Retriever

__all__ = ["K_STEPS", "Actions"]

K_STEPS = (1, 3, 5, 10, 20, 50, 100)
"""The values of k that + and - step through."""


class Actions:
    """Key, mouse and palette actions of ``RagtuiApp`` (see spec/tui.md for the keys)."""

    # The state these actions set, with the types ``Session`` gives it.
    index_id: str | None
    nprobe: int | None
    fusion: str | None

    def action_pick_index(self: Session) -> None:
        """Open the index picker (its choice is opened in a worker; esc keeps the open index)."""
        if not isinstance(self.screen, IndexScreen):
            self.push_screen(IndexScreen(self.index_id), self._index_picked)

    def _index_picked(self: Session, index_id: str | list[str] | None) -> None:
        if isinstance(index_id, list):  # two or more marked: searched together
            self.open_several_worker(index_id)
            return
        if index_id is None or (self.retriever is not None and index_id == self.index_id and not self.several):
            return
        self.index_id = index_id
        self.open_index_worker(index_id)

    def start_list_indexes(self: Session, screen) -> None:
        """List the indexes for ``screen`` (it receives ``IndexListed``)."""
        self.list_worker(screen)

    def start_index_stats(self: Session, screen, index_id: str) -> None:
        """Read ``index_id``'s stats for ``screen`` (it receives ``StatsReady``)."""
        self.stats_worker(screen, index_id, self.retriever, self.ivf_state_text())

    def ivf_state_text(self: Session) -> str:
        """The IVF lists' state in words, for the stats view."""
        if self.vectors == "off":
            return f"off: {self.vectors_reason}"
        if self.ivf_state == "built" and self.ivf_info is not None:
            i = self.ivf_info
            how = "from the cache" if i.from_cache else f"in {fmt.seconds(i.build_seconds)}"
            return f"built {how} (nlist {i.nlist}, default nprobe {i.nprobe})"
        if self.ivf_state == "building":
            return "building in the background…"
        return self.ivf_state

    def action_toggle_rerank(self: Session) -> None:
        """x: rerank the top candidates with the cross-encoder (the onnx extra), or stop reranking."""
        self.toggle_rerank()

    def action_set_mode(self: Session, mode: str) -> None:
        """Search with ``mode`` from now on; a vector mode that is off is refused with the reason."""
        if mode not in LEXICAL_MODES and self.vectors == "off":
            self.notify(f"{MODE_LABELS[mode]} is off: {self.vectors_reason}", title="vector search off",
                        severity="warning", timeout=6)
            return
        if mode != self.mode:
            self.mode = mode
            self.search_now()
            self._refresh()

    def action_toggle_fusion(self: Session) -> None:
        """f: hybrid's fusion rrf ↔ the configured one (the index's fit when none is; weighted when rrf is);
        the other keys of ``[search]`` stay; searches again in hybrid."""
        configured = self.settings.search.get("fusion")
        if self.fusion != "rrf":
            self.fusion = "rrf"
        else:
            self.fusion = configured if configured not in (None, "rrf") else ("weighted" if configured else None)
        if self.mode == "hybrid":
            self.search_now()
        else:
            self.notify(f"hybrid fusion: {self.ranking_shown()} (F4 searches with it)", timeout=3)
        self._refresh()

    def action_change_k(self: Session, delta: int) -> None:
        """Move k ``delta`` steps through ``K_STEPS`` and search again."""
        i = max(j for j, step in enumerate(K_STEPS) if step <= self.k)
        self.k = K_STEPS[min(len(K_STEPS) - 1, max(0, i + delta))]
        self.search_now()
        self._refresh()
        self._rerun_compare()

    def action_change_nprobe(self: Session, delta: int, factor: float = 1.0) -> None:
        """Add ``delta`` to nprobe, or multiply it by ``factor``; kept within 1..nlist."""
        if self.retriever is None or self.one_index_only("nprobe"):
            return
        nlist, default = backend.resolved_ivf(self.retriever)
        current = self.nprobe or default
        if not current:  # the calibrated default is not known yet: a step from a guess could lower recall
            self.notify("nprobe: the IVF lists are being built, and their calibrated nprobe with them; "
                        "change it once they are", timeout=4)
            return
        wanted = round(current * factor) if factor != 1.0 else current + delta
        self.nprobe = min(max(1, wanted), max(1, nlist))
        if self.mode == "ivf":
            self.search_now()
        self._refresh()
        self._rerun_compare()

    def _rerun_compare(self: Session) -> None:
        """The compare view shows the session's k and nprobe: run it again after they change."""
        if isinstance(self.screen, CompareScreen):
            self.screen.run()

    def nprobe_shown(self: Session) -> str:
        """"nprobe/nlist" as the bars show it ("–" without an index)."""
        if self.retriever is None:
            return "–"
        nlist, default = backend.resolved_ivf(self.retriever)
        return f"{self.nprobe or default or '–'}/{nlist}"

    def _selected_chunk(self: Session, chunk_id: str | None) -> str | None:
        if chunk_id:
            return chunk_id
        hit = self.main.results.selected_hit
        if hit is None or self.retriever is None:
            self.notify("select a result first", severity="warning", timeout=3)
            return None
        return hit.chunk_id

    def _selected_retriever(self: Session) -> Retriever | None:
        """The selected result's own index (several indexes: the one its row names), else the open one."""
        hit = self.main.results.selected_hit
        return self.retriever_for(hit) if hit is not None else self.retriever

    def action_jump(self: Session, chunk_id: str | None = None) -> None:
        """Open the source view at ``chunk_id`` (default: the selected result) once it is resolved."""
        chunk_id = self._selected_chunk(chunk_id)
        if chunk_id is not None:
            self.history.add(self.query_text)
            self.jump_worker(self._selected_retriever(), chunk_id, "jump")

    def action_edit(self: Session, chunk_id: str | None = None) -> None:
        """Open ``chunk_id``'s source (default: the selected result) in the editor at its line."""
        chunk_id = self._selected_chunk(chunk_id)
        if chunk_id is not None:
            self.jump_worker(self._selected_retriever(), chunk_id, "edit")

    def open_in_editor(self: Session, citation) -> None:
        """Suspend the app, run $VISUAL / $EDITOR on the citation's file at its first line, come back."""
        if citation.path is None or citation.status == "missing":
            self.notify(f"cannot open {citation.doc_id}: the source file is missing", severity="error")
            return
        if citation.page is not None:
            self.open_in_viewer(citation)
            return
        from ragtui.core.errors import RagtuiError

        try:
            argv = backend.editor_command(citation.path, citation.start_line)
        except RagtuiError as e:  # a $VISUAL/$EDITOR that is not a command: said, never raised
            self.notify(str(e), severity="error", timeout=8)
            return
        self.editor_runs.append(argv)
        try:
            with self.suspend():
                error = _call(argv, quiet=False)
        except SuspendNotSupported:
            error = _call(argv, quiet=True)  # no terminal to hand over (headless): just run it
        if error is not None:
            self.notify(f"cannot run {argv[0]!r}: {error}. Set $EDITOR (or $VISUAL) to your editor.",
                        severity="error", timeout=8)
        hit = self.main.results.selected_hit
        if hit is not None and self.retriever is not None:
            self.forget_citation()
            self.hit_highlighted(hit)  # the file may have changed: resolve its freshness again

    def open_in_viewer(self: Session, citation) -> None:
        """Start the user's document viewer on a paged document (a PDF) at the citation's page; the
        viewer has its own window, so the app stays as it is."""
        argv, notice = backend.viewer_command(citation.path, citation.page)
        self.editor_runs.append(argv)
        try:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        except OSError as e:
            self.notify(f"cannot run {argv[0]!r}: {e.strerror or e}. Set $RAGTUI_PDF_VIEWER to your PDF viewer.",
                        severity="error", timeout=8)
            return
        self.notify(notice or f"opened {citation.path.name} at page {citation.page}", timeout=8 if notice else 3)

    def action_copy_chunk_id(self: Session) -> None:
        """Copy the selected result's chunk_id."""
        chunk_id = self._selected_chunk(None)
        if chunk_id is not None:
            self.copy_chunk(chunk_id)

    def copy_chunk(self: Session, chunk_id: str) -> None:
        """Put ``chunk_id`` on the clipboard (``App.clipboard`` and OSC 52) and say so; on one line, with every
        control character as a visible stand-in (a pasted newline would run a command)."""
        self.copy_to_clipboard(inline(chunk_id))
        self.notify(f"copied {chunk_id}", timeout=2)

    def action_pack(self: Session) -> None:
        """Pack the results on screen into the pack budget (counted with the index's tokenizer), write the
        Markdown to the packs folder and copy it (``PackDone`` says where and how many tokens)."""
        from ragtui.core.answer.pack import DEFAULT_BUDGET, check_budget
        from ragtui.core.errors import RagtuiError

        if self.one_index_only("packing"):
            return
        hits = tuple(self.main.results.hits)
        if self.retriever is None or self.results is None or not hits:
            self.notify("nothing to pack: search first", severity="warning", timeout=3)
            return
        if self.embedder is None:
            why = ("it is still loading" if self.vectors == "loading"
                   else f"it could not be loaded ({self.vectors_reason})")
            self.notify(f"cannot pack yet: tokens are counted with the index's tokenizer, which comes with "
                        f"the embedder, and {why}", severity="warning", timeout=6)
            return
        try:
            budget = check_budget(self.settings.llm.get("context_tokens", DEFAULT_BUDGET))
        except RagtuiError as e:
            self.notify(f"cannot pack: {e}", severity="error", timeout=6)
            return
        tokenizer = getattr(self.embedder, "tokenizer", None)
        # The generation the results came from: packing reads the chunks of the hits, never a newer one's.
        source = self.results.snapshot or self.retriever
        self.pack_worker(source, tokenizer, self.results.request.query, hits, self.results.request.mode, budget)

    def action_compare(self: Session) -> None:
        """Open the compare view for the current query."""
        query = self.query_text.strip()
        if self.one_index_only("compare"):
            return
        if self.retriever is None or self.index_state != "ready":
            self.notify("no index to search yet", severity="warning", timeout=3)
        elif not query:
            self.notify("type a query first: compare runs it under flat, IVF and BM25", severity="warning")
        else:
            self.history.add(query)
            self.push_screen(CompareScreen(query))

    def start_compare(self: Session, screen: CompareScreen, query: str) -> None:
        """Run the comparison for ``screen`` with the current k and nprobe (it receives ``CompareDone``)."""
        off = None if self.vectors == "ready" else self.vectors_reason
        self.compare_worker(screen, self.retriever, query, self.k, self.nprobe, off,
                            backend.compare_params(self.settings))

    def action_reload(self: Session) -> None:
        """Check for a new generation now."""
        self.poll_index()

    def action_help(self: Session) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_toggle_theme(self: Session) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    def get_system_commands(self: Session, screen):
        yield from super().get_system_commands(screen)  # type: ignore[misc]  # App is further along the MRO
        for mode, label in MODE_LABELS.items():
            yield SystemCommand(f"Mode: {label}", f"search with {label}", lambda m=mode: self.action_set_mode(m))
        yield SystemCommand("Toggle fusion", "hybrid's fusion: rrf ↔ the fitted or configured", self.action_toggle_fusion)
        yield SystemCommand("Compare modes", "flat, IVF and BM25 side by side for this query", self.action_compare)
        yield SystemCommand("Pick index", "choose the index and see its stats", self.action_pick_index)
        yield SystemCommand("Jump to citation", "open the selected chunk's source", self.action_jump)
        yield SystemCommand("Open in $EDITOR", "the selected chunk's source at its line", self.action_edit)
        yield SystemCommand("Pack results", "pack the shown results into the token budget: a file and the clipboard",
                            self.action_pack)
        yield SystemCommand("Copy chunk_id", "copy the selected chunk_id", self.action_copy_chunk_id)
        yield SystemCommand("Reload index", "re-read the index if it changed on disk", self.action_reload)
        yield SystemCommand("Toggle light/dark", "switch between the light and dark themes", self.action_toggle_theme)
        yield SystemCommand("Help", "keys and views", self.action_help)


def _call(argv: list[str], *, quiet: bool) -> str | None:
    """Run ``argv`` to completion; the error as text when it could not be started."""
    try:
        if quiet:
            subprocess.call(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        else:
            subprocess.call(argv)
    except OSError as e:
        return e.strerror or str(e)
    return None
