"""The argument parser of every verb."""

from __future__ import annotations

import argparse
from typing import Any

from .. import __version__, units, vectors
from ..vectors.importers import KM_REPOSITORY, LAYOUTS
from . import array, exploring, fitting, gpus, listing, quantizing, rtl, running, torch_eval
from .common import Parser, add_allow_large, int_range

__all__ = ["quantize_parser", "add_rtl_unit_args", "build_parser"]


def quantize_parser(sub: Any) -> None:
    rules = ("floor", "ceil", "even", "rceil", "ocp", "rceil-sat")
    desc = ("quantise a float .npy array to MX (E8M0 scales) or NVFP4 and write a vector set "
            "whose other operand is the identity; or, with --compare, report how the scale "
            "rules differ on it")
    qp = sub.add_parser("quantize", help="quantise a float array to MX or NVFP4 codes",
                        description=desc)
    qp.set_defaults(func=quantizing.cmd_quantize)
    qp.add_argument("input", metavar="IN.npy",
                    help="float32, bfloat16 (as numpy.save writes ml_dtypes.bfloat16), float16 "
                         "or float64 array")
    qp.add_argument("--elem", default=None, metavar="FMT",
                    help="element format: e4m3 e5m2 e3m2 e2m3 e2m1 int8 (default: e4m3, or "
                         "e2m1 with --nvfp4)")
    qp.add_argument("--block", type=int_range(1), default=None, metavar="N",
                    help="elements per scale (default: 32, or 16 with --nvfp4)")
    # Options read in some modes only default to None: given where they do not apply, they
    # are refused (quantizing._READ_IN), not ignored.
    qp.add_argument("--scale-rule", default=None, choices=rules,
                    help="E8M0 scale rule, see docs/quantize.md (default: floor)")
    qp.add_argument("--rounding", default=None, choices=("rne", "rz", "stochastic"),
                    help="element rounding (default: rne)")
    qp.add_argument("--seed", type=int_range(0), default=None, metavar="N",
                    help="seed of stochastic rounding's random bits (default: fresh)")
    qp.add_argument("--as", dest="operand", default=None, choices=("a", "b"),
                    help="write the array as A (blocks along its last axis) or B (blocks along "
                         "axis -2) (default: a)")
    qp.add_argument("--nvfp4", action="store_true",
                    help="NVFP4: e2m1 elements, ue4m3 scales of 16, FP32 per-tensor scale")
    qp.add_argument("--per-tensor-scale", type=float, default=None, metavar="X",
                    help="NVFP4 per-tensor scale (default: amax / (448 * 6))")
    qp.add_argument("--two-d", action="store_true", help="NVFP4 16x16 tile scales")
    qp.add_argument("--allow-nan-blocks", action="store_true",
                    help="quantise blocks of nothing but NaN as the rule's peer does "
                         "(default: refuse them)")
    qp.add_argument("--compare", action="store_true",
                    help="print, per scale rule, the blocks whose scale differs and the error "
                         "against the input, instead of writing a file")
    qp.add_argument("--axis", type=int, default=None,
                    help="axis of the blocks for --compare (default: -1)")
    qp.add_argument("-o", "--output", default=None, metavar="OUT.npz", help="file to write")
    add_allow_large(qp)
    qp.add_argument("--json", action="store_true", help="print JSON instead of text")


def add_rtl_unit_args(sp: argparse.ArgumentParser, unit: str, note: str, stages: int,
                      rtl_map: bool = False) -> None:
    if rtl_map:
        sp.add_argument("--rtl", default=None, metavar="MAP.toml",
                        help="verify your own RTL, described by a port map (docs/foreign-rtl.md)"
                             "; --unit then names the spec it must reproduce")
    sp.add_argument("--unit", default=None if rtl_map else unit,
                    help=f"preset name or spec file (default: {unit}{note}"
                         f"{'; required with --rtl' if rtl_map else ''})")
    sp.add_argument("--a-format", default=None,
                    help="A's element format (default: e4m3 where the unit takes it, else its "
                         "first pair's; or the port map's)")
    sp.add_argument("--b-format", default=None, help="B's element format (default: A's)")
    sp.add_argument("--scale", default=None, metavar="FMT/BLOCK",
                    help="the preset's scale configuration, e.g. ue4m3/16 for "
                         "blackwell-mxf4nvf4 (default: its first)")
    sp.add_argument("--lanes", type=int, default=None,
                    help="products per cycle (default: the unit's k)")
    sp.add_argument("--stages", type=int, default=stages,
                    help=f"register stages after the accumulator, 1-3 (default: {stages})")


def build_parser() -> argparse.ArgumentParser:  # noqa: PLR0915 (one add_argument per option)
    p = Parser(
        prog="mxsim", description="Bit-exact models of block-scaled (MX, NVFP4) dot-product "
                                  "units: formats, vector sets, units, comparisons.")
    p.add_argument("--version", action="version", version=f"mxsim {__version__}")
    p.add_argument("--debug", action="store_true",
                   help="print the traceback of an internal error (also accepted after the "
                        "verb)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, func, help: str, json_flag: bool = True) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(func=func)
        if json_flag:
            sp.add_argument("--json", action="store_true", help="print JSON instead of text")
        return sp

    add("formats", listing.cmd_formats, "list the element, scale and output formats")
    up = add("units", listing.cmd_units, "list the units with their provenance; with --spec, print "
                                 "a preset's spec as TOML to start a unit of your own")
    up.add_argument("--spec", default=None, metavar="NAME",
                    help="print this preset's spec as TOML (load it back with --unit FILE.toml)")
    up.add_argument("--a-format", default=None, metavar="FMT",
                    help="with --spec: A's element format (default: the preset's first pair); "
                         "without it: list only the units that take this format for A")
    up.add_argument("--brief", action="store_true",
                    help="one line per unit: its name and what it models")
    up.add_argument("--b-format", default=None, metavar="FMT",
                    help="with --spec: B's element format (default: A's)")
    up.add_argument("--scale-format", default=None, metavar="FMT",
                    help="with --spec: block scale format, or none (default: the preset's "
                         "first)")
    up.add_argument("--block", type=int, default=None, metavar="N",
                    help="with --spec: scale block size (default: the preset's for the scale "
                         "format)")
    up.add_argument("--c-format", default=None, metavar="FMT",
                    help="with --spec: format of C and D (default: the preset's first)")

    rp = add("rtl", rtl.cmd_rtl, "Verilog of a unit's datapath, its lint and Yosys statistics")
    add_rtl_unit_args(rp, "hopper-wgmma", "", stages=1)
    rp.add_argument("-o", "--output", default=None, metavar="OUT.v", help="write the Verilog")
    rp.add_argument("--lint", action="store_true",
                    help="lint the written Verilog with Verilator -Wall (exit 1 on warnings)")
    rp.add_argument("--stats", action="store_true", help="synthesise with Yosys and report")
    rp.add_argument("--fpga", choices=("lut4", "ice40", "none"), default="lut4",
                    help="with --stats: lut4 (abc -lut 4 estimate, little time beyond the "
                         "generic synthesis), ice40 (synth_ice40: 5 to 30 min at 32 lanes) or "
                         "none (default: %(default)s)")
    rp.add_argument("--no-ice40", action="store_true", help=argparse.SUPPRESS)  # = --fpga none

    ve = add("verify", rtl.cmd_verify, "simulate a unit's RTL and check it against the model "
                                   "bit and cycle exactly, with coverage")
    add_rtl_unit_args(ve, "blackwell-mxf8f6f4", ", MXFP8", stages=2, rtl_map=True)
    ve.add_argument("--sim", choices=("verilator", "icarus"), default="verilator",
                    help="simulator (default: %(default)s)")
    ve.add_argument("--vectors", type=int, default=20000,
                    help="dot products to check (default: %(default)s)")
    ve.add_argument("--seed", type=int_range(0), default=0,
                    help="stimulus seed (default: 0)")
    ve.add_argument("--chunk", type=int_range(1, 1_000_000), default=4000,
                    help="dot products per simulator run, at most 1,000,000 (default: "
                         "%(default)s)")
    ve.add_argument("--bulk", action="store_true",
                    help="the C++ harness instead of cocotb (millions of vectors)")
    ve.add_argument("--out", default="mxsim-verify", metavar="DIR",
                    help="builds, reports and failing sets (default: %(default)s)")
    ve.add_argument("--replay", default=None, metavar="FAILING.npz",
                    help="run exactly this vector set (a failing set a run wrote)")
    ve.add_argument("--waves", action="store_true", help="write a waveform (FST/VCD)")
    add_allow_large(ve)
    ve.add_argument("--campaign", nargs="?", const="all", default=None, metavar="PAIRS",
                    help="every supported format pair (or a list: e4m3xe5m2,int8xint8) "
                         "through the bulk harness as campaign tasks on a Dask cluster "
                         "(docs/verification.md); --vectors per pair")
    ve.add_argument("--workers", type=int_range(1), default=None, metavar="N",
                    help="with --campaign: local workers, on Dask or (without Dask) a process "
                         "pool (default: one per core)")
    ve.add_argument("--scheduler", default=None, metavar="ADDR",
                    help="with --campaign: a running Dask scheduler, tcp://HOST:PORT")
    ve.add_argument("--cluster-spec", default=None, metavar="FILE",
                    help="with --campaign: a dask-jobqueue cluster (docs/campaigns.md)")
    ve.add_argument("--store", default=None, metavar="DIR",
                    help="with --campaign: the result store (default: OUT/store)")
    ve.add_argument("--build-cache", default=None, metavar="DIR",
                    help="with --campaign: the Verilator build cache, shared by the workers "
                         "(default: ~/.cache/mxsim/builds on each machine)")

    ex = add("explore", exploring.cmd_explore,
             "sweep unit designs over workloads: accuracy (engine), area (Yosys on the RTL) and "
             "throughput (cycle model)")
    ex.add_argument("sweep", metavar="SWEEP.toml", help="the sweep file (docs/explore.md)")
    ex.add_argument("-o", "--out", default=None, metavar="DIR",
                    help="results, plots, report and cache (default: results/NAME)")
    ex.add_argument("-j", "--jobs", type=int_range(1), default=None, metavar="N",
                    help="tasks run in parallel: N local workers (on Dask, or a process pool "
                         "without Dask), 1 in this process (default: one worker per core)")
    ex.add_argument("--workers", type=int_range(1), dest="jobs", metavar="N",
                    help="the same as -j")
    ex.add_argument("--scheduler", default=None, metavar="ADDR",
                    help="run the tasks on a running Dask scheduler (tcp://HOST:8786)")
    ex.add_argument("--cluster-spec", default=None, metavar="FILE",
                    help="run the tasks on a dask-jobqueue cluster (SLURM, LSF, ...) built "
                         "from FILE (docs/campaigns.md)")
    ex.add_argument("--fresh", action="store_true", help="discard the cache and rerun all")
    ex.add_argument("--check", action="store_true",
                    help="only read and check the sweep file")
    ex.add_argument("--fpga", choices=("ice40", "lut4", "none"), default=None,
                    help="override the file's cost.fpga: ice40 (synth_ice40, minutes per "
                         "design), lut4 (abc -lut 4 estimate, seconds) or none")
    ex.add_argument("--no-progress", action="store_true", help="no progress bar")

    vp = sub.add_parser("vectors", help="generate or inspect vector sets",
                        description="generate or inspect vector sets (mxsim.vectors/1 .npz)")
    vsub = vp.add_subparsers(dest="vectors_command", metavar="ACTION", required=True)
    g = vsub.add_parser("gen", help="generate a seeded vector set",
                        description="generate a seeded vector set; families: "
                                    + ", ".join(vectors.FAMILIES))
    g.set_defaults(func=running.cmd_vectors_gen)
    g.add_argument("--family", default="all", metavar="NAME[,NAME]",
                   help="generator family, a comma list, or 'all' (default: %(default)s): "
                        f"{', '.join(vectors.FAMILIES)}; also, outside 'all': "
                        f"{', '.join(vectors.EXTRA_FAMILIES)} (docs/vectors.md)")
    g.add_argument("--a-format", default="e4m3", metavar="FMT",
                   help="element format of A (default: %(default)s): an MX element format, "
                        "fp16, bf16 or tf32")
    g.add_argument("--b-format", default=None, metavar="FMT",
                   help="element format of B (default: the A format)")
    g.add_argument("-m", type=int_range(1), default=16,
                   help="rows of A (default: %(default)s)")
    g.add_argument("-n", type=int_range(1), default=8,
                   help="columns of B (default: %(default)s)")
    g.add_argument("-k", type=int_range(1), default=32,
                   help="reduction length (default: %(default)s)")
    g.add_argument("--count", type=int_range(1), default=1, metavar="N",
                   help="batch entries per family (default: %(default)s)")
    g.add_argument("--scale-format", default=None, choices=vectors.SCALE_FORMATS,
                   help="block scale format (default: no scales)")
    g.add_argument("--block", type=int, default=None,
                   help="scale block size (default: 32 for e8m0, 16 for ue4m3)")
    g.add_argument("--scale-granularity", default=None, choices=("tensor", "row", "block"),
                   help="fp32 scale granularity (--scale-format fp32 only) (default: block)")
    g.add_argument("--tensor-scale", type=float, default=None, metavar="X",
                   help="NVFP4 per-tensor FP32 scale (ue4m3 scales only) (default: none)")
    g.add_argument("--no-c", action="store_true", help="leave out the accumulator C")
    g.add_argument("--c-format", default=None, choices=vectors.ACC_FORMATS,
                   help="format of C, e.g. fp16 for FP16-accumulate units (default: fp32)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    g.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="file to write")
    add_allow_large(g)
    g.add_argument("--json", action="store_true", help="print JSON instead of text")
    im = vsub.add_parser("import", help="import published dot-product data as a vector set",
                         description="import published dot-product data as a vector set: "
                                     "--layout km reads a model_validation/<GPU>/<fmt> folder "
                                     "of Khattak & Mikaitis' MATLAB-tensor-core (docs/vectors.md)")
    im.set_defaults(func=running.cmd_vectors_import)
    im.add_argument("folder", metavar="DIR", help="the folder to import")
    im.add_argument("--layout", default="km", choices=LAYOUTS,
                    help="the data's layout (default: %(default)s)")
    im.add_argument("--d-format", default="fp32", choices=("fp32", "fp16"),
                    help="which results to take, d_<GPU>_fp32.txt or _fp16.txt "
                         "(default: %(default)s)")
    im.add_argument("--gpu", default=None, metavar="NAME",
                    help="the GPU's name in meta (default: the name in the file names)")
    im.add_argument("--repository", default=KM_REPOSITORY, metavar="URL",
                    help="where the data came from, for meta.source (default: %(default)s)")
    im.add_argument("--commit", default=None, metavar="HASH",
                    help="the repository's commit, for meta.source (default: none)")
    im.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="file to write")
    im.add_argument("--json", action="store_true", help="print JSON instead of text")
    i = vsub.add_parser("info", help="describe a vector-set file")
    i.set_defaults(func=running.cmd_vectors_info)
    i.add_argument("input", metavar="IN.npz")
    add_allow_large(i)
    i.add_argument("--json", action="store_true", help="print JSON instead of text")

    r = add("run", running.cmd_run, "compute d for a vector set with a unit")
    r.add_argument("input", metavar="IN.npz")
    r.add_argument("--unit", default="exact", metavar="NAME|SPEC",
                   help="unit name (see `mxsim units`) or a spec file .toml/.json "
                        "(default: %(default)s)")
    r.add_argument("--engine", default="fast", choices=units.ENGINES,
                   help="engine (default: %(default)s)")
    r.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="file to write")
    add_allow_large(r)

    c = add("compare", running.cmd_compare, "compare a result with another result or with a unit, "
                                    "bit for bit")
    c.add_argument("result", metavar="RESULT.npz")
    c.add_argument("other", nargs="?", metavar="OTHER.npz", help="a result on the same inputs")
    c.add_argument("--unit", metavar="NAME|SPEC",
                   help="compare with this unit's output instead (a name or a spec file)")
    c.add_argument("--engine", default=None, choices=units.ENGINES,
                   help="engine for --unit (default: fast)")
    c.add_argument("--show", type=int_range(0), default=5, metavar="N",
                   help="mismatches to print (default: %(default)s)")
    c.add_argument("--plot", metavar="FILE.png", default=None,
                   help="also draw the error distribution of RESULT and of every preset that "
                        "takes its formats, against exact (.png, .pdf or .svg)")
    add_allow_large(c)

    quantize_parser(sub)
    torch_eval.add_parser(sub)
    array.add_parser(sub)

    pr = add("probe", fitting.cmd_probe, "write a probe suite: vectors that separate a unit's "
                                 "hypotheses")
    pr.add_argument("--kind", default="fp8",
                    help="probe kind: fp8 (e5m2 x e4m3), mxfp8 or mxint8 (block-scaled), or "
                         "blackwell (one set per Blackwell instruction, -o a folder; "
                         "docs/blackwell.md) (default: %(default)s)")
    pr.add_argument("--instruction", action="append", default=None, metavar="NAME",
                    help="blackwell: probe this instruction only (repeatable; e.g. "
                         "tcgen05-mxf8f6f4, sm120-mxf4nvf4; default: all)")
    pr.add_argument("-k", type=int, default=32,
                    help="reduction length, a multiple of 4 (of 8 for the MX kinds) "
                         "(default: %(default)s)")
    pr.add_argument("--block", type=int, default=None,
                    help="MX kinds: elements per scale, 8, 16 or 32 (default: the largest "
                         "dividing k)")
    pr.add_argument("--scale-format", default=None,
                    help="MX kinds: e8m0 (default) or ue4m3")
    pr.add_argument("--seed", type=int_range(0), default=0,
                    help="random seed (default: %(default)s)")
    pr.add_argument("-o", "--output", required=True, metavar="OUT.npz",
                    help="file to write (blackwell: a folder)")
    fi = add("fit", fitting.cmd_fit, "find the simplest unit spec that reproduces observed outputs")
    fi.add_argument("inputs", metavar="IN.npz", nargs="?", help="the vectors that were run")
    fi.add_argument("observed", metavar="GPU_OUT.npz", nargs="?",
                    help="their results (same inputs)")
    fi.add_argument("--rtl", default=None, metavar="MAP.toml",
                    help="instead: run the probe suite through your RTL, described by a port "
                         "map (docs/foreign-rtl.md), and fit its outputs")
    fi.add_argument("--a-format", default=None,
                    help="with --rtl: A's element format, where the design selects one")
    fi.add_argument("--b-format", default=None, help="with --rtl: B's element format")
    fi.add_argument("--seed", type=int_range(0), default=0,
                    help="with --rtl: probe-suite seed (default: %(default)s)")
    fi.add_argument("--cocotb", action="store_true",
                    help="with --rtl: run the probes through cocotb, not the bulk C++ harness")
    fi.add_argument("--out", default="mxsim-fit", metavar="DIR",
                    help="with --rtl: builds and the observed outputs (default: %(default)s)")
    fi.add_argument("-k", type=int_range(1), default=None,
                    help="instruction K (default: 32, or the port map's)")
    fi.add_argument("-o", "--output", required=True, metavar="FITTED.toml",
                    help="where to write the spec (only when it explains every output); "
                         "with --campaign, a folder")
    fi.add_argument("--campaign", nargs="+", default=None, metavar="OBS.npz",
                    help="fit each of these observed sets (inputs and outputs in one file) as "
                         "a task of a campaign (docs/campaigns.md); exact fits are written to "
                         "-o's folder as NAME.toml")
    fi.add_argument("--workers", type=int_range(1), default=None, metavar="N",
                    help="with --campaign: local workers, on Dask or (without Dask) a process "
                         "pool (default: one per core)")
    fi.add_argument("--scheduler", default=None, metavar="ADDR",
                    help="with --campaign: a running Dask scheduler, tcp://HOST:PORT")
    fi.add_argument("--cluster-spec", default=None, metavar="FILE",
                    help="with --campaign: a dask-jobqueue cluster (docs/campaigns.md)")
    fi.add_argument("--store", default=None, metavar="DIR",
                    help="with --campaign: the result store (default: OUT/store)")
    add_allow_large(fi)

    gp = sub.add_parser("gpu", help="run vector sets on the local NVIDIA GPU",
                        description="run vector sets on the local NVIDIA GPU, path by path")
    gsub = gp.add_subparsers(dest="gpu_command", metavar="ACTION", required=True)
    gi = gsub.add_parser("info", help="the device and which paths run here (and why not)")
    gi.set_defaults(func=gpus.cmd_gpu_info)
    gi.add_argument("--json", action="store_true", help="print JSON instead of text")
    gr = gsub.add_parser("run", help="run a vector set through one GPU path")
    gr.set_defaults(func=gpus.cmd_gpu_run)
    gr.add_argument("input", metavar="IN.npz")
    gr.add_argument("--path", default=None, metavar="PATH",
                    help="GPU path (see `mxsim gpu info`; default: the one a probe set names)")
    gr.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="file to write")
    add_allow_large(gr)
    gr.add_argument("--json", action="store_true", help="print JSON instead of text")

    d = add("demo", rtl.cmd_demo, "the main job: generate vectors, run them, check and report",
            json_flag=False)
    d.add_argument("--out", default="out/demo", metavar="DIR",
                   help="directory for the files (default: %(default)s)")
    d.add_argument("-k", type=int_range(32, 8192), default=256,
                   help="reduction length, a multiple of 32 (default: %(default)s)")
    d.add_argument("--seed", type=int_range(0), default=0,
                   help="random seed (default: %(default)s)")
    return p
