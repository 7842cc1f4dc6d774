import pytest

from tests.reliability.cases import close_shared


@pytest.fixture(scope="session", autouse=True)
def _shared_for_the_session():
    """What the cases share (servers, folders built once) lives for the session, and is closed after it."""
    yield
    close_shared()
