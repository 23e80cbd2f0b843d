import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


from tests.full_disk import full_disk  # noqa: E402, F401 -- the fixture, for every test package
from tests.runtime_dir import private_runtime_dir  # noqa: E402, F401 -- daemon records kept out of $HOME
from tests.scheduling import pytest_collection_modifyitems  # noqa: E402, F401 -- longest test files first
from tests.temp_root import pytest_configure  # noqa: E402, F401 -- temporary files on a tmpfs
