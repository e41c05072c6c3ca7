"""The model-level report (mxsim.torch_eval, `mxsim torch-eval`) on a tiny random Llama, its
GGUF reader and tokenizer on small files built here, and docs/torch_eval.md = the committed
report."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mxsim.cli import main as cli_main  # noqa: E402
from mxsim.errors import MxsimError  # noqa: E402
from mxsim.torch_eval import bpe, figures, gguf, run_eval  # noqa: E402
from mxsim.torch_eval.model import from_gguf, tiny  # noqa: E402
from mxsim.torch_eval.run import compare, resolve_units  # noqa: E402

UNITS = ["exact", "exact=none", "hopper-cublas-fast", "blackwell-mxf8f6f4=mxfp8:rceil"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("te")
    return run_eval("tiny", UNITS, engine="fast", tokens=12, out=str(out))


def test_exact_against_exact_is_zero(report):
    ref, again = report["units"][0], report["units"][1]
    assert (ref["unit"], again["unit"]) == ("exact", "exact=none")
    assert again["kl_mean"] == 0 and again["kl_max"] == 0 and again["top1_agree"] == 1
    assert again["logits"]["max_abs"] == 0 and again["logits"]["identical"] == 1
    assert again["perplexity"] == ref["perplexity"]
    assert len(again["layers"]) == report["linear_layers"] == 2 * 7 + 1
    for la in again["layers"]:
        assert la["identical"] == 1 and la["max_abs"] == 0 and la["rel_rms"] == 0


@pytest.mark.parametrize("unit", ["hopper-cublas-fast", "blackwell-mxf8f6f4=mxfp8:rceil"])
def test_fp8_units_differ_from_exact(report, unit):
    u = next(u for u in report["units"] if u["unit"] == unit)
    assert u["recipe"] in ("fp8-tensor", "mxfp8:rceil")
    assert u["kl_mean"] > 0 and u["logits"]["max_abs"] > 0
    first = u["layers"][0]
    # one FP8 rounding of BF16 operands: relative error of a few per cent, far from zero
    assert 1e-3 < first["rel_rms"] < 0.2 and first["identical"] < 0.5
    assert all(la["nonfinite"] == 0 for la in u["layers"])


def test_files_written(report):
    files = report["files"]
    data = json.loads(Path(files["json"]).read_text())
    assert [u["unit"] for u in data["units"]] == UNITS
    assert data["token_ids"] == list(b"When we look")
    assert Path(files["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = Path(files["markdown"]).read_text()
    assert "| `hopper-cublas-fast` | fp8-tensor |" in md and "`blocks.1.down`" in md


def test_compare_counts_bits_not_values():
    a = torch.tensor([0.0, 1.0, float("inf")])
    b = torch.tensor([-0.0, 1.0, float("inf")])     # -0 == 0 as floats, not as bits
    c = compare(b, a)
    assert c["identical"] == pytest.approx(2 / 3) and c["nonfinite"] == 1
    assert c["max_abs"] is None                      # inf - inf: no JSON number


def test_bad_input_is_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('k = "x"\n')
    for argv in (["--unit", "nosuch"], ["--unit", str(bad)], ["--unit", "exact=nosuch"],
                 ["--unit", "hopper-cublas=fp8-tensor:rceil"],
                 ["--unit", "blackwell-mxf8f6f4=mxfp8:nosuch"],
                 ["--model", str(tmp_path / "none.gguf")], ["--text", str(tmp_path / "no.txt")],
                 ["--out", str(bad / "sub")]):
        assert cli_main(["torch-eval", "--model", "tiny", "--out", str(tmp_path), *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("mxsim: error:") and err.count("\n") == 1, err
    with pytest.raises(MxsimError, match="named twice"):
        resolve_units(["exact", "hopper-cublas", "hopper-cublas"])
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_bytes(b"NOPE" + bytes(64))
    with pytest.raises(MxsimError, match="not a GGUF file"):
        gguf.read(not_gguf)


def test_spec_file_recipe_from_formats(tmp_path):
    (run,) = [r for r in resolve_units(["docs/data/torch_eval_acc10.toml"]) if r.label != "exact"]
    assert run.recipe == "fp8-tensor"
    assert resolve_units(["hopper-wgmma-bf16"])[1].recipe == "none"
    mx = resolve_units(["blackwell-mxf8f6f4=mxfp8:rceil"])[1]
    assert (mx.recipe, mx.opts) == ("mxfp8:rceil", (("scale_rule", "rceil"),))


# --- GGUF files written here: the reader and the loader against known values --------------

def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _kv(key: str, value) -> bytes:
    if isinstance(value, str):
        return _s(key) + struct.pack("<I", 8) + _s(value)
    if isinstance(value, float):
        return _s(key) + struct.pack("<If", 6, value)
    if isinstance(value, list):
        return _s(key) + struct.pack("<IIQ", 9, 8, len(value)) + b"".join(_s(v) for v in value)
    return _s(key) + struct.pack("<II", 4, value)


def _gguf(meta: dict, tensors: dict[str, tuple[int, bytes, tuple]]) -> bytes:
    """A GGUF v3 file: tensors name -> (ggml type, raw bytes, numpy shape)."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta))
    head += b"".join(_kv(k, v) for k, v in meta.items())
    body, infos = b"", b""
    for name, (kind, raw, shape) in tensors.items():
        body += b"\0" * (-len(body) % 32)
        infos += _s(name) + struct.pack("<I", len(shape)) + b"".join(
            struct.pack("<Q", d) for d in reversed(shape)) + struct.pack("<IQ", kind, len(body))
        body += raw
    head += infos
    return head + b"\0" * (-len(head) % 32) + body


def test_q4_1_and_q8_0_blocks(tmp_path):
    rng = np.random.default_rng(1)
    d, m = np.float16(0.0312), np.float16(-0.25)
    q4 = rng.integers(0, 16, 64)
    q4_raw = b"".join(np.array([d, m], "<f2").tobytes()
                      + bytes(int(lo) | int(hi) << 4 for lo, hi in zip(blk[:16], blk[16:],
                                                                      strict=True))
                      for blk in q4.reshape(2, 32))
    q8 = rng.integers(-128, 128, 32)
    q8_raw = np.array([d], "<f2").tobytes() + q8.astype(np.int8).tobytes()
    path = tmp_path / "q.gguf"
    path.write_bytes(_gguf({"general.architecture": "test"},
                           {"a": (3, q4_raw, (2, 32)), "b": (8, q8_raw, (32,))}))
    g = gguf.read(path)
    assert g.types == {"a": "Q4_1", "b": "Q8_0"}
    for got, want in ((g.tensors["a"].ravel(), [np.float32(d) * np.float32(q) + np.float32(m)
                                                for q in q4]),
                      (g.tensors["b"], [np.float32(d) * np.float32(q) for q in q8])):
        assert got.dtype == np.float32
        assert got.view(np.uint32).tolist() == np.array(want, np.float32).view(np.uint32).tolist()


def test_llama_from_gguf_is_the_same_model(tmp_path):
    """tiny()'s weights written as F32 GGUF tensors (llama.cpp's names) load back into a
    model whose logits are bit-identical; the loader's vocabulary drives the tokenizer."""
    net = tiny()
    st = net.state_dict()
    names = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output", "gate": "ffn_gate",
             "up": "ffn_up", "down": "ffn_down", "attn_norm": "attn_norm", "ffn_norm": "ffn_norm"}
    tensors = {"token_embd.weight": st["embed.weight"], "output_norm.weight": st["norm.weight"],
               "output.weight": st["head.weight"]}
    for key, t in st.items():
        parts = key.split(".")
        if parts[0] == "blocks":
            tensors[f"blk.{parts[1]}.{names[parts[2]]}.weight"] = t
    c = net.config
    tokens = [bytes([b]).decode("latin-1") for b in range(256)]
    meta = {"general.architecture": "llama", "llama.embedding_length": c.dim,
            "llama.feed_forward_length": c.hidden, "llama.block_count": c.layers,
            "llama.attention.head_count": c.heads, "llama.attention.head_count_kv": c.kv_heads,
            "llama.rope.freq_base": 10000.0, "llama.attention.layer_norm_rms_epsilon": 1e-5,
            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": ["a b"]}
    path = tmp_path / "tiny.gguf"
    path.write_bytes(_gguf(meta, {k: (0, v.numpy().astype("<f4").tobytes(), tuple(v.shape))
                                  for k, v in tensors.items()}))
    back = from_gguf(gguf.read(path))
    ids = torch.arange(10)
    with torch.no_grad():
        assert torch.equal(back(ids).view(torch.int32), net(ids).view(torch.int32))


def test_bpe_merges_by_rank():
    chars = bpe._byte_chars()
    assert len(set(chars.values())) == 256 and chars[ord(" ")] == "Ġ"
    tokens = ["l", "o", "w", "Ġ", "lo", "low", "Ġl", "e", "r", "er", "1", "2"]
    tok = bpe.Tokenizer(tokens, ["l o", "lo w", "e r", "Ġ l"])
    ids = tok.encode("lower low12")
    assert [tokens[i] for i in ids] == ["low", "er", "Ġ", "low", "1", "2"]
    assert tok.decode(ids) == "lower low12"


def test_docs_are_the_committed_report():
    """docs/torch_eval.md's figures = what docs/data/torch_eval.json says; the plot exists."""
    assert figures.main(["--check"]) == 0
    rep = json.loads(figures.DATA.read_text())
    assert rep["units"][0]["unit"] == "exact" and rep["units"][0]["kl_mean"] == 0
    assert (figures.ROOT / "docs" / "img" / "torch_eval.png").read_bytes()[:4] == b"\x89PNG"
    assert {u["unit"] for u in rep["units"]} >= {"hopper-cublas-fast", "hopper-cublas",
                                                 "blackwell-mxf8f6f4", "blackwell-mxf4nvf4"}


def test_cli_writes_the_report(tmp_path, capsys):
    argv = ["torch-eval", "--model", "tiny", "--tokens", "4", "--unit", "hopper-cublas",
            "--engine", "fast", "--out", str(tmp_path), "--json"]
    assert cli_main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert [u["unit"] for u in out["units"]] == ["exact", "hopper-cublas"]
    assert out["tokens"] == 4 and "layers" not in out["units"][1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md",
                                                          "report.png"]
