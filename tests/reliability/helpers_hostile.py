"""Hostile documents: a folder built to break a naive indexer, and what ``sync`` must make of each file.

``build_hostile(root)`` makes ``root/docs`` (and ``root/outside``, which
symlinks point to) and returns the expectations: for each path, either the
skip reason it must be reported with (a substring) or ``INDEXED``. Then
``check_hostile`` runs ``sync`` while recording every file the document
reader opens, and checks: each expectation; nothing opened outside the
folder; no FIFO, device or oversized file ever opened; the index validates
and holds exactly the documents expected, with the right text.
"""

from __future__ import annotations

import functools
import os
import socket
import stat
from pathlib import Path

from ragtui.core import files as reader
from ragtui.core.index.index_format import read_index
from tests.reliability.cases import Case
from tests.reliability.helpers import write

INDEXED = "indexed"
SECRET = "TOPSECRET-OUTSIDE-THE-FOLDER"
BIG = (2 << 30) + 1  # just over 2 GiB, sparse: never read, never even opened

ODD_NAMES = [
    "with space.md", "new\nline.md", "tab\tname.md", "-dash.md", "a#b.md", "x#0.md", "emoji😀.md",
    "ctrl\x1b[2J\x1b]0;title\x07.md", "cr\r.md", "ü-nfc.md", "u\u0308-nfd.md", "back\\slash.md", 'quote".md',
    "'single'.md", "*star*.md", "?q.md", "a:b.md", " lead.md", "trail .md", "日本語.md", "\u202eevil.md",
    ("l" * 250) + ".md", "UPPER.MD.md", "dots...md",
]


def build_hostile(root: Path, *, ten_mb_line: bool = True, devices: bool = True) -> tuple[Path, dict]:
    folder, outside = root / "docs", root / "outside"
    expect: dict[str, str] = {}

    def doc(rel: str, content: str | bytes, outcome: str = INDEXED) -> None:
        write(folder / rel, content)
        expect[rel] = outcome

    write(outside / "secret.md", f"{SECRET}\n")
    write(outside / "dir" / "inner.md", f"{SECRET} inner\n")
    doc("plain.md", "An ordinary document about rivers and hills.\n")
    doc("binary.txt", b"text then \x00\x01\x02 binary", "binary")
    doc("elf.md", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4, "binary")
    doc("latin1.md", "café crème".encode("latin-1"), "not UTF-8")
    doc("truncated-utf8.md", "naïve".encode()[:-1] + b"\xc3", "not UTF-8")
    doc("bom.md", b"\xef\xbb\xbfbyte order mark first\n")
    doc("empty.md", b"")
    doc("blank.md", "   \n\n\t\n")
    doc("crlf.md", "windows\r\nline endings\r\n")
    big = folder / "huge.txt"
    with open(big, "wb") as f:
        f.truncate(BIG)
    expect["huge.txt"] = "larger than the"
    if ten_mb_line:
        # One line of 10 MB: long "words" with a space every 1,000 characters (minified data, base64).
        doc("oneline.txt", (("x" * 999 + " ") * 10_000).rstrip() + "\n")
    os.mkfifo(folder / "fifo.md")
    expect["fifo.md"] = "not a regular file"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "socket.md"))
    sock.close()
    expect["socket.md"] = "not a regular file"
    if devices and os.geteuid() == 0:
        try:
            os.mknod(folder / "zero.txt", stat.S_IFCHR | 0o666, os.makedev(1, 5))  # like /dev/zero
            os.mknod(folder / "loop.txt", stat.S_IFBLK | 0o666, os.makedev(7, 0))  # like /dev/loop0
            expect["zero.txt"] = expect["loop.txt"] = "not a regular file"
        except PermissionError:
            pass  # a container without CAP_MKNOD: the symlink below still covers devices
    (folder / "devzero.txt").symlink_to("/dev/zero")
    expect["devzero.txt"] = "pointing outside"
    (folder / "outside-abs.md").symlink_to(outside / "secret.md")
    expect["outside-abs.md"] = "pointing outside"
    (folder / "outside-rel.md").symlink_to("../outside/secret.md")
    expect["outside-rel.md"] = "pointing outside"
    (folder / "outside-dir").symlink_to(outside / "dir")  # a folder link: never walked
    (folder / "loop1.md").symlink_to("loop2.md")
    (folder / "loop2.md").symlink_to("loop1.md")
    (folder / "self.md").symlink_to("self.md")
    expect["loop1.md"] = expect["loop2.md"] = expect["self.md"] = "loop"
    (folder / "sub").mkdir()
    (folder / "sub" / "up.md").symlink_to("..")  # a link to a folder, with a document's name
    expect["sub/up.md"] = "not a regular file"
    (folder / "sub" / "up").symlink_to("../..")  # never walked: no escape through it
    (folder / "dangling.md").symlink_to("nowhere.md")
    expect["dangling.md"] = "vanished"
    doc("target.md", "The target of an inside link.\n")
    (folder / "alias.md").symlink_to("target.md")
    expect["alias.md"] = INDEXED
    doc("sub/deep/" + "/".join(f"d{i}" for i in range(40)) + "/bottom.md", "Forty folders down.\n")
    for name in ODD_NAMES:
        # A name with CR or LF would give chunk references that cannot be written on one line or typed back.
        outcome = "line break (CR or LF)" if "\n" in name or "\r" in name else INDEXED
        doc(f"odd/{name}", f"Odd name {name!r} document.\n", outcome)
    bad = os.fsencode(folder / "odd") + b"/bad-\xff\xfe.md"
    with open(bad, "wb") as f:
        f.write(b"a file whose name is not UTF-8\n")
    expect["odd/bad-\ufffd\ufffd.md"] = "not valid UTF-8"  # reported with the bad bytes replaced
    return folder, expect


class OpenRecorder:
    """Records every path the document reader (``reader.read_file``) opens; use as a context manager.

    ``opened`` holds what each open really reached (the kernel's path of the descriptor).
    """

    def __init__(self, before=None) -> None:
        self.opened: list[str] = []
        self._real = reader.read_file
        self._before = before  # called with the path just before each read (to change the disk under it)

    def __enter__(self) -> OpenRecorder:
        real_open = os.open
        recorder = self

        def read_file(path, max_bytes, *args, **kwargs):
            def traced_open(p, flags, *a, **k):
                fd = real_open(p, flags, *a, **k)
                try:
                    recorder.opened.append(os.readlink(f"/proc/self/fd/{fd}"))
                except OSError:
                    recorder.opened.append(os.path.realpath(p))
                return fd

            if recorder._before is not None:
                recorder._before(path)
            os.open = traced_open
            try:
                return recorder._real(path, max_bytes, *args, **kwargs)
            finally:
                os.open = real_open

        import ragtui.core.ingest.scan as sync_mod

        self._saved = (reader.read_file, sync_mod.read_file)
        reader.read_file = sync_mod.read_file = read_file
        return self

    def __exit__(self, *exc) -> None:
        import ragtui.core.ingest.scan as sync_mod

        reader.read_file, sync_mod.read_file = self._saved


def check_report(folder: Path, art: Path, report, expect: dict, recorder: OpenRecorder | None) -> list[str]:
    """Problems with what ``sync`` made of the hostile folder (empty when all is well)."""
    problems = []
    prefix = folder.name + "/"
    skipped = {}
    for path, reason in report.skipped:
        rel = os.path.relpath(path, folder) if os.path.isabs(path) else path
        skipped[rel] = reason
    data = read_index(art / "rag" / folder.name)
    docs = {r.doc_id for r in data.records}
    texts = "".join(r.text for r in data.records)
    for rel, outcome in expect.items():
        doc_id = prefix + rel
        if outcome == INDEXED:
            content = (folder / rel).read_bytes().decode("utf-8").lstrip("\ufeff")
            if content.strip() and doc_id not in docs:
                problems.append(f"{rel!r} was not indexed (skipped: {skipped.get(rel)!r})")
            if any(r.text not in content for r in data.records if r.doc_id == doc_id):
                problems.append(f"{rel!r}: a chunk's text is not in the file")
            if rel in skipped:
                problems.append(f"{rel!r} was indexed but also reported skipped: {skipped[rel]}")
        elif outcome not in (skipped.get(rel) or ""):
            problems.append(f"{rel!r}: expected skip reason {outcome!r}, got {skipped.get(rel)!r}")
        elif doc_id in docs:
            problems.append(f"{rel!r} was skipped and yet indexed")
    extra = docs - {prefix + rel for rel, o in expect.items() if o == INDEXED}
    if extra:
        problems.append(f"unexpected documents: {sorted(extra)[:5]}")
    if SECRET in texts:
        problems.append("text from outside the folder is in the index")
    if recorder is not None:
        real_folder = os.path.realpath(folder)
        for path in recorder.opened:
            if os.path.commonpath([path, real_folder]) != real_folder:
                problems.append(f"opened outside the folder: {path}")
            elif not stat.S_ISREG(os.stat(path).st_mode):
                problems.append(f"opened something that is not a regular file: {path}")
            elif os.stat(path).st_size >= BIG:
                problems.append(f"opened the 2 GiB file: {path}")
    return problems


def _hostile_folder() -> tuple[Path, dict]:
    from tests.reliability.cases import once

    return once("hostile-folder", build_hostile)


def hostile_run():
    """(folder, artifacts, report, expected outcomes, problems, open recorder) of one sync of the hostile folder."""
    from tests.reliability.cases import once
    from tests.reliability.helpers import run_sync

    def build(base: Path):
        folder, expect = _hostile_folder()
        art = base / "art"
        with OpenRecorder() as rec:
            report = run_sync(folder, art)
        return folder, art, report, expect, check_report(folder, art, report, expect, rec), rec

    return once("hostile-run", build)


def _safe_id(rel: str) -> str:
    return "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in rel)


def hostile_cases(size: str = "ci") -> list[Case]:
    """One case per hostile file (skipped with its reason or indexed correctly), one for the whole run
    (nothing from outside in the index, nothing irregular or outside opened), a second sync that writes
    nothing, and the size limit checked before reading."""
    _, expect = _hostile_folder()
    out = [Case(f"{k:02d}-{_safe_id(rel)}", functools.partial(_hostile_file, rel)) for k, rel in enumerate(expect)]
    return out + [Case("the-run", _hostile_general), Case("second-sync-writes-nothing", _hostile_again),
                  Case("size-limit-before-reading", _size_limit)]


def _hostile_file(rel: str, _tmp: Path) -> None:
    problems = [p for p in hostile_run()[4] if repr(rel) in p]
    assert problems == [], f"{rel!r}: {problems}"


def _hostile_general(_tmp: Path) -> None:
    _, _, report, expect, problems, _ = hostile_run()
    general = [p for p in problems if not any(repr(rel) in p for rel in expect)]
    assert general == [] and report.published, general


def _hostile_again(_tmp: Path) -> None:
    from tests.reliability.helpers import run_sync

    folder, art, *_ = hostile_run()
    assert not run_sync(folder, art).published, "a second sync of an unchanged folder published"


def _same_name_index(n: int):
    from tests.reliability.cases import once
    from tests.reliability.helpers import run_sync

    def build(base: Path):
        folder = base / "docs"
        for i in range(n):
            write(folder / f"d{i:05d}" / "notes.md", f"Notes number {i}.\n")
        art = base / "art"
        run_sync(folder, art)
        texts = {r.doc_id: r.text.strip() for r in read_index(art / "rag" / "docs").records}
        return folder, art, texts

    return once(("same-name", n), build)


SAME_NAME = {"ci": 2000, "full": 5000}


def same_name_cases(size: str = "ci") -> list[Case]:
    """``n`` folders each holding notes.md: one case per file (indexed under its own doc_id, with its
    text), and a second sync that writes nothing."""
    n = SAME_NAME[size]
    return [Case(f"d{i:05d}", functools.partial(_same_name_file, n, i)) for i in range(n)] + [
        Case("second-sync-writes-nothing", functools.partial(_same_name_again, n))]


def _same_name_file(n: int, i: int, _tmp: Path) -> None:
    doc_id = f"docs/d{i:05d}/notes.md"
    got = _same_name_index(n)[2].get(doc_id)
    assert got == f"Notes number {i}.", f"{doc_id}: {got!r}"


def _same_name_again(n: int, _tmp: Path) -> None:
    from tests.reliability.helpers import run_sync

    folder, art, _ = _same_name_index(n)
    assert not run_sync(folder, art).published, "a second sync of an unchanged folder published"


def _size_limit(base: Path) -> None:
    from ragtui.core.ingest.walk import WalkRules
    from tests.reliability.helpers import run_sync

    write(base / "docs" / "ok.md", "a" * 99 + "\n")
    write(base / "docs" / "over.md", "b" * 101)
    with open(base / "docs" / "sparse.md", "wb") as f:
        f.truncate(BIG)
    with OpenRecorder() as rec:
        run_sync(base / "docs", base / "art", rules=WalkRules(max_bytes=100))
    assert [Path(p).name for p in rec.opened] == ["ok.md"]
