import pytest
from net_helpers import free_port


@pytest.fixture
def port() -> int:
    return free_port()
