#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The kernel log, less the one report kernel-log-check.sh allows.

  dmesg | kernel_log_filter.py

nvmet takes nvmet_config_sem inside an rdma_cm handler_mutex when a connect command beats its
queue's ESTABLISHED event (nvmet_rdma_queue_established runs the commands that waited), and the
reverse when a port that served a connect is removed (nvmet_port_subsys_drop_link, then
rdma_destroy_id): lockdep reports that with any RDMA device. Only a circular-dependency report
whose chain is exactly those two locks is taken out, whole; a note goes to stderr.
"""

import re
import sys

ALLOWED = {"nvmet_config_sem", "&id_priv->handler_mutex"}
REPORT = re.compile(r"(?ms)^[^\n]*WARNING: possible circular locking dependency detected.*?</TASK>\n")
CHAIN = re.compile(r"-> #\d+ \((.+?)\)\{")


def without_allowed(log):
    """LOG without the allowed reports."""
    def keep(m):
        if set(CHAIN.findall(m.group(0))) != ALLOWED:
            return m.group(0)
        print("# allowed: upstream nvmet/rdma_cm lock order (nvmet_config_sem, handler_mutex)",
              file=sys.stderr)
        return ""
    return REPORT.sub(keep, log)


if __name__ == "__main__":
    sys.stdout.write(without_allowed(sys.stdin.read()))
