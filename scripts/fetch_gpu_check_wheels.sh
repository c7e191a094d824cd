#!/bin/sh
# Fill .whl/ (ignored by git) with the wheels gputop-doctor needs that a CUDA image with
# PyTorch, nvidia-ml-py, psutil and prometheus-client usually lacks, for an offline machine,
# and nvitop, which the check's beside step runs next to the monitor (not a dependency).
# Pure-Python wheels, for CPython 3.12 on x86-64 Linux; versions as tested here.
# Then, on the offline machine:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
# See docs/gpu-check.md.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p .whl
for spec in \
    textual==8.2.8 \
    textual-plotext==1.0.1 \
    plotext==5.3.2 \
    platformdirs==4.14.8 \
    mdit-py-plugins==0.7.0 \
    rich==15.0.0 \
    markdown-it-py==4.3.0 \
    mdurl==0.1.2 \
    linkify-it-py==2.2.0 \
    uc-micro-py==2.0.0 \
    pygments==2.21.0 \
    typing-extensions==4.16.0 \
    nvitop==1.7.2
do
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform any -d .whl "$spec"
done
ls -l .whl
du -sh .whl
