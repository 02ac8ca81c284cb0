"""The machine a measurement runs on: devices, backends, GPU support, the doctor, the GPU
acceptance check, forked CUDA, the host's CPUs and provenance."""
