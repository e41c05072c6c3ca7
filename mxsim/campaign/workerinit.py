"""A Dask worker preload for the workers of a local cluster: Ctrl-C is the client's.

A Ctrl-C on a terminal reaches every process of the foreground group, the local cluster's
worker processes included; each would print a KeyboardInterrupt traceback while the client is
already cancelling the campaign and closing the cluster. Workers started with this preload
ignore SIGINT (they are stopped by their nanny when the cluster closes).
"""

from __future__ import annotations

import signal
import threading
from typing import Any


def dask_setup(worker: Any) -> None:
    """Called by Dask in the worker process as the worker starts."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
