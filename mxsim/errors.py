"""User-facing errors: each prints as one line that says what is wrong and what to do."""

__all__ = ["MxsimError", "FormatError", "VectorFileError", "UnitError"]


class MxsimError(Exception):
    """A failure caused by user input (a file, a name, an option), reported in one line.

    The CLI prints it as ``mxsim: error: <message>`` and exits with status 2. Anything that is
    not an ``MxsimError`` is a bug in mxsim and keeps its traceback.
    """


class FormatError(MxsimError, ValueError):
    """An unknown format name, or a value a format cannot represent under the chosen policy."""


class VectorFileError(MxsimError, ValueError):
    """A vector-set file that is missing, unreadable or does not follow ``mxsim.vectors/1``."""


class UnitError(MxsimError, ValueError):
    """An unknown unit name, or a unit that cannot take the operands it was given."""
