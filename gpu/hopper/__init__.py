"""Hopper (sm_90) paths on every operand type: PTX mma.sync, cuBLASLt, Triton."""
