"""Blackwell block-scaled paths: the PTX assembles, the packing follows the PTX ISA's layouts.

These run without a GPU. (i) Every generated kernel assembles with ``ptxas`` for its target, for
every format pair and scale variant the instruction allows, and ptxas refuses the scale
combinations the ISA forbids. (ii) The packers are checked against a transcription of the PTX
ISA's fragment tables written out here, independently of ``gpu/blackwell.py``: operands whose
codes name their own (row, col) are packed and every lane/register/byte is looked up; the
kernels' view of the buffers (their address arithmetic, the selectors, the descriptors parsed
from the generated PTX) is replayed and must give back the vector set. (iii) Without a Blackwell
GPU every path says why in one line and a run raises a one-line MxsimError.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpu import blackwell as bw
from gpu.blackwell import runners as bw_runners
from gpu.blackwell.blocked import to_blocked
from gpu.device import torch_unavailable_reason
from gpu.paths import PATHS
from gpu.runner import Runner
from mxsim import formats, vectors
from mxsim.errors import MxsimError, UnitError
from mxsim.vectors import VectorSet


def _find_ptxas() -> str | None:
    for cand in (shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas"):
        if cand and Path(cand).is_file():
            return cand
    return None


PTXAS = _find_ptxas()
needs_ptxas = pytest.mark.skipif(PTXAS is None,
                                 reason="ptxas not found on PATH or in /usr/local/cuda/bin")

#: The Blackwell paths, as gpu.paths registers them.
RUNNERS = {name: r for name, r in PATHS.items()
           if isinstance(r, (bw.MmaSyncBlockScaled, bw.Tcgen05BlockScaled, bw.ScaledMmMx))}
MMA_SYNC = bw.mma_sync_variants()
TCGEN05 = bw.tcgen05_variants()
F8F6F4 = bw.f8f6f4_variants()


def _ptxas(ptx: str, arch: str, tmp_path: Path) -> subprocess.CompletedProcess:
    src = tmp_path / f"{arch}.ptx"
    src.write_text(ptx)
    return subprocess.run([PTXAS, f"-arch={arch}", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True, check=False)


# -- (i) ptxas -------------------------------------------------------------------------------

def test_blackwell_variant_counts():
    # 25 mxf8f6f4 format pairs, mxf4 2X, mxf4nvf4 2X/ue8m0 and 4X/ue4m3; tcgen05 adds 4X/ue8m0.
    assert len(MMA_SYNC) == 28 and len(TCGEN05) == 29
    assert {(v.kind, v.scale_vec, v.stype) for v in TCGEN05} - {
        (v.kind, v.scale_vec, v.stype) for v in MMA_SYNC} == {("mxf4nvf4", "4X", "ue8m0")}


@needs_ptxas
@pytest.mark.parametrize("variant", MMA_SYNC, ids=lambda v: v.name)
def test_blackwell_mma_sync_ptx_assembles_sm_120a(variant, tmp_path):
    ptx = bw.mma_sync_ptx(variant, arch="sm_120a")
    assert variant.mma_sync_instruction in ptx and ptx.isascii()
    p = _ptxas(ptx, "sm_120a", tmp_path)
    assert p.returncode == 0, p.stderr


@needs_ptxas
@pytest.mark.parametrize("variant", TCGEN05, ids=lambda v: v.name)
def test_blackwell_tcgen05_ptx_assembles_sm_100a(variant, tmp_path):
    ptx = bw.tcgen05_ptx(variant, n_tile=128, arch="sm_100a")
    for step in ("tcgen05.alloc.cta_group::1", "tcgen05.st.sync.aligned.32x32b",
                 "tcgen05.cp.cta_group::1.32x128b.warpx4", variant.tcgen05_instruction,
                 "tcgen05.commit.cta_group::1.mbarrier::arrive::one", "mbarrier.try_wait",
                 "tcgen05.ld.sync.aligned.32x32b", "tcgen05.dealloc.cta_group::1"):
        assert step in ptx, step
    p = _ptxas(ptx, "sm_100a", tmp_path)
    assert p.returncode == 0, p.stderr


@needs_ptxas
@pytest.mark.parametrize("variant", F8F6F4, ids=lambda v: v.name)
def test_blackwell_f8f6f4_ptx_assembles_on_both_instructions(variant, tmp_path):
    # kind::f8f6f4 (no scales): mma.sync on sm_120a and tcgen05.mma on sm_100a, every pair.
    sync = bw.mma_sync_ptx(variant, arch="sm_120a")
    assert f"\t{variant.mma_sync_instruction}\n" in sync and "%sa, {%bid" not in sync
    assert _ptxas(sync, "sm_120a", tmp_path).returncode == 0
    tc = bw.tcgen05_ptx(variant, n_tile=64, arch="sm_100a")
    assert tc.count(f"{variant.tcgen05_instruction}\n\t\t[%t_d], %adesc, %bdesc, %idesc, "
                    f"%pt;") == 4
    p = _ptxas(tc, "sm_100a", tmp_path)
    assert p.returncode == 0, p.stderr


def test_blackwell_f8f6f4_instr_desc_is_table_42():
    # PTX ISA 9.1 Table 42 (kind::f8f6f4): dtype F32 = 1 at bits 4-5, atype 7-9, btype 10-12,
    # N >> 3 at 17-22, M >> 4 at 24-28, nothing else.
    v = bw.BlockScaledVariant("f8f6f4", "e5m2", "e2m1", None, 32)
    d = bw.tcgen05_instr_desc(v, n=64)
    assert d == (1 << 4) | (1 << 7) | (5 << 10) | (8 << 17) | (8 << 24)
    with pytest.raises(ValueError, match="no scale factor IDs"):
        bw.tcgen05_instr_desc(v, n=64, sfa_id=1)
    with pytest.raises(ValueError, match="takes no block scales"):
        bw.BlockScaledVariant("f8f6f4", "e4m3", "e4m3", "e8m0", 32)


@needs_ptxas
@pytest.mark.parametrize("n_tile", [16, 48, 112])
def test_blackwell_tcgen05_ptx_assembles_for_narrow_n(n_tile, tmp_path):
    v = bw.BlockScaledVariant("mxf8f6f4", "e4m3", "e4m3", "e8m0", 32)
    p = _ptxas(bw.tcgen05_ptx(v, n_tile=n_tile), "sm_100a", tmp_path)
    assert p.returncode == 0, p.stderr


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_121a", "sm_103a"])
def test_blackwell_ptx_assembles_for_sibling_archs(arch, tmp_path):
    for v in (MMA_SYNC if arch == "sm_121a" else TCGEN05)[-4:]:
        ptx = (bw.mma_sync_ptx(v, arch=arch) if arch == "sm_121a"
               else bw.tcgen05_ptx(v, arch=arch))
        p = _ptxas(ptx, arch, tmp_path)
        assert p.returncode == 0, (v.name, p.stderr)


@needs_ptxas
@pytest.mark.parametrize("ids", [(1, 0), (0, 3), (1, 2)])
def test_blackwell_mma_sync_thread_id_selectors_assemble(ids, tmp_path):
    for v in (MMA_SYNC[0], MMA_SYNC[-1]):
        ptx = bw.mma_sync_ptx(v, thread_id_a=ids[0], thread_id_b=ids[1])
        assert f"{{%bid, {ids[0]}}}, %sb, {{%bid, {ids[1]}}}" in ptx
        p = _ptxas(ptx, "sm_120a", tmp_path)
        assert p.returncode == 0, p.stderr


@needs_ptxas
@pytest.mark.parametrize("swap", [("scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
                                   "scale_vec::4X.f32.e2m1.e2m1.f32.ue8m0"),
                                  ("kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32"
                                   ".ue8m0", "kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1"
                                   ".e2m1.f32.ue4m3")])
def test_blackwell_mma_sync_ptxas_rejects_forbidden_scale_combos(swap, tmp_path):
    # Table 36: mma.sync mxf4nvf4 takes 2X with ue8m0 and 4X with ue4m3 only; ptxas agrees,
    # which is why mma_sync_variants() has no 4X/ue8m0 (tcgen05.mma has it).
    good = next(v for v in MMA_SYNC if swap[0] in v.mma_sync_instruction)
    bad = bw.mma_sync_ptx(good).replace(swap[0], swap[1])
    p = _ptxas(bad, "sm_120a", tmp_path)
    assert p.returncode != 0 and "Illegal modifier" in p.stderr


@needs_ptxas
def test_blackwell_ptx_arch_families_are_not_interchangeable(tmp_path):
    # The sm_120a mma.sync kernel is not valid for sm_100a, nor tcgen05 for sm_120a: the
    # runners must pick the target from the device.
    assert _ptxas(bw.mma_sync_ptx(MMA_SYNC[0]), "sm_100a", tmp_path).returncode != 0
    assert _ptxas(bw.tcgen05_ptx(TCGEN05[0]), "sm_120a", tmp_path).returncode != 0


PTX_SHA256 = Path(__file__).parents[1] / "data" / "gpu_ptx_sha256.json"


def _emitted_ptx_sha256() -> dict[str, str]:
    """SHA-256 of every kernel text the GPU paths emit, one digest per variant.

    mma.sync: every arch and every thread-id pair; tcgen05: every arch and every n_tile; the
    Hopper FP8 mma.sync CUDA source. The digests in ``tests/data/gpu_ptx_sha256.json`` were
    written from the code before ``gpu/blackwell.py`` was split (commit 7e900ef): a refactor
    of the emitters must leave every byte of every kernel as it was.
    """
    import hashlib

    from gpu.hopper import mma_sync
    out = {}
    for v in MMA_SYNC:
        h = hashlib.sha256()
        for arch in sorted(bw.MMA_SYNC_ARCHS.values()):
            for ta in (0, 1):
                for tb in (0, 1, 2, 3):
                    h.update(bw.mma_sync_ptx(v, arch=arch, thread_id_a=ta,
                                             thread_id_b=tb).encode())
        out[f"mma_sync/{v.name}"] = h.hexdigest()
    for v in TCGEN05:
        h = hashlib.sha256()
        for arch in sorted(bw.TCGEN05_ARCHS.values()):
            for n_tile in range(16, 129, 16):
                h.update(bw.tcgen05_ptx(v, n_tile=n_tile, arch=arch).encode())
        out[f"tcgen05/{v.name}"] = h.hexdigest()
    out["mma_sync_hopper/source"] = hashlib.sha256(mma_sync.source().encode()).hexdigest()
    return out


def test_blackwell_emitted_ptx_is_byte_identical_to_the_recorded_kernels():
    import json
    want = json.loads(PTX_SHA256.read_text())
    got = _emitted_ptx_sha256()
    assert len(want) == 28 + 29 + 1
    assert {k for k in want if got.get(k) != want[k]} == set()
    assert got.keys() == want.keys()


# -- (ii) mma.sync fragments: the ISA's tables, transcribed -------------------------------------
# PTX ISA §9.7.14.5.10 / §9.7.14.5.11, "The row and column of a matrix fragment can be computed
# as", written out literally for each element i of each lane.

def isa_a(lane: int, i: int, k: int) -> tuple[int, int]:
    group_id, tig = lane >> 2, lane % 4
    if k == 32:     # .e4m3/.e5m2/.e3m2/.e2m3/.e2m1 (8-bit containers), Figure 88
        row = group_id if (0 <= i < 4 or 8 <= i < 12) else group_id + 8
        col = tig * 4 + (i & 0x3) if i < 8 else tig * 4 + (i & 0x3) + 16
    else:           # .e2m1 m16n8k64, Figure 93
        row = group_id if (0 <= i < 8 or 16 <= i < 24) else group_id + 8
        col = tig * 8 + (i & 0x7) if i < 16 else tig * 8 + (i & 0x7) + 32
    return row, col


def isa_b(lane: int, i: int, k: int) -> tuple[int, int]:
    group_id, tig = lane >> 2, lane % 4
    if k == 32:     # Figures 90, 91
        row = tig * 4 + (i & 0x3) if i < 4 else tig * 4 + (i & 0x3) + 16
    else:           # Figures 94, 95
        row = tig * 8 + (i & 0x7) if i < 8 else tig * 8 + (i & 0x7) + 32
    return row, group_id


def isa_c(lane: int, i: int) -> tuple[int, int]:
    group_id, tig = lane >> 2, lane % 4
    return (group_id if i < 2 else group_id + 8), tig * 2 + (i & 0x1)


def element(regs: np.ndarray, lane: int, i: int, width: int) -> int:
    """Element i of a lane's registers, elements packed low to high (``a0`` lowest)."""
    per_reg = 32 // width
    return (int(regs[lane, i // per_reg]) >> (width * (i % per_reg))) & ((1 << width) - 1)


def _variant(kind, a="e2m1", b="e2m1", sf="e8m0", block=32):
    return bw.BlockScaledVariant(kind, a, b, sf, block)


E4M3 = _variant("mxf8f6f4", "e4m3", "e4m3")
MXF4 = _variant("mxf4")


def test_blackwell_mma_sync_a_k32_matches_isa_table():
    rows, cols = np.indices((16, 32), dtype=np.uint8)      # codes that name their position
    pr, pc = bw.pack_mma_sync_a(rows, E4M3)[0, 0], bw.pack_mma_sync_a(cols, E4M3)[0, 0]
    assert pr.shape == (32, 4)
    for lane in range(32):
        for i in range(16):
            assert (element(pr, lane, i, 8), element(pc, lane, i, 8)) == isa_a(lane, i, 32)


def test_blackwell_mma_sync_a_k32_matches_h200_layout():
    # ../shared/REFERENCE.md §3, measured on our H200 (the same table without block scaling):
    # reg0 = A[g][4t..4t+3], reg1 = A[g+8][4t..], reg2 = A[g][16+4t..], reg3 = A[g+8][16+4t..].
    a = np.random.default_rng(5).integers(0, 256, (16, 32), dtype=np.uint8)
    regs = bw.pack_mma_sync_a(a, E4M3)[0, 0].view(np.uint8).reshape(32, 4, 4)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        want = [a[g, 4 * t:4 * t + 4], a[g + 8, 4 * t:4 * t + 4], a[g, 16 + 4 * t:20 + 4 * t],
                a[g + 8, 16 + 4 * t:20 + 4 * t]]
        np.testing.assert_array_equal(regs[lane], want)


def test_blackwell_mma_sync_b_k32_matches_isa_table():
    rows, cols = np.indices((32, 8), dtype=np.uint8)
    pr, pc = bw.pack_mma_sync_b(rows, E4M3)[0, 0], bw.pack_mma_sync_b(cols, E4M3)[0, 0]
    assert pr.shape == (32, 2)
    for lane in range(32):
        for i in range(8):
            assert (element(pr, lane, i, 8), element(pc, lane, i, 8)) == isa_b(lane, i, 32)


def test_blackwell_mma_sync_k64_fp4_matches_isa_table():
    # FP4 codes hold 0..15, so a column is named by two packings: col % 16 and col // 16.
    rows, cols = np.indices((16, 64), dtype=np.uint8)
    pa = [bw.pack_mma_sync_a(x, MXF4)[0, 0] for x in (rows, cols % 16, cols // 16)]
    for lane in range(32):
        for i in range(32):
            r, lo, hi = (element(p, lane, i, 4) for p in pa)
            assert (r, 16 * hi + lo) == isa_a(lane, i, 64)
    krows, kcols = np.indices((64, 8), dtype=np.uint8)
    pb = [bw.pack_mma_sync_b(x, MXF4)[0, 0] for x in (krows % 16, krows // 16, kcols)]
    for lane in range(32):
        for i in range(16):
            lo, hi, c = (element(p, lane, i, 4) for p in pb)
            assert (16 * hi + lo, c) == isa_b(lane, i, 64)


def test_blackwell_mma_sync_fp4_nibble_order_agrees_with_pack_fp4():
    # §9.7.14.5.11: a register holds eight e2m1 "low to high", i.e. a_{8r} in bits 0-3. Each
    # register covers eight consecutive columns of one row, so its bytes are exactly
    # formats.pack_fp4 of that run (first element in the low nibble): the conventions agree.
    a = np.random.default_rng(1).integers(0, 16, (16, 64), dtype=np.uint8)
    regs = bw.pack_mma_sync_a(a, MXF4)[0, 0]
    for lane in range(32):
        for r in range(4):
            row, col = isa_a(lane, 8 * r, 64)
            want = formats.pack_fp4(a[row, col:col + 8])
            np.testing.assert_array_equal(regs[lane, r:r + 1].view(np.uint8), want)


@pytest.mark.parametrize("fmt", ["e2m1", "e3m2", "e2m3", "e5m2"])
def test_blackwell_mma_sync_mxf8f6f4_containers(fmt):
    # §9.7.14.5.14: e2m1 in the central 4 bits of its byte (2 padding bits above and below),
    # e3m2/e2m3 in the low 6 bits (2 padding bits above), FP8 as is.
    bits = formats.get(fmt).bits
    a = np.random.default_rng(2).integers(0, 1 << bits, (16, 32), dtype=np.uint8)
    v = _variant("mxf8f6f4", fmt, fmt)
    regs = bw.pack_mma_sync_a(a, v)[0, 0]
    shift = 2 if fmt == "e2m1" else 0
    for lane in range(32):
        for i in range(16):
            byte = element(regs, lane, i, 8)
            assert byte == int(a[isa_a(lane, i, 32)]) << shift
            assert byte & ~(((1 << bits) - 1) << shift) == 0            # padding is zero


def test_blackwell_mma_sync_c_d_round_trip():
    rows, cols = np.indices((16, 8), dtype=np.uint32)
    frag = bw.pack_mma_sync_c(rows * 8 + cols)[0, 0]
    for lane in range(32):
        for i in range(4):
            r, c = isa_c(lane, i)
            assert int(frag[lane, i]) == r * 8 + c
    x = np.random.default_rng(3).integers(0, 2 ** 32, (3, 32, 24), dtype=np.uint32)
    np.testing.assert_array_equal(bw.unpack_mma_sync_d(bw.pack_mma_sync_c(x)), x)


# -- scale registers: §9.7.14.3 selector semantics, transcribed ---------------------------------

NX = {"1X": 1, "2X": 2, "4X": 4}


def isa_sf_a(words: np.ndarray, byte_id: int, thread_id_a: int, nx: int) -> np.ndarray:
    """SF_A (16 rows x nx) picked from 32 lanes' scale-a-data by {byte-id-a, thread-id-a}.

    The thread pair ``%laneid % 4 in {2·thread-id-a, 2·thread-id-a + 1}`` supplies SF_A;
    ``byte-id-a`` picks one byte (1X), the byte pair starting there (2X) or all four (4X). Which
    thread of the pair holds which row is only in Figure 43; CUTLASS's SM120 SFALayout gives
    the even lane row g and the odd lane row g + 8.
    """
    out = np.zeros((16, nx), np.int64)
    for row in range(16):
        lane = 4 * (row % 8) + 2 * thread_id_a + row // 8
        for j in range(nx):
            out[row, j] = (int(words[lane]) >> (8 * (byte_id + j))) & 0xFF
    return out


def isa_sf_b(words: np.ndarray, byte_id: int, thread_id_b: int, nx: int) -> np.ndarray:
    """SF_B (nx x 8 columns): the thread with ``%laneid % 4 == thread-id-b`` of quad g."""
    out = np.zeros((nx, 8), np.int64)
    for col in range(8):
        for j in range(nx):
            out[j, col] = (int(words[4 * col + thread_id_b]) >> (8 * (byte_id + j))) & 0xFF
    return out


@pytest.mark.parametrize("variant", [E4M3, MXF4, _variant("mxf4nvf4", sf="ue4m3", block=16)],
                         ids=lambda v: v.scale_vec)
def test_blackwell_mma_sync_scale_registers_and_selectors(variant):
    k_tiles = 6                                             # spans words, with a padded tail
    blocks = k_tiles * variant.blocks_per_mma
    rng = np.random.default_rng(4)
    sa = rng.integers(0, 256, (16, blocks), dtype=np.uint8)
    sb = rng.integers(0, 256, (blocks, 8), dtype=np.uint8)
    wa, wb = bw.pack_mma_sync_scale_a(sa)[0], bw.pack_mma_sync_scale_b(sb)[0]
    assert wa.shape == wb.shape == (-(-blocks // 4), 32)
    nx = NX[variant.scale_vec]
    for kt in range(k_tiles):
        word, byte_id = bw.mma_sync_scale_selector(variant, kt)
        assert byte_id in {1: (0, 1, 2, 3), 2: (0, 2), 4: (0,)}[nx]        # Table 37
        want = slice(kt * nx, kt * nx + nx)
        for tid in (0, 1):
            np.testing.assert_array_equal(isa_sf_a(wa[word], byte_id, tid, nx), sa[:, want])
        for tid in range(4):
            np.testing.assert_array_equal(isa_sf_b(wb[word], byte_id, tid, nx), sb[want, :])


def _kernel_view_mma_sync(p: dict, ptx: str) -> dict:
    """Replay the mma.sync kernel's loads on the packed buffers: operands, scales and C by tile.

    Address arithmetic as in ``mma_sync_ptx`` (its strides are checked in the PTX text).
    """
    v = p["variant"]
    for line in ("mul.wide.u32 %off, %x0, 16;\n\tadd.u64 %pa, %pa, %off;",      # lane's A regs
                 "mul.wide.u32 %off, %x0, 8;\n\tadd.u64 %pb, %pb, %off;",       # lane's B regs
                 "mul.wide.u32 %off, %x0, 4;\n\tadd.u64 %psa, %psa, %off;",     # lane's word
                 "add.u64 %pa, %pa, 512;", "add.u64 %pb, %pb, 256;",           # next k-tile
                 "mul.wide.u32 %off, %x0, 128;"):                            # next word
        assert line in ptx, line
    k, nx = v.k, v.blocks_per_mma
    nb, n_mt, n_nt, kt_n = p["batch"], p["n_mt"], p["n_nt"], p["k_tiles"]
    width = 8 if v.containers == "mxf8f6f4" else 4             # f8f6f4: 8-bit containers
    a = np.zeros((nb, n_mt * 16, kt_n * k), np.int64)
    b = np.zeros((nb, kt_n * k, n_nt * 8), np.int64)
    sfa = np.zeros((nb, n_mt * 16, kt_n * nx), np.int64)
    sfb = np.zeros((nb, kt_n * nx, n_nt * 8), np.int64)
    c = np.zeros((nb, n_mt * 16, n_nt * 8), np.int64)
    a_buf, b_buf = p["a"].reshape(-1, 4), p["b"].reshape(-1, 2)
    sa_buf, sb_buf, c_buf = p["sa"].reshape(-1), p["sb"].reshape(-1), p["c"].reshape(-1, 4)
    words = -(-kt_n * nx // 4)
    for t in range(p["n_tiles"]):
        q, nt = divmod(t, n_nt)
        bi, mt = divmod(q, n_mt)
        bq = bi * n_nt + nt
        lanes_c = c_buf[t * 32:(t + 1) * 32]
        for lane in range(32):
            for i in range(4):
                r, cc = isa_c(lane, i)
                c[bi, 16 * mt + r, 8 * nt + cc] = lanes_c[lane, i]
        for kt in range(kt_n):
            ra = a_buf[(q * kt_n + kt) * 32:(q * kt_n + kt + 1) * 32]
            rb = b_buf[(bq * kt_n + kt) * 32:(bq * kt_n + kt + 1) * 32]
            for lane in range(32):
                for i in range(k // 2):
                    r, cc = isa_a(lane, i, k)
                    a[bi, 16 * mt + r, kt * k + cc] = element(ra, lane, i, width)
                for i in range(k // 4):
                    r, cc = isa_b(lane, i, k)
                    b[bi, kt * k + r, 8 * nt + cc] = element(rb, lane, i, width)
            word, byte_id = bw.mma_sync_scale_selector(v, kt)
            wa = sa_buf[(q * words + word) * 32:(q * words + word + 1) * 32]
            wb = sb_buf[(bq * words + word) * 32:(bq * words + word + 1) * 32]
            sfa[bi, 16 * mt:16 * mt + 16, kt * nx:kt * nx + nx] = isa_sf_a(wa, byte_id, 0, nx)
            sfb[bi, kt * nx:kt * nx + nx, 8 * nt:8 * nt + 8] = isa_sf_b(wb, byte_id, 0, nx)
    return {"a": a, "b": b, "sa": sfa, "sb": sfb, "c": c}


def _expect(vs: VectorSet, view: dict, variant) -> None:
    nb = int(np.prod(vs.batch_shape, dtype=np.int64))
    shift = 2 if variant.containers == "mxf8f6f4" else 0
    for name, fmt in (("a", vs.a_format), ("b", vs.b_format)):
        want = getattr(vs, name).reshape(nb, *getattr(vs, name).shape[-2:]).astype(np.int64)
        if fmt == "e2m1":
            want = want << shift
        got = view[name][:, : want.shape[1], : want.shape[2]]
        np.testing.assert_array_equal(got, want)
        assert not view[name][:, want.shape[1]:, :].any()               # padding is zero
        assert not view[name][:, :, want.shape[2]:].any()
    if vs.a_scale is None:                  # kind::f8f6f4: zero scale words, read by no MMA
        sa = np.zeros((nb, vs.m, vs.k // 32), np.int64)
        sb = np.zeros((nb, vs.k // 32, vs.n), np.int64)
    else:
        sa = vs.a_scale.reshape(nb, vs.m, -1)
        sb = vs.b_scale.reshape(nb, -1, vs.n)
    np.testing.assert_array_equal(view["sa"][:, : vs.m, : sa.shape[2]], sa)
    np.testing.assert_array_equal(view["sb"][:, : sb.shape[1], : vs.n], sb)
    c = (np.zeros((nb, vs.m, vs.n)) if vs.c is None else vs.c.reshape(nb, vs.m, vs.n))
    np.testing.assert_array_equal(view["c"][:, : vs.m, : vs.n], c)


SETS = [("mxf8f6f4", "e4m3", "e5m2", "e8m0", 32), ("mxf8f6f4", "e2m1", "e3m2", "e8m0", 32),
        ("mxf4", "e2m1", "e2m1", "e8m0", 32), ("mxf4nvf4", "e2m1", "e2m1", "e8m0", 32),
        ("mxf4nvf4", "e2m1", "e2m1", "ue4m3", 16), ("f8f6f4", "e5m2", "e2m1", None, None)]


@pytest.mark.parametrize("case", SETS, ids=lambda c: "_".join(map(str, c)))
def test_blackwell_mma_sync_runner_packing_round_trips(case):
    kind, af, bf, sf, block = case
    vs = vectors.generate("uniform", a_format=af, b_format=bf, m=20, n=12, k=128, batch=(2,),
                          scale_format=sf, block=block, seed=7)
    runner = RUNNERS[f"mma-sync-{kind}"]
    p = runner.pack(vs)
    assert (p["n_mt"], p["n_nt"], p["batch"]) == (2, 2, 2)
    _expect(vs, _kernel_view_mma_sync(p, bw.mma_sync_ptx(p["variant"])), p["variant"])


# -- (ii) tcgen05: descriptors, shared memory, tensor memory ------------------------------------

def isa_smem_desc(d: int) -> dict:
    """Table 40, field by field."""
    return {"start": (d & 0x3FFF) << 4, "lbo": ((d >> 16) & 0x3FFF) << 4,
            "sbo": ((d >> 32) & 0x3FFF) << 4, "fixed": (d >> 46) & 0b111,
            "base_offset": (d >> 49) & 0b111, "lbo_mode": (d >> 52) & 1,
            "zero": (d >> 53) & 0xFF | (d >> 14) & 0b11 | (d >> 30) & 0b11,
            "swizzle": (d >> 61) & 0b111}


def isa_idesc(d: int, kind: str) -> dict:
    """Table 43 (mxf8f6f4) / Table 44 (mxf4, mxf4nvf4), field by field."""
    fp4 = kind != "mxf8f6f4"
    return {"sparse": (d >> 2) & 1, "sfb_id": (d >> 4) & 0b11, "atype": (d >> 7) & 0b111,
            "btype": (d >> 10) & (0b11 if fp4 else 0b111), "negate": (d >> 13) & 0b11,
            "transpose": (d >> 15) & 0b11, "n": ((d >> 17) & 0x3F) << 3,
            "scale_ue8m0": (d >> 23) & 1, "m": ((d >> 27) & 0b11) << 7,
            "sfa_id": (d >> 29) & 0b11, "k96": (d >> 31) & 1 if fp4 else 0,
            "reserved": d & 0b11 | (d >> 3) & 1 | (d >> 6) & 1 | (d >> 24) & 0b111
            | ((d >> 12) & 1 if fp4 else 0) | (0 if fp4 else (d >> 31) & 1)}


ISA_TYPE = {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5}


def test_blackwell_smem_descriptor_fields():
    d = bw.smem_descriptor(0x1230, 2048, 128)
    assert isa_smem_desc(d) == {"start": 0x1230, "lbo": 2048, "sbo": 128, "fixed": 1,
                                "base_offset": 0, "lbo_mode": 0, "zero": 0, "swizzle": 0}
    with pytest.raises(ValueError, match=r"^lbo must be a 16-byte aligned shared-memory offset "
                                         r"below 256 KiB, not 24$"):
        bw.smem_descriptor(0, 24, 128)


@pytest.mark.parametrize("variant", TCGEN05, ids=lambda v: v.name)
def test_blackwell_tcgen05_instr_desc_fields(variant):
    nx = variant.blocks_per_mma
    for sf in {1: (0, 1, 2, 3), 2: (0, 2), 4: (0,)}[nx]:
        f = isa_idesc(bw.tcgen05_instr_desc(variant, n=96, sfa_id=sf, sfb_id=sf), variant.kind)
        types = ((ISA_TYPE[variant.a_format], ISA_TYPE[variant.b_format])
                 if variant.kind == "mxf8f6f4" else (1, 1))                # E2M1 = 1 in Table 44
        assert (f["atype"], f["btype"]) == types
        assert (f["m"], f["n"], f["sfa_id"], f["sfb_id"]) == (128, 96, sf, sf)
        assert f["scale_ue8m0"] == (variant.scale_format == "e8m0")
        assert f["sparse"] == f["negate"] == f["transpose"] == f["k96"] == f["reserved"] == 0
    with pytest.raises(ValueError):
        bw.tcgen05_instr_desc(variant, n=96, sfa_id=1 if nx > 1 else 4)


def unpack_isa_row_bytes(row: np.ndarray, fmt: str, kind: str, k: int) -> list[int]:
    """Codes of one row of K elements back from its shared-memory bytes (§9.7.16.10.4)."""
    data = bytes(row.astype(np.uint8))
    if kind != "mxf8f6f4":                          # two e2m1 per byte, no padding
        return [(data[i // 2] >> (4 * (i % 2))) & 0xF for i in range(k)]
    bits = formats.get(fmt).bits
    if bits == 8:
        return list(data[:k])
    out = []
    for g in range(k // 16):                        # 16 elements, then padding to 16 bytes
        group = data[16 * g:16 * g + 16]
        word = int.from_bytes(group[: 2 * bits], "little")
        assert int.from_bytes(group[2 * bits:], "little") == 0             # padding
        out += [(word >> (bits * i)) & ((1 << bits) - 1) for i in range(16)]
    return out


@pytest.mark.parametrize("fmt", ["e2m1", "e3m2"])
def test_blackwell_tcgen05_fp4_fp6_groups_in_shared_memory(fmt):
    codes = np.arange(32, dtype=np.uint8)[None, :] % (1 << formats.get(fmt).bits)
    rb = bw.tcgen05_row_bytes(codes, fmt, "mxf8f6f4")
    assert rb.shape == (1, 32)
    assert unpack_isa_row_bytes(rb[0], fmt, "mxf8f6f4", 32) == codes[0].tolist()
    if fmt == "e2m1":       # 16 elements in 8 bytes + 8 bytes padding (16U4_ALIGN16B)
        np.testing.assert_array_equal(rb[0, :8], formats.pack_fp4(codes[0, :16]))
        assert not rb[0, 8:16].any()
    packed = bw.tcgen05_row_bytes(codes % 16, "e2m1", "mxf4")
    np.testing.assert_array_equal(packed, formats.pack_fp4(codes % 16))


def _parse_consts(ptx: str, reg: str) -> list[int]:
    return [int(x) for x in re.findall(rf"add\.u64 {reg}, %sbase, (\d+);", ptx)]


def _kernel_view_tcgen05(p: dict, ptx: str) -> dict:
    """Replay the tcgen05 kernel on the packed buffers: what each MMA reads.

    Operands: each MMA's shared memory descriptors are parsed from the PTX and decoded with
    Table 40, then rows are read through the canonical K-major no-swizzle layout of §9.7.16.3.3,
    ``((8,m),(T,2k)):((1T,SBO),(1,LBO))`` with T = 16 bytes: byte ``kb`` of row ``r`` sits at
    ``start + (r%8)·16 + (r//8)·SBO + kb%16 + (kb//16)·LBO``. Scales: ``tcgen05.cp .32x128b
    .warpx4`` puts shared-memory row ``l`` (16 bytes) into lane ``l`` of each warp's quarter,
    columns 0-3; the MMA reads row ``m``'s factors from lane ``m % 32``, column ``m // 32``,
    bytes ``SF_ID ..`` (SF_ID from the instruction descriptor, also parsed from the PTX).
    """
    v, nt = p["variant"], p["n_tile"]
    idescs = [int(x, 16) for x in re.findall(r"mov\.u32 %idesc, (0x[0-9a-f]+);", ptx)]
    a_consts, b_consts = _parse_consts(ptx, "%adesc"), _parse_consts(ptx, "%bdesc")
    scale_consts = _parse_consts(ptx, "%sdesc")
    assert len(idescs) == len(a_consts) == len(b_consts) == 4 // v.blocks_per_mma
    sk, sbytes = bw.tcgen05_stage(v)
    kb_mma = sbytes * v.blocks_per_mma // 4                 # bytes of one MMA's K per row
    nb, n_mt, n_nt, stages = p["batch"], p["n_mt"], p["n_nt"], p["stages"]
    a_slab = 128 * sbytes
    off = isa_smem_desc(scale_consts[0])["start"]
    assert off == a_slab + nt * sbytes                      # scale A chunk after A and B slabs
    assert {k: x for k, x in isa_smem_desc(scale_consts[0]).items() if k != "start"} == {
        "lbo": 128, "sbo": 128, "fixed": 1, "base_offset": 0, "lbo_mode": 0, "zero": 0,
        "swizzle": 0}

    def read(slab: np.ndarray, desc: int, rows: int, fmt: str) -> np.ndarray:
        f = isa_smem_desc(desc)
        assert (f["fixed"], f["swizzle"], f["lbo_mode"], f["zero"]) == (1, 0, 0, 0)
        out = []
        for r in range(rows):
            kb = np.arange(kb_mma)
            addr = f["start"] + (r % 8) * 16 + (r // 8) * f["sbo"] + kb % 16 + (kb // 16) * f[
                "lbo"]
            out.append(unpack_isa_row_bytes(slab[addr], fmt, v.containers, v.k))
        return np.array(out)

    def scales(chunk: np.ndarray, rows: int, sf_id: int) -> np.ndarray:
        tmem = np.zeros((128, 4, 4), np.int64)             # lane, column, byte
        for w in range(4):
            for lane in range(32):
                tmem[32 * w + lane] = chunk[16 * lane:16 * lane + 16].reshape(4, 4)
        nx = v.blocks_per_mma
        return np.array([[tmem[m % 32 + 32 * (m // 32), m // 32, sf_id + j] for j in range(nx)]
                         for m in range(rows)])

    k_total = stages * sk
    a = np.zeros((nb, n_mt * 128, k_total), np.int64)
    bt = np.zeros((nb, n_nt * nt, k_total), np.int64)
    sfa = np.zeros((nb, n_mt * 128, k_total // v.block), np.int64)
    sfb = np.zeros((nb, n_nt * nt, k_total // v.block), np.int64)
    for bi in range(nb):
        for s in range(stages):
            for q, (idesc, da, db) in enumerate(zip(idescs, a_consts, b_consts, strict=True)):
                f = isa_idesc(idesc, v.kind)
                assert (f["m"], f["n"]) == (128, nt)
                ks = slice(s * sk + q * v.k, s * sk + (q + 1) * v.k)
                blk = slice(ks.start // v.block, ks.stop // v.block)
                for mt in range(n_mt):
                    rows = slice(128 * mt, 128 * mt + 128)
                    a[bi, rows, ks] = read(p["a"][bi, mt, s], da, 128, v.a_format)
                    sfa[bi, rows, blk] = scales(p["sa"][bi * n_mt + mt, 0, s], 128, f["sfa_id"])
                for j in range(n_nt):
                    rows = slice(nt * j, nt * j + nt)
                    slab = np.concatenate([np.zeros(a_slab, np.uint8), p["b"][bi, j, s]])
                    bt[bi, rows, ks] = read(slab, db, nt, v.b_format)
                    sfb[bi, rows, blk] = scales(p["sb"][bi * n_nt + j, 0, s], nt, f["sfb_id"])
    tiles = p["c"]                                          # (nb, n_mt, n_nt, 128, nt)
    c = np.moveaxis(tiles, 2, 3).reshape(nb, n_mt * 128, n_nt * nt)
    return {"a": a, "b": np.swapaxes(bt, 1, 2), "sa": sfa, "sb": np.swapaxes(sfb, 1, 2), "c": c}


TC_SETS = SETS + [("mxf8f6f4", "e2m3", "e4m3", "e8m0", 32),
                  ("mxf4nvf4", "e2m1", "e2m1", "e8m0", 16)]


@pytest.mark.parametrize("case", TC_SETS, ids=lambda c: "_".join(map(str, c)))
def test_blackwell_tcgen05_runner_packing_round_trips(case):
    kind, af, bf, sf, block = case
    k = 192 if kind in ("mxf8f6f4", "f8f6f4") else 320             # a stage and a part
    vs = vectors.generate("uniform", a_format=af, b_format=bf, m=130, n=24, k=k, batch=(1,),
                          scale_format=sf, block=block, seed=11)
    p = RUNNERS[f"tcgen05-{kind}"].pack(vs)
    block = block or 32                                 # f8f6f4: stages of four 32s of K
    assert (p["n_mt"], p["n_nt"], p["n_tile"], p["k_blocks"]) == (2, 1, 32, k // block)
    ptx = bw.tcgen05_ptx(p["variant"], n_tile=p["n_tile"])
    view = _kernel_view_tcgen05(p, ptx)
    for name in ("a", "b"):                             # shared memory holds bare codes
        want = getattr(vs, name).astype(np.int64)
        np.testing.assert_array_equal(view[name][:, : want.shape[1], : want.shape[2]], want)
        assert not view[name][:, want.shape[1]:].any()
        assert not view[name][:, :, want.shape[2]:].any()
    zeros = np.zeros((1, 130, k // block), np.uint8)    # f8f6f4: zero scales, unread
    np.testing.assert_array_equal(view["sa"][:, :130, : k // block],
                                  zeros if sf is None else vs.a_scale)
    np.testing.assert_array_equal(view["sb"][:, : k // block, :24],
                                  np.swapaxes(zeros, 1, 2)[:, :, :24] if sf is None
                                  else vs.b_scale)
    np.testing.assert_array_equal(view["c"][:, :130, :24], vs.c)
    # MMAs on padding K are predicated off with k_blocks: the padded stage's tail is never used.
    assert "setp.lt.u32 %pq, %x0, %k_blocks;" in ptx and p["k_blocks"] * block == k


def test_blackwell_tcgen05_scale_chunk_is_cublas_blocked_layout():
    # The 512-byte chunk tcgen05.cp reads is cuBLAS's 128x4 blocked tile (mxsim.quantize).
    s = np.random.default_rng(9).integers(0, 256, (128, 8), dtype=np.uint8)
    chunks = bw.pack_tcgen05_scales(s)
    assert chunks.shape == (1, 2, 512)
    np.testing.assert_array_equal(chunks.reshape(-1), to_blocked(s))


def test_blackwell_tcgen05_d_unpack():
    tiles = np.arange(2 * 3 * 128 * 16, dtype=np.uint32).reshape(1, 2, 3, 128, 16)
    d = bw.unpack_tcgen05_d(tiles)
    assert d.shape == (1, 256, 48)
    assert d[0, 130, 20] == tiles[0, 1, 1, 2, 4]


# -- (iii) without a Blackwell GPU --------------------------------------------------------------

def _small_set(kind):
    if kind == "f8f6f4":
        return vectors.generate("uniform", a_format="e5m2", b_format="e4m3", m=16, n=8, k=64)
    if kind == "mxf8f6f4":
        return vectors.generate("uniform", m=16, n=8, k=64, scale_format="e8m0", block=32)
    if kind == "mxf4":
        return vectors.generate("uniform", a_format="e2m1", m=16, n=8, k=64,
                                scale_format="e8m0", block=32)
    return vectors.generate("uniform", a_format="e2m1", m=16, n=8, k=64, scale_format="ue4m3",
                            block=16, with_c=False)


@pytest.mark.parametrize("name", list(RUNNERS))
def test_blackwell_unavailable_here_says_why_in_one_line(name):
    runner = RUNNERS[name]
    reason = runner.unavailable_reason()
    if reason is None:
        pytest.skip(f"{name} can run on this machine")
    assert "\n" not in reason
    assert "compute capability" in reason or "cupy" in reason
    torch_reason = torch_unavailable_reason()
    if torch_reason is not None:
        assert reason.endswith(f"; {torch_reason}")
    vs = (vectors.generate("uniform", m=16, n=8, k=64, scale_format="e8m0", block=32,
                           with_c=False) if name == "scaled-mm-mx"
          else _small_set(name.rsplit("-", 1)[-1]))
    with pytest.raises(MxsimError) as info:
        runner.run(vs)
    assert str(info.value) == f"GPU path {name} is unavailable here: {reason}"
    assert "\n" not in str(info.value)


def test_blackwell_unavailable_on_hopper(monkeypatch):
    monkeypatch.setattr(bw_runners, "torch_unavailable_reason", lambda: None)
    monkeypatch.setattr(bw_runners, "capability", lambda: (9, 0))
    assert RUNNERS["mma-sync-mxf8f6f4"].unavailable_reason() == (
        "mma.sync kind::mxf8f6f4 needs compute capability 12.0 (sm_120a) or 12.1 (sm_121a), "
        "not 9.0")
    assert RUNNERS["tcgen05-mxf4nvf4"].unavailable_reason() == (
        "tcgen05.mma kind::mxf4nvf4 needs compute capability 10.0 (sm_100a) or 10.3 (sm_103a), "
        "not 9.0")
    with pytest.raises(UnitError, match=r"^GPU path tcgen05-mxf4 is unavailable here: "
                                        r"tcgen05\.mma kind::mxf4 needs compute capability "
                                        r"10\.0 \(sm_100a\) or 10\.3 \(sm_103a\), not 9\.0$"):
        RUNNERS["tcgen05-mxf4"].run(_small_set("mxf4"))
    if hasattr(sys.modules.get("torch"), "float8_e8m0fnu"):
        assert RUNNERS["scaled-mm-mx"].unavailable_reason() == (
            "MX/NVFP4 torch._scaled_mm needs compute capability 10.0 or newer (cuBLASLt "
            "block-scaled GEMMs), not 9.0")


def test_blackwell_unavailable_without_cupy(monkeypatch):
    monkeypatch.setattr(bw_runners, "torch_unavailable_reason", lambda: None)
    monkeypatch.setattr(bw_runners, "capability", lambda: (12, 0))
    monkeypatch.setitem(sys.modules, "cupy", None)           # import cupy -> ImportError
    assert RUNNERS["mma-sync-mxf4"].unavailable_reason() == (
        "cupy is not installed (the PTX kernels load through cupy.RawModule)")
    assert "needs compute capability" in RUNNERS["tcgen05-mxf4"].unavailable_reason()


def test_blackwell_runners_refuse_sets_they_cannot_run():
    e4m3 = _small_set("mxf8f6f4")
    with pytest.raises(UnitError, match=r"^mxf4 cannot run this set: a_format of kind::mxf4 "
                                        r"must be one of e2m1, not 'e4m3'$"):
        RUNNERS["mma-sync-mxf4"].pack(e4m3)
    with pytest.raises(UnitError, match=r"^mma\.sync\.aligned\.m16n8k64\.row\.col\.kind::mxf4\."
                                        r"block_scale\.scale_vec::2X\.f32\.e2m1\.e2m1\.f32\.ue8m0 "
                                        r"needs K a multiple of 64, not 32$"):
        RUNNERS["mma-sync-mxf4"].pack(vectors.generate(
            "uniform", a_format="e2m1", m=16, n=8, k=32, scale_format="e8m0", block=32))
    nvf4_e8m0 = vectors.generate("uniform", a_format="e2m1", m=16, n=8, k=64,
                                 scale_format="e8m0", block=16)
    with pytest.raises(UnitError, match=r"^mma\.sync kind::mxf4nvf4 takes no e8m0 scales with "
                                        r"block 16 \(only tcgen05\.mma does\)$"):
        RUNNERS["mma-sync-mxf4nvf4"].pack(nvf4_e8m0)
    assert RUNNERS["tcgen05-mxf4nvf4"].pack(nvf4_e8m0)["variant"].scale_vec == "4X"
    unscaled = vectors.generate("uniform", m=16, n=8, k=32)
    with pytest.raises(UnitError, match=r"^kind::mxf8f6f4 needs e8m0 or ue4m3 block scales, "
                                        r"not none$"):
        RUNNERS["tcgen05-mxf8f6f4"].pack(unscaled)
    with pytest.raises(UnitError, match=r"^scaled-mm-mx runs sets without C or tensor_scale"):
        RUNNERS["scaled-mm-mx"].check(e4m3)


def test_blackwell_paths_are_registered_for_gpu_info():
    assert list(RUNNERS) == ["mma-sync-mxf8f6f4", "mma-sync-mxf4", "mma-sync-mxf4nvf4",
                             "mma-sync-f8f6f4", "tcgen05-mxf8f6f4", "tcgen05-mxf4",
                             "tcgen05-mxf4nvf4", "tcgen05-f8f6f4", "scaled-mm-mx"]
    assert list(PATHS)[-len(RUNNERS):] == list(RUNNERS)
    assert {n: r.preset for n, r in RUNNERS.items() if r.preset} == {
        f"tcgen05-{k}": f"blackwell-{k}" for k in bw.RUNNER_KINDS}
    for name, runner in RUNNERS.items():
        assert isinstance(runner, Runner) and runner.name == name
    # A path's instruction heads every variant instruction its runs record.
    for v in TCGEN05:
        assert v.tcgen05_instruction.startswith(RUNNERS[f"tcgen05-{v.kind}"].instruction + ".")
    for v in MMA_SYNC:
        assert v.mma_sync_instruction.startswith(RUNNERS[f"mma-sync-{v.kind}"].instruction
                                                 + ".")
    for v in F8F6F4:
        assert v.tcgen05_instruction == RUNNERS["tcgen05-f8f6f4"].instruction
        assert v.mma_sync_instruction.startswith(RUNNERS["mma-sync-f8f6f4"].instruction + ".")
