"""Test-suite setup: the tests folder is importable (for helpers such as mmasim_adapter)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
