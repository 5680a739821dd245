# syntax=docker/dockerfile:1
# specscope in a container: the page, the engine and the shipped model pair.
#
# The image installs and starts with the Makefile's own targets (`make install`, `make run`),
# so there is one recipe, not two. TORCH picks the flavour of the pinned torch:
#   cpu  (default) python:3.11-slim and torch's CPU build
#   cuda           NVIDIA's CUDA runtime image and torch's CUDA build (run with --gpus all)
# See the README ("Docker") for the build and run commands.

ARG TORCH=cpu
ARG CPU_BASE=python:3.11-slim-bookworm
ARG CUDA_BASE=nvidia/cuda:13.0.2-runtime-ubuntu24.04
ARG CPU_TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG CUDA_TORCH_INDEX=https://download.pytorch.org/whl/cu130

# ---- the two flavours: a Python, make, and where pip finds torch --------------------------
FROM ${CPU_BASE} AS base-cpu
ARG CPU_TORCH_INDEX
# pip takes the highest version among all indexes, and torch's index marks its builds with a
# local version (2.13.0+cpu > 2.13.0), so the pinned torch==2.13.0 resolves to this build.
ENV PIP_EXTRA_INDEX_URL=${CPU_TORCH_INDEX}
# Versions are left to the base image's release: pinned Debian revisions leave the archive
# with every security update and would break the build.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends make \
    && rm -rf /var/lib/apt/lists/*

FROM ${CUDA_BASE} AS base-cuda
ARG CUDA_TORCH_INDEX
ENV PIP_EXTRA_INDEX_URL=${CUDA_TORCH_INDEX} \
    PYTHON=python3
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends make python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*

# ---- build: the virtual environment, made by the Makefile ---------------------------------
# hadolint ignore=DL3006
FROM base-${TORCH} AS build
WORKDIR /app
COPY . .
RUN --mount=type=cache,target=/root/.cache/pip make install

# ---- runtime: the same base, the built tree, a user without privileges --------------------
# hadolint ignore=DL3006
FROM base-${TORCH} AS runtime
WORKDIR /app
COPY --from=build /app /app
# The server writes only under /app/data (saved runs); the rest of /app stays root's.
RUN useradd --create-home --uid 10001 --user-group specscope \
    && install -d -o specscope -g specscope /app/data
USER 10001:10001
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SPECSCOPE_HOST=0.0.0.0 \
    SPECSCOPE_PORT=8000
EXPOSE 8000
# Model loading happens before the server answers; large hub pairs may need a longer start.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-m", "app.healthcheck"]
CMD ["make", "run"]
