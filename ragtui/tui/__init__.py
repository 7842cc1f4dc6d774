"""The Textual terminal UI of ragtui.

``ragtui.tui.ragtui_app.create_app(settings, ...)`` builds the app (the CLI and the
tests use it); ``ragtui.tui.launch.launch(args)`` runs it for ``ragtui``
with no subcommand. The UI calls ``ragtui.core`` (``Retriever``, citations)
and ``ragtui.watch`` only, through ``ragtui.tui.backend``; it never reads
index files itself.
"""

import os

FRAME_RATE = 240
"""The most frames per second Textual may paint (its ``TEXTUAL_FPS``; Textual's own default is 60).

Textual paints a changed screen on a timer of 1/fps seconds, so at 60 a
keystroke's results wait up to 17 ms for their frame on top of the work.
Measured with bench/bench_tui.py at 100k chunks (back to back, load ~2 on 2
cores): keystroke to rendered results 37 ms median at 60, 21 ms at 240. A
frame is painted only when something changed, so an idle screen costs
nothing more. Set before Textual is first imported (importing ``ragtui.tui``
does it); a ``TEXTUAL_FPS`` in the environment wins.
"""

os.environ.setdefault("TEXTUAL_FPS", str(FRAME_RATE))
