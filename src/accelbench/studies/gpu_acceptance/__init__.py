"""GPU acceptance: `make gpu-check` (docs/gpu-acceptance.md) judges the records of the GPU
grid against the board's data sheet and the conditions every GPU result must meet
(acceptance), from NVIDIA's published figures (datasheets), and keeps them with the
verdict in reference/<gpu>/ (check: `accelbench gpu-check`). No rules of its own: the
grids it runs are the project's GPU grids (config/gpu.yaml, gpu-full.yaml,
gpu-rapids.yaml), run by the core workflow."""
