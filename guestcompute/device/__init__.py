"""One VkDevice's services, no recording: device facts (``caps.py``), the
spec → pipeline resolver (``pipelines.py``), epochs, transfers, and the
:class:`~guestcompute.device.device.Device` that owns them."""
