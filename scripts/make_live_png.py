"""Render docs/live-page.png: the live page of ``serve --demo thermal --ui`` in headless Chromium.

Usage: python scripts/make_live_png.py  (needs `chromium` on PATH; Debian: apt-get install
chromium). The picture is taken after the page has received three frames from the stream, so
it shows what a browser shows a few seconds after opening the page.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.fleet.servers import start_exporter
from tests.web.browser import Browser

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    serve = start_exporter("--ui", scenario="thermal")
    try:
        with Browser(f"http://{serve.address}/", width=1240, height=1400) as browser:
            browser.wait_for("document.body && Number(document.body.dataset.updates) >= 3")
            png = browser.screenshot()
    finally:
        serve.stop()
    (ROOT / "docs" / "live-page.png").write_bytes(png)
    print("wrote docs/live-page.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
