"""The argument parser: the core's verbs, and the verbs the packages register (:mod:`.verbs`)."""

from __future__ import annotations

import argparse
from typing import Any

from .. import __version__, units, vectors
from ..vectors.importers import KM_REPOSITORY, LAYOUTS
from . import (
    array,
    explaining,
    export_c,
    fitting,
    listing,
    planning,
    quantizing,
    running,
    torch_eval,
    train_eval,
)
from .common import add_allow_large, add_campaign_executor, add_verb, int_range
from .verbs import Verb, VerbParser, add_verbs, plugin_verbs

__all__ = ["CORE_VERBS", "build_parser"]


def _add_formats(sub: Any) -> argparse.ArgumentParser:
    return add_verb(sub, "formats", listing.cmd_formats,
                    "list the element, scale and output formats")


def _add_units(sub: Any) -> argparse.ArgumentParser:
    up = add_verb(sub, "units", listing.cmd_units,
                  "list the units with their provenance; with --spec, print a preset's spec as "
                  "TOML to start a unit of your own")
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
    return up


def _add_vectors(sub: Any) -> argparse.ArgumentParser:
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
    return vp


def _add_run(sub: Any) -> argparse.ArgumentParser:
    r = add_verb(sub, "run", running.cmd_run, "compute d for a vector set with a unit")
    r.add_argument("input", metavar="IN.npz")
    r.add_argument("--unit", default="exact", metavar="NAME|SPEC",
                   help="unit name (see `mxsim units`) or a spec file .toml/.json "
                        "(default: %(default)s)")
    r.add_argument("--engine", default="fast", choices=units.ENGINES,
                   help="engine (default: %(default)s)")
    r.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="file to write")
    add_allow_large(r)
    return r


def _add_compare(sub: Any) -> argparse.ArgumentParser:
    c = add_verb(sub, "compare", running.cmd_compare,
                 "compare a result with another result or with a unit, bit for bit")
    c.add_argument("result", metavar="RESULT.npz")
    c.add_argument("other", nargs="?", metavar="OTHER.npz", help="a result on the same inputs")
    c.add_argument("--unit", metavar="NAME|SPEC|PATH|PLAN",
                   help="compare with this unit's output instead (a name or a spec file), or "
                        "with a library call's plan at the result's shape: a GPU path of the "
                        "plan table (cublas-bf16, cublas-fast, ...; docs/plans.md) or a plan "
                        "file; without OTHER.npz and --unit, the path the result records")
    c.add_argument("--engine", default=None, choices=units.ENGINES,
                   help="engine for --unit (default: fast)")
    c.add_argument("--show", type=int_range(0), default=5, metavar="N",
                   help="mismatches to print (default: %(default)s)")
    c.add_argument("--plot", metavar="FILE.png", default=None,
                   help="also draw the error distribution of RESULT and of every preset that "
                        "takes its formats, against exact (.png, .pdf or .svg)")
    add_allow_large(c)
    return c


def _add_quantize(sub: Any) -> argparse.ArgumentParser:
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
    return qp


def _add_probe(sub: Any) -> argparse.ArgumentParser:
    pr = add_verb(sub, "probe", fitting.cmd_probe,
                  "write a probe suite: vectors that separate a unit's hypotheses")
    pr.add_argument("--kind", default="fp8",
                    help="probe kind: fp8 (e5m2 x e4m3), mxfp8 or mxint8 (block-scaled), "
                         "blackwell (one set per Blackwell instruction, -o a folder; "
                         "docs/blackwell.md), or plan (a library GEMM's K chunks and "
                         "reduction, docs/plans.md; --format, -k) (default: %(default)s)")
    pr.add_argument("--format", default=None, metavar="FMT",
                    help="plan: the operands' format (bf16, fp16, tf32, e4m3, e5m2, ...)")
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
    return pr


def _add_fit(sub: Any) -> argparse.ArgumentParser:
    fi = add_verb(sub, "fit", fitting.cmd_fit,
                  "find the simplest unit spec that reproduces observed outputs")
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
    fi.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    dest="set_fields",
                    help="with --rtl: the mode to probe, as unit-spec fields spelt as a spec "
                         "file spells them (--set acc_rounding=rd --set d_format=bf16); the "
                         "fields the map's [control] inputs follow stay in the fitted spec; "
                         "repeat for more")
    fi.add_argument("--one-mode", action="store_true",
                    help="with --rtl: probe only the mode --set gives; by default an exact fit "
                         "is also held to each other value of the map's [control] inputs, one "
                         "at a time (a probe run each), which decide what this mode's outputs "
                         "leave open")
    fi.add_argument("--out", default="mxsim-fit", metavar="DIR",
                    help="with --rtl: builds and the observed outputs (default: %(default)s)")
    fi.add_argument("-k", type=int_range(1), default=None,
                    help="instruction K (default: 32, or the port map's)")
    fi.add_argument("--plan", action="store_true",
                    help="fit a GEMM plan (K chunks, unit, reduction; docs/plans.md) to a "
                         "library call's result, GPU_OUT.npz alone")
    fi.add_argument("--plan-unit", action="append", default=None, metavar="NAME",
                    help="with --plan: search only this unit (repeatable; default: every "
                         "preset that takes the formats, the GPU's own first)")
    fi.add_argument("--max-split", type=int_range(1, 512), default=64, metavar="S",
                    help="with --plan: the largest split count tried (default: %(default)s)")
    fi.add_argument("--exhaustive", action="store_true",
                    help="with --plan: search every unit, not only up to the first exact one")
    fi.add_argument("-o", "--output", required=True, metavar="FITTED.toml",
                    help="where to write the spec (only when it explains every output); "
                         "with --campaign, a folder")
    fi.add_argument("--campaign", nargs="+", default=None, metavar="OBS.npz",
                    help="fit each of these observed sets (inputs and outputs in one file) as "
                         "a task of a campaign (docs/campaigns.md); exact fits are written to "
                         "-o's folder as NAME.toml")
    add_campaign_executor(fi)
    add_allow_large(fi)
    return fi


#: The core's verbs; their rank is their place in ``mxsim --help``, among the verbs that hdl
#: (rtl 30, explore 50), testbenches (verify 40, demo 150) and gpu (gpu 140) register;
#: export-c (35) sits between rtl and verify.
CORE_VERBS = (
    Verb(name="formats", rank=10, add=_add_formats),
    Verb(name="units", rank=20, add=_add_units),
    Verb(name="export-c", rank=35, add=export_c.add_parser),
    Verb(name="vectors", rank=60, add=_add_vectors),
    Verb(name="run", rank=70, add=_add_run),
    Verb(name="compare", rank=80, add=_add_compare),
    Verb(name="quantize", rank=90, add=_add_quantize),
    Verb(name="torch-eval", rank=100, add=torch_eval.add_parser),
    Verb(name="train-eval", rank=105, add=train_eval.add_parser),
    Verb(name="array", rank=110, add=array.add_parser),
    Verb(name="probe", rank=120, add=_add_probe),
    Verb(name="fit", rank=130, add=_add_fit),
    *planning.VERBS,
    *explaining.VERBS,
)


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """``mxsim``'s parser: every verb, the core's and the registered ones, in rank order; its
    help ends with one line naming the verbs whose extra is not installed here, if any.

    ``verb``, the name of one of the core's verbs: that verb alone, the registered ones not
    loaded (a command line that names it parses the same; it saves the start-up of every
    other verb's parser)."""
    p = VerbParser(
        prog="mxsim", description="Bit-exact models of block-scaled (MX, NVFP4) dot-product "
                                  "units: formats, vector sets, units, comparisons.")
    p.add_argument("--version", action="version", version=f"mxsim {__version__}")
    p.add_argument("--debug", action="store_true",
                   help="print the traceback of an internal error (also accepted after the "
                        "verb)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    only = [v for v in CORE_VERBS if v.name == verb]
    p.note = add_verbs(sub, only or [*CORE_VERBS, *plugin_verbs()])
    return p
