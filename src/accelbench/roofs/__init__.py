"""Measured roofs: peak GEMM throughput and STREAM bandwidth per device and dtype, and the
check of kernels against them."""
