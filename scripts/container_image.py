"""Build deploy/Dockerfile with Podman and run the image, as a user would with Docker.

    python scripts/container_image.py build   # base image, then the image (minutes, once)
    python scripts/container_image.py run     # --demo healthy snapshot --json in the image

Podman runs rootful with the ``vfs`` storage driver and ``chroot`` build isolation (no
overlay or nested namespaces needed), its store under ``CONTAINER_CHECK_STORE``
(default ``/var/tmp/gputop-doctor-podman``), and ``runc`` to run (crun refuses a host whose
cgroups are in hybrid mode). A container gets ulimits no higher than this shell's, since a
sandbox without ``CAP_SYS_RESOURCE`` cannot raise them.

The Dockerfile starts ``FROM python:3.12-slim``. Where Docker Hub cannot be reached, ``build``
makes a stand-in under that name from Debian bookworm (``debootstrap``: Python 3.11 and pip,
this host's CA bundle, ``break-system-packages`` so that the Dockerfile's plain ``pip install``
runs as it does on the official image); it says so, and the image is then the Dockerfile's
steps on that stand-in, not on the official base.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = "docker.io/library/python:3.12-slim"
IMAGE = "localhost/gputop-doctor:check"
MIRROR = "http://deb.debian.org/debian"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


STORE_VARIABLE = "CONTAINER_CHECK_STORE"
USAGE = "usage: python scripts/container_image.py build|run"


def podman() -> list[str]:
    store = os.environ.get(STORE_VARIABLE) or "/var/tmp/gputop-doctor-podman"
    storage = ["--storage-driver", "vfs", "--root", f"{store}/root", "--runroot", f"{store}/run"]
    return ["podman", *storage, "--runtime", "runc"]


def has_image(name: str) -> bool:
    return subprocess.run([*podman(), "image", "exists", name], check=False).returncode == 0


def _stand_in_base() -> None:
    if shutil.which("debootstrap") is None:
        sys.exit(f"cannot pull {BASE} and no debootstrap to make a stand-in")
    print(f"container_image: {BASE} cannot be pulled here; making a Debian bookworm stand-in")
    with tempfile.TemporaryDirectory(prefix="gputop-base-") as rootfs:
        packages = "--include=python3,python3-pip,ca-certificates"
        cmd = ["debootstrap", "--variant=minbase", packages, "bookworm", rootfs, MIRROR]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        os.chmod(rootfs, 0o755)  # the image's / (mkdtemp made it 0700: USER 10001 could not run)
        shutil.copy("/etc/ssl/certs/ca-certificates.crt", f"{rootfs}/etc/ssl/certs/")
        Path(f"{rootfs}/etc/pip.conf").write_text("[global]\nbreak-system-packages = true\n")
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        # The official image's PATH and CMD: without an ENV PATH, runc finds no command.
        config = ["--change", f"ENV PATH={PATH}", "--change", 'CMD ["python3"]']
        subprocess.run([*podman(), "import", *config, "-", BASE], stdin=tar.stdout, check=True)
        tar.wait()


def build() -> None:
    if not has_image(BASE) and subprocess.run([*podman(), "pull", BASE]).returncode != 0:
        _stand_in_base()
    cmd = [*podman(), "build", "--pull=never", "--isolation", "chroot", "-t", IMAGE]
    subprocess.run([*cmd, "-f", "deploy/Dockerfile", "."], check=True, cwd=ROOT)


def run_argv(*argv: str, entrypoint: str | None = None) -> list[str]:
    """``podman run`` of the image with ``argv`` after its ENTRYPOINT (or ``entrypoint``)."""
    limits = []
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft, _ = resource.getrlimit(which)
        limit = 4096 if soft == resource.RLIM_INFINITY else min(soft, 4096)
        limits += ["--ulimit", f"{name}={limit}:{limit}"]
    override = ["--entrypoint", entrypoint] if entrypoint else []
    return [*podman(), "run", "--rm", "--network", "none", *limits, *override, IMAGE, *argv]


def main(args: list[str]) -> int:
    if args == ["build"]:
        build()
        return 0
    if args == ["run"]:
        done = subprocess.run(run_argv("--demo", "healthy", "snapshot", "--json"), check=True,
                              capture_output=True, text=True)  # fmt: skip
        frame = json.loads(done.stdout)
        print(f"container_image: the image ran: {frame['system']['source']}, "
              f"{len(frame['gpus'])} GPUs, headline: {frame['headline']['text']}")  # fmt: skip
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
