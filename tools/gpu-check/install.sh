#!/usr/bin/env bash
# A venv at .venv over a PyTorch GPU image's own packages (torch, CuPy, Numba-CUDA, NVML,
# pandas, pytest, ...), with what the image lacks installed from carried wheels
# (tools/gpu-check/wheels.py) and the project itself: no index is asked.
#
#   tools/gpu-check/install.sh [WHEELS]     (default .whl; PYTHON: the image's python3)
set -euo pipefail
cd "$(dirname "$0")/../.."
wheels=${1:-.whl}
python=${PYTHON:-python3}
compgen -G "$wheels/*.whl" >/dev/null || { echo "no wheels in $wheels" >&2; exit 1; }
# The image's python may itself be a venv, whose packages a new venv's
# --system-site-packages would not see: its site folders are added by a .pth file instead,
# after the new venv's own (so a carried NumPy comes first). Without pip of its own, the
# venv uses the image's pip and setuptools, not the older ones ensurepip bundles.
"$python" -m venv --without-pip .venv
site_dirs=$("$python" -c 'import site; print(repr(site.getsitepackages()))')
purelib=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; list(map(site.addsitedir, $site_dirs))" > "$purelib/zz-image-packages.pth"
.venv/bin/python -m pip install --quiet --no-index --no-deps "$wheels"/*.whl
.venv/bin/python -m pip install --quiet --no-index --no-deps --no-build-isolation -e .
# make's venv target is then up to date: it would otherwise reinstall from PyPI.
touch .venv/.installed-cuda13
.venv/bin/python -c 'import accelbench, jsonschema, jsonschema_rs, numpy, snakemake, torch
print("accelbench", accelbench.__version__, "| numpy", numpy.__version__, "| snakemake",
      snakemake.__version__, "| torch", torch.__version__)'
