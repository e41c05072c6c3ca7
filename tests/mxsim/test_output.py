"""Output files (issue 14, finding 8): every file mxsim writes goes through one helper that
writes a uniquely named temporary file and renames it over a regular file or a new path, and
refuses directories and special files (devices, FIFOs) without touching them."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import one_line as _one_line
from cli_helpers import run as _run

from mxsim import output, vectors
from mxsim.cli import main
from mxsim.errors import VectorFileError
from mxsim.output import OutputError, check_output, open_output, write_text


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _fifo(tmp_path: Path, name: str = "pipe") -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


# -- the helper -----------------------------------------------------------------------------

def test_output_writes_a_new_file_and_leaves_no_temporary(tmp_path):
    write_text(tmp_path / "a.txt", "hello\n")
    assert (tmp_path / "a.txt").read_text() == "hello\n"
    assert _names(tmp_path) == ["a.txt"]


def test_output_replaces_a_regular_file_keeping_its_mode(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("old")
    path.chmod(0o640)
    write_text(path, "new")
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert _names(tmp_path) == ["a.txt"]


def test_output_new_file_mode_follows_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_text(tmp_path / "a.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o640


def test_output_refuses_a_directory(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(OutputError, match=r"d: cannot write \(Is a directory\)$"):
        write_text(tmp_path / "d", "x")
    assert (tmp_path / "d").is_dir() and _names(tmp_path / "d") == []
    assert _names(tmp_path) == ["d"]


def test_output_refuses_a_fifo_and_leaves_it_a_fifo(tmp_path):
    pipe = _fifo(tmp_path)
    with pytest.raises(OutputError, match=r"pipe: cannot write \(a FIFO\); mxsim writes only "
                                          r"regular files, so give a file path$"):
        write_text(pipe, "x")
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
    assert _names(tmp_path) == ["pipe"]


@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
def test_output_refuses_devices_and_leaves_them_devices(device):
    before = os.stat(device)
    assert stat.S_ISCHR(before.st_mode)
    with pytest.raises(OutputError, match=rf"^{device}: cannot write \(a character device\)"):
        write_text(device, "x")
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert not [p for p in os.listdir("/dev") if p.endswith(".tmp")]


def test_output_refuses_a_missing_folder_and_a_trailing_slash(tmp_path):
    with pytest.raises(OutputError, match=r"no/a.txt: directory does not exist$"):
        write_text(tmp_path / "no" / "a.txt", "x")
    with pytest.raises(OutputError, match=r"new/: cannot write \(a folder name ends in '/'\)"):
        write_text(f"{tmp_path}/new/", "x")
    with pytest.raises(OutputError, match=r"^The output path must not be empty$"):
        write_text("", "x")
    assert _names(tmp_path) == []


def test_output_refuses_stdout_when_it_is_a_pipe(tmp_path):
    code = ("import sys\nfrom mxsim.output import write_text, OutputError\n"
            "try:\n    write_text('/dev/stdout', 'x')\n"
            "except OutputError as e:\n    print(e, file=sys.stderr)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert p.stdout == ""
    assert p.stderr == ("/dev/stdout: cannot write (a FIFO); mxsim writes only regular files, "
                        "so give a file path\n")


def test_output_follows_a_symlink_and_keeps_the_link(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    assert _names(tmp_path) == ["link.txt", "target.txt"]
    # A link to a device is refused like the device.
    dev = tmp_path / "null"
    dev.symlink_to("/dev/null")
    with pytest.raises(OutputError, match="a character device"):
        write_text(dev, "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()],
                         ids=["exception", "ctrl-c"])
def test_output_failure_removes_the_temporary_and_keeps_the_old_file(tmp_path, exc):
    path = tmp_path / "a.txt"
    path.write_text("old")
    with pytest.raises(type(exc)):
        with open_output(path, "w") as fh:
            fh.write("half")
            assert len([p for p in _names(tmp_path) if p.endswith(".tmp")]) == 1
            raise exc
    assert path.read_text() == "old"
    assert _names(tmp_path) == ["a.txt"]


def test_output_disk_full_is_one_line_and_removes_the_temporary(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output.os, "replace", full)
    with pytest.raises(OutputError, match=r"a.txt: cannot write \(No space left on device\)$"):
        write_text(tmp_path / "a.txt", "x")
    assert _names(tmp_path) == []


def test_output_target_turned_special_before_the_rename_is_not_replaced(tmp_path):
    path = tmp_path / "a"
    with pytest.raises(OutputError, match="a FIFO"):
        with open_output(path, "w") as fh:
            fh.write("x")
            os.mkfifo(path)                  # appears while the temporary is being written
    assert stat.S_ISFIFO(os.lstat(path).st_mode)
    assert _names(tmp_path) == ["a"]


def test_output_temporary_names_are_unique(tmp_path):
    path = tmp_path / "a.txt"
    with open_output(path, "w") as f1, open_output(path, "w") as f2:
        assert f1.name != f2.name
        f1.write("one")
        f2.write("two")
    assert path.read_text() == "one"         # the outer block closes last
    assert _names(tmp_path) == ["a.txt"]


def test_output_check_output_returns_the_real_path(tmp_path):
    (tmp_path / "t").write_text("")
    (tmp_path / "l").symlink_to(tmp_path / "t")
    assert check_output(tmp_path / "l") == (tmp_path / "t").resolve()
    assert check_output(tmp_path / "new") == (tmp_path / "new").resolve()


def test_output_vectors_save_refuses_a_fifo_with_its_error_class(tmp_path):
    pipe = _fifo(tmp_path, "set.npz")
    vs = vectors.generate("normal", m=2, n=2, k=32)
    with pytest.raises(VectorFileError, match="a FIFO"):
        vectors.save(vs, pipe)
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)


# -- every verb that writes -----------------------------------------------------------------

@pytest.fixture
def sets(tmp_path, capsys):
    """An input set, a result of it and a float array, in a folder of their own."""
    d = tmp_path / "in"
    d.mkdir()
    assert main(["vectors", "gen", "--family", "normal", "-o", str(d / "in.npz")]) == 0
    assert main(["run", str(d / "in.npz"), "-o", str(d / "res.npz")]) == 0
    np.save(d / "x.npy", np.linspace(-3, 3, 64, dtype=np.float32).reshape(2, 32))
    assert main(["probe", "-k", "32", "-o", str(d / "probe.npz")]) == 0
    assert main(["run", str(d / "probe.npz"), "--unit", "hopper-wgmma", "-o",
                 str(d / "obs.npz")]) == 0
    capsys.readouterr()
    return d


def _writers(d: Path) -> dict[str, list[str]]:
    return {
        "vectors gen": ["vectors", "gen", "--family", "normal", "-o"],
        "run": ["run", str(d / "in.npz"), "-o"],
        "probe": ["probe", "-o"],
        "quantize": ["quantize", str(d / "x.npy"), "-o"],
        "fit": ["fit", str(d / "probe.npz"), str(d / "obs.npz"), "-o"],
        "rtl": ["rtl", "--lanes", "4", "-o"],
        "compare --plot": ["compare", str(d / "res.npz"), "--unit", "exact", "--plot"],
    }


WRITERS = ["vectors gen", "run", "probe", "quantize", "fit", "rtl", "compare --plot"]


@pytest.mark.parametrize("verb", WRITERS)
def test_output_cli_refuses_a_fifo(sets, tmp_path, capsys, verb):
    pipe = _fifo(tmp_path, "out")
    rc, _, err = _run(capsys, *_writers(sets)[verb], pipe)
    assert rc == 2
    _one_line(err, "out: cannot write (a FIFO)")
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
    assert _names(tmp_path) == ["in", "out"]


@pytest.mark.parametrize("verb", WRITERS)
def test_output_cli_refuses_a_directory_and_leaves_no_temporary(sets, tmp_path, capsys, verb):
    out = tmp_path / "out"
    out.mkdir()
    rc, _, err = _run(capsys, *_writers(sets)[verb], out)
    assert rc == 2
    _one_line(err, "out: cannot write (Is a directory)")
    assert _names(out) == [] and _names(tmp_path) == ["in", "out"]


@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
@pytest.mark.parametrize("verb", ["run", "rtl", "fit"])
def test_output_cli_leaves_devices_alone(sets, capsys, verb, device):
    rc, _, err = _run(capsys, *_writers(sets)[verb], device)
    assert rc == 2
    _one_line(err, f"{device}: cannot write (a character device)")
    assert stat.S_ISCHR(os.stat(device).st_mode)


@pytest.mark.parametrize("verb", ["rtl", "fit"])
def test_output_cli_rtl_and_fit_leave_no_fixed_tmp(sets, tmp_path, capsys, verb):
    out = tmp_path / ("u.v" if verb == "rtl" else "fitted.toml")
    rc, stdout, _ = _run(capsys, *_writers(sets)[verb], out)
    assert rc == 0, stdout
    assert out.stat().st_size > 0 and f"wrote {out}" in stdout
    assert _names(tmp_path) == sorted(["in", out.name])


def test_output_cli_run_onto_dev_full_in_a_subprocess(sets):
    """`mxsim run in.npz -o /dev/full` (the reported case) from the shell."""
    p = subprocess.run([sys.executable, "-m", "mxsim", "run", str(sets / "in.npz"), "-o",
                        "/dev/full"], capture_output=True, text=True, check=False,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == ("mxsim: error: /dev/full: cannot write (a character device); mxsim "
                        "writes only regular files, so give a file path\n")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
