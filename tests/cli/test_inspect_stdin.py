"""`ragtui inspect -` reads its references from stdin within a bound: an endless or oversized stream is one
error line (exit 2), never a hang or memory held without limit."""

from __future__ import annotations

import json
import resource
import subprocess

import pytest

from ragtui.commands.inspect import MAX_STDIN_BYTES
from ragtui.core.ingest.sync import sync
from tests.helpers.cli import one_error_line, ragtui_exe, run
from tests.unit.fakes import HashEmbedder


@pytest.fixture()
def art(tmp_path):
    docs = tmp_path / "src" / "docs"
    docs.mkdir(parents=True)
    (docs / "a.md").write_text("".join(f"Paragraph {i} is about topic {i}.\n\n" for i in range(8)), encoding="utf-8")
    out = tmp_path / "art"
    sync(docs, artifacts=out, embedder=HashEmbedder(), max_tokens=16, overlap=4)
    return out


def test_references_piped_on_stdin_resolve(art):
    r = run("inspect", "-", "--artifacts", art, "--json", stdin="[docs/a.md#0] and [docs/a.md#1]\n")
    assert r.code == 0, r.err
    assert [json.loads(line)["chunk_id"] for line in r.out.splitlines()] == ["docs/a.md#0", "docs/a.md#1"]


def test_stdin_past_the_bound_is_refused_with_one_line(art):
    r = run("inspect", "-", "--artifacts", art, stdin=b"docs/a.md#0 " * (MAX_STDIN_BYTES // 12 + 1))
    assert r.code == 2 and one_error_line(r.err), r.err
    assert "more than 16 MiB" in r.err


def test_stdin_that_is_not_utf8_is_refused_with_one_line(art):
    r = run("inspect", "-", "--artifacts", art, stdin=b"docs/a.md#0 \xff\xfe\n")
    assert r.code == 2 and one_error_line(r.err) and "not UTF-8" in r.err, r.err


def _address_space_limit():  # the child may not hold more than 1 GiB of address space
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_an_endless_stdin_ends_in_an_error_within_bounded_memory(art):
    # The process is the contract here: its stdin is /dev/zero, a stream that never ends.
    with open("/dev/zero", "rb") as zero:
        done = subprocess.run([*ragtui_exe(), "inspect", "-", "--artifacts", str(art)], stdin=zero,
                              capture_output=True, text=True, timeout=120, preexec_fn=_address_space_limit)
    assert done.returncode == 2 and one_error_line(done.stderr), done.stderr
