"""``epilog --from URL``: a job's findings as the node's running ``serve`` saw them.

``serve`` answers ``/api/v1/jobs/J`` with what it saw while job J ran (core.job_ledger). The
answer is read as untrusted: at most ``MAX_ANSWER`` bytes, only lists of short strings are
taken, and the machine faults are told apart here from the finding ids (never from how the
server sorted them), so a confused or hostile server can make the epilog print at most a few
escaped ids, never choose its exit status by saying so.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from gputop_doctor.core.errors import DoctorError, UsageError
from gputop_doctor.core.job_ledger import JOBS_PATH
from gputop_doctor.core.jobs import JobSelector

TIMEOUT_S = 10.0
MAX_ANSWER = 1 << 20
MAX_ID = 64  # a finding id is a short kebab-case word


def job_url(base: str, selector: JobSelector) -> str:
    """``base`` (``http://127.0.0.1:19400``, optionally with a path) + the job's endpoint."""
    parts = urllib.parse.urlsplit(base.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--from wants the URL serve listens on (http://HOST:PORT), got {base!r}")
    return urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, parts.path.rstrip("/") + JOBS_PATH + selector.value, "", "")
    )


def served_findings(base: str, selector: JobSelector) -> set[str]:
    """Every finding id ``serve`` saw while the job ran; UsageError when it has not seen it."""
    url = job_url(base, selector)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            body = answer.read(MAX_ANSWER + 1)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise UsageError(
                f"serve at {base} has not seen {selector.label} (it watches the jobs whose "
                "processes hold a GPU, and the one attached with --job)"
            ) from None
        raise DoctorError(f"serve at {base} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DoctorError(f"cannot reach serve at {base}: {reason}") from None
    return _finding_ids(body, base)


def _finding_ids(body: bytes, base: str) -> set[str]:
    not_serve = DoctorError(f"{base} did not answer as gputop-doctor serve does")
    if len(body) > MAX_ANSWER:
        raise not_serve
    try:
        view = json.loads(body)
    except ValueError:
        raise not_serve from None
    if not isinstance(view, dict):
        raise not_serve
    found: set[str] = set()
    for key in ("machine_faults", "findings"):
        ids = view.get(key)
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise not_serve
        found.update(i[:MAX_ID] for i in ids)
    return found
