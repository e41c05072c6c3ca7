"""Vector sets: the ``mxsim.vectors/1`` file schema, its I/O, and seeded generators.

One ``.npz`` file carries the operands of a batch of GEMMs as codes, their scales, an optional
accumulator ``c`` and an optional result ``d``. The same file feeds the model, the RTL testbench
and the GPU runners, and results come back in it (see ``docs/vectors.md``, field by field).

- :mod:`.schema`: :class:`VectorSet`, frozen and checked against the schema when it is built;
- :mod:`.io`: :func:`load`, :func:`save` (atomic), :func:`from_arrays`, :func:`to_arrays`,
  :func:`open_input`;
- :mod:`.generators`: :func:`generate` and :func:`generate_suite`, the seeded families.
"""

from .generators import (
    DIRECTED_FAMILIES,
    EXTRA_FAMILIES,
    FAMILIES,
    RANDOM_FAMILIES,
    generate,
    generate_suite,
)
from .io import from_arrays, load, npy_header, open_input, save, to_arrays
from .schema import (
    ACC_FORMATS,
    ELEMENT_FORMATS,
    LARGE_BYTES,
    LARGE_PRODUCTS,
    OPERAND_FORMATS,
    SCALE_FORMATS,
    SCHEMA,
    VectorSet,
    check_size,
)

__all__ = [
    "SCHEMA", "ELEMENT_FORMATS", "OPERAND_FORMATS", "SCALE_FORMATS", "ACC_FORMATS", "FAMILIES",
    "RANDOM_FAMILIES", "DIRECTED_FAMILIES", "EXTRA_FAMILIES",
    "LARGE_BYTES", "LARGE_PRODUCTS",
    "VectorSet", "load", "save", "check_size", "npy_header", "open_input", "from_arrays",
    "to_arrays", "generate", "generate_suite",
]
