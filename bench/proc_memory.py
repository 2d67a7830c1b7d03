"""What the kernel counts of a process's memory, for the benches that report
it beside a rate: its RSS (statm), its PSS and USS (smaps_rollup) and its
peak RSS (VmHWM)."""

import os

PAGE = os.sysconf("SC_PAGE_SIZE")


def statm_rss(pid="self"):
    """Resident bytes of a process: /proc/<pid>/statm's resident pages x page size."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def pss_uss(pid):
    """(PSS, USS) bytes of a process, from /proc/<pid>/smaps_rollup: RSS counts
    a page shared with the parent (a forked worker's copy-on-write index) in
    every process, PSS splits it, USS is what only this process holds."""
    pss = uss = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name == "Pss":
                pss = int(rest.split()[0]) * 1024
            elif name in ("Private_Clean", "Private_Dirty"):
                uss += int(rest.split()[0]) * 1024
    return pss, uss


def vm_hwm(pid="self"):
    """Peak resident bytes of a process (VmHWM in /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None
