"""Recording: the one Recorder and its targets — the host's command buffer
(``recorder.py``), a program's secondary (``program.py``) and the guest's own
semaphore hand-off submission (``handoff.py``) — plus GPU timestamps and
debug labels (``timing.py``)."""
