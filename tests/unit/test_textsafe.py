from ragtui.core.textsafe import neutralize, one_line


def test_escape_sequences_are_made_visible():
    hostile = "ok\x1b[2J\x1b]0;pwned\x07 \x9b31m \u202eevil\r\n"
    shown = neutralize(hostile)
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown and "\u202e" not in shown
    assert shown.startswith("ok\u241b[2J\u241b]0;pwned\u2407")
    assert shown.endswith("evil\n")


def test_tabs_newlines_and_text_kept():
    assert neutralize("a\tb\nc é 東京") == "a\tb\nc é 東京"
    assert neutralize("lone\rcr") == "lone\u240dcr"


def test_one_line():
    assert one_line("a\n  b\tc", 10) == "a b c"
    assert one_line("x" * 20, 5) == "xxxx…"
