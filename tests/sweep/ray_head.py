"""A local Ray head on 127.0.0.1 for tests: start it, print its address, wait, stop it.

Run as a script: it prints the head's GCS address on stdout, then keeps the head up
until its stdin closes (or it is terminated), and stops every Ray process it started.
"""

from __future__ import annotations

import signal
import sys


def main() -> None:
    import ray

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    context = ray.init(
        num_cpus=2,
        object_store_memory=80 * 1024 * 1024,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        print(context.address_info["gcs_address"], flush=True)
        sys.stdin.read()
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
