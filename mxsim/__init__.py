"""mxsim: bit-exact models of block-scaled (OCP MX, NVFP4) tensor-core dot-product units.

``import mxsim`` needs only numpy and ml_dtypes; amaranth, cocotb and torch are imported by the
verbs that use them.
"""

from . import formats, presets, quantize, spec, units, vectors
from .api import gemm, matmul
from .errors import FormatError, MxsimError, UnitError, VectorFileError

__version__ = "0.1.0"

__all__ = ["formats", "presets", "quantize", "spec", "units", "vectors", "matmul", "gemm",
           "MxsimError", "FormatError", "VectorFileError", "UnitError", "__version__"]
