"""Thin wrappers over the Linux syscalls the sandbox needs and Python 3.10 does not expose, and their constants."""

from __future__ import annotations

import ctypes
import os
import platform

# Linux constants (uapi headers); the same values on x86_64 and aarch64.
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 1 << 14, 1 << 18
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 22, 24
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38
SECCOMP_MODE_FILTER = 2
CAP_VERSION_3 = 0x20080522
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def prctl(option: int, arg: int = 0, arg3: int = 0) -> int:
    return check(libc.prctl(option, arg, arg3, 0, 0), f"prctl({option})")


def unshare(flags: int) -> None:
    check(libc.unshare(flags), f"unshare({flags:#x})")


def setns(fd: int, nstype: int) -> None:
    check(libc.setns(fd, nstype), "setns")


def mount(source: bytes, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> None:
    check(libc.mount(source, target, fstype, flags, data), f"mount {target.decode()}")


def landlock_abi() -> int:
    """The Landlock ABI version, 0 when the kernel lacks it or it is disabled."""
    result = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, int(result))


def kernel_version() -> tuple[int, int]:
    """(major, minor) of the running kernel, e.g. (6, 18)."""
    parts = platform.release().split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    except (IndexError, ValueError):
        return (0, 0)

