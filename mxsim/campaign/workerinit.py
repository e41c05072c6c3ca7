"""A Dask worker preload for the workers of a local cluster: stopping is the client's.

A Ctrl-C on a terminal reaches every process of the foreground group, the local cluster's
worker processes included; each would print a KeyboardInterrupt traceback while the client is
already cancelling the campaign and closing the cluster. Workers started with this preload
ignore SIGINT (they are stopped by their nanny when the cluster closes). And when the client
stops (SIGTERM, Ctrl-C), its scheduler can close before a worker's next heartbeat, which
distributed then logs with a traceback on the terminal's stderr: that one record is dropped
(the client has already said in one line why the campaign stopped).
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

_HEARTBEAT = "Failed to communicate with scheduler during heartbeat"


class _NoHeartbeatError(logging.Filter):
    """Drops distributed's heartbeat-failure record; passes every other."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_HEARTBEAT)


def dask_setup(worker: Any) -> None:
    """Called by Dask in the worker process as the worker starts."""
    logging.getLogger("distributed.worker").addFilter(_NoHeartbeatError())
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
