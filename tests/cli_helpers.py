"""Running ``mxsim.cli.main`` in-process and checking its one-line errors (shared by the
CLI, bad-input and output tests)."""

from mxsim.cli import main


def run(capsys, *argv):
    """``main(argv)`` with every argument as a string: (exit code, stdout, stderr)."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line(err: str, text: str, prefix: str = "mxsim: error: ") -> None:
    """``err`` is one line, no traceback, starting with ``prefix`` and containing ``text``."""
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith(prefix), err
    assert text in err, err
