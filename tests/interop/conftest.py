"""Two contexts on two VkDevices of one physical device (the "modern"
host and the second one, both validated; see tests/conftest.py)."""
import pytest


@pytest.fixture
def pair(modern_host, second_host):
    """(host A, ctx A, host B, ctx B), both able to share memory."""
    a, b = modern_host.adopt(), second_host.adopt()
    if not (a.caps.external_memory_fd and b.caps.external_memory_fd):
        a.close(), b.close()
        pytest.skip("the device does not offer VK_KHR_external_memory_fd")
    yield modern_host, a, second_host, b
    a.close()
    b.close()
