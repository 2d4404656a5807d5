"""A seccomp filter (classic BPF) that closes the kernel's riskiest doors to sandboxed programs.

Namespaces, users and cgroups already contain a program; this shrinks the kernel code it can
reach, in the spirit of Docker's and Flatpak's default profiles. Refused with ``EPERM``:

* new namespaces (``unshare``, ``setns``, ``clone`` with a ``CLONE_NEW*`` flag): unprivileged user
  namespaces are the entry point of most recent container escapes;
* ``clone3`` (with ``ENOSYS``, so that glibc falls back to ``clone``, whose flags we can check);
* System V IPC objects and POSIX message queues (they outlive their creator);
* tracing other processes, mounting, kernel keyrings, eBPF, perf events, userfaultfd, io_uring,
  module loading, kexec, swap, reboot, clock setting, raw I/O ports and other admin calls;
* any other architecture's calling convention (the 32-bit ``int 0x80`` ABI, x32), which would
  otherwise bypass a filter written for x86-64 numbers.

Everything else is allowed. Only x86-64 has a table here; elsewhere :func:`supported` says no and
the sandbox runs without the filter (``isolation()`` then lacks ``+seccomp``).
"""

from __future__ import annotations

import errno
import platform
import struct

# seccomp_data: nr (u32) | arch (u32) | instruction_pointer (u64) | args[6] (u64 each)
_OFF_NR, _OFF_ARCH, _OFF_ARG0_LOW = 0, 4, 16

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000

AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000

# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET (not NEWTIME: in clone()'s
# flags 0x80 is part of the exit signal).
CLONE_NEW_MASK = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000
CLONE_NEW_MASK |= 0x40000000

X86_64_CLONE = 56
X86_64_CLONE3 = 435

X86_64_DENIED: dict[str, int] = {
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "pidfd_getfd": 438,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "unshare": 272,
    "setns": 308,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "acct": 163,
    "quotactl": 179,
    "syslog": 103,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "lookup_dcookie": 212,
    "uselib": 134,
    "_sysctl": 156,
    "vhangup": 153,
    "iopl": 172,
    "ioperm": 173,
    "settimeofday": 164,
    "clock_settime": 227,
    "adjtimex": 159,
    "clock_adjtime": 305,
    # Kernel objects that outlive the process that made them: a program could leave data in
    # one for a later run of itself in the same sandbox (the code harness runs one test per
    # process and must keep tests apart). Python's multiprocessing uses none of them.
    "shmget": 29,
    "semget": 64,
    "msgget": 68,
    "mq_open": 240,
}


def supported() -> bool:
    """Whether this machine's architecture has a filter here (x86-64 only)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def _insn(code: int, jt: int, jf: int, k: int) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def x86_64_filter() -> bytes:
    """The filter as ``struct sock_filter[]`` bytes, ready for ``bwrap --seccomp FD``."""
    denied = sorted(set(X86_64_DENIED.values()))
    # Layout: [0] load arch, [1] arch ok?, [2] load nr, [3] x32?, [4..] one jeq per denied nr,
    # then clone3, clone + its flags check, and the four returns at the end.
    n_checks = len(denied)
    i_clone3 = 4 + n_checks
    i_clone = i_clone3 + 1
    i_ret_allow = i_clone + 3
    i_ret_eperm = i_ret_allow + 1
    i_ret_enosys = i_ret_eperm + 1

    def to(target: int, here: int) -> int:
        offset = target - (here + 1)
        assert 0 <= offset < 256, "filter too long for an 8-bit jump"
        return offset

    prog = [
        _insn(_LD_W_ABS, 0, 0, _OFF_ARCH),
        _insn(_JEQ_K, 0, to(i_ret_eperm, 1), AUDIT_ARCH_X86_64),
        _insn(_LD_W_ABS, 0, 0, _OFF_NR),
        _insn(_JGE_K, to(i_ret_eperm, 3), 0, _X32_SYSCALL_BIT),
    ]
    for nr in denied:
        here = len(prog)
        prog.append(_insn(_JEQ_K, to(i_ret_eperm, here), 0, nr))
    prog.append(_insn(_JEQ_K, to(i_ret_enosys, i_clone3), 0, X86_64_CLONE3))
    prog.append(_insn(_JEQ_K, 0, to(i_ret_allow, i_clone), X86_64_CLONE))
    prog.append(_insn(_LD_W_ABS, 0, 0, _OFF_ARG0_LOW))
    prog.append(_insn(_JSET_K, to(i_ret_eperm, i_clone + 2), 0, CLONE_NEW_MASK))
    prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    prog.append(_insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM))
    prog.append(_insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS))
    assert len(prog) == i_ret_enosys + 1
    return b"".join(struct.pack("=HBBI", *insn) for insn in prog)
