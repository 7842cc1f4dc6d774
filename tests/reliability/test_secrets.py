"""An embedding API key never appears in meta.json (or any artifact), output, --json, errors or logs."""

from __future__ import annotations

import pytest

from tests.helpers.embed_server import EmbedServer
from tests.reliability.helpers_cli_http import check_secrets_cli, check_secrets_logs


@pytest.fixture(scope="module")
def server():
    with EmbedServer() as s:
        yield s


def test_key_stays_out_of_everything_the_command_writes(tmp_path, server):
    check_secrets_cli(tmp_path, server)


def test_key_stays_out_of_errors_and_log_records(tmp_path, server):
    check_secrets_logs(tmp_path, server)
