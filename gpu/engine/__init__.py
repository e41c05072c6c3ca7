"""The GPU engine and mxsim.torch on the device, against the CPU, and their figures."""
