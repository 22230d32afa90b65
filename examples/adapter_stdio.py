"""A site adapter as a separate program: JSON lines on stdin/stdout (cloudtwin's subprocess adapter).

It models an OpenStack-like site whose objects live in the JSON file given as the first
argument, so that the site keeps its state when this program is killed and started again.
`CLOUDTWIN_ADAPTER_DELAY_S` slows every change down (to kill an agent half-way in tests).
Use it as:  ProcessAdapter([sys.executable, "examples/adapter_stdio.py", "site.json"])
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from cloudtwin.intercloud.adapters.base import SiteApi
from cloudtwin.intercloud.adapters.openstack import OPENSTACK_COLLECTIONS, OpenStackLikeAdapter
from cloudtwin.intercloud.adapters.process import handle_request

DELAY_S = float(os.environ.get("CLOUDTWIN_ADAPTER_DELAY_S", "0"))


class FileBackedSite(SiteApi):
    """A SiteApi that writes itself to a file after every change (atomically)."""

    def __init__(self, path: Path) -> None:
        super().__init__(OPENSTACK_COLLECTIONS)
        self.path = path
        if path.exists():
            saved = json.loads(path.read_text())
            self.collections, self._serial = saved["collections"], saved["serial"]

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"collections": self.collections, "serial": self._serial}))
        os.replace(tmp, self.path)

    def create(self, collection: str, **body: object) -> str:
        time.sleep(DELAY_S)
        oid = super().create(collection, **body)
        self._save()
        return oid

    def delete(self, collection: str, oid: str) -> None:
        time.sleep(DELAY_S)
        super().delete(collection, oid)
        self._save()


def main() -> None:
    adapter = OpenStackLikeAdapter(FileBackedSite(Path(sys.argv[1])))
    for line in sys.stdin:
        if line.strip():
            try:
                request = json.loads(line)
            except json.JSONDecodeError:
                request = {}
            sys.stdout.write(json.dumps(handle_request(adapter, request)) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
