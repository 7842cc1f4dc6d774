"""The embedding backend failing during ingest: no publish, the index intact, a clear message, no work redone."""

from __future__ import annotations

import pytest

from tests.reliability.helpers_embed import FAULTS, check_dying_server, check_fault


@pytest.mark.parametrize("name", list(FAULTS))
def test_backend_fault(tmp_path, name):
    check_fault(tmp_path, name)


def test_server_killed_mid_run(tmp_path):
    check_dying_server(tmp_path)


@pytest.fixture(scope="module")
def server():
    from tests.helpers.embed_server import EmbedServer

    with EmbedServer(hang_limit=60.0) as s:
        yield s


@pytest.mark.parametrize("fault", ["dead", "garbage", "hang", "nan"])
def test_cli_exits_3_and_keeps_the_index(tmp_path, server, fault):
    from tests.reliability.helpers_cli_http import check_backend_cli

    check_backend_cli(tmp_path, server, fault)
