"""The machine a measurement runs on: devices, backends, GPU support, the doctor, forked
CUDA, the host's CPUs and provenance. The GPU acceptance check is
accelbench.studies.gpu_acceptance."""
