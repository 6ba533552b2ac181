"""
Freed memory kept for the next step: the numpy engine's arrays are reused, not fetched anew.

A step allocates the same arrays every time and frees them at its end; glibc's malloc serves
blocks over 128 KiB with a fresh mmap, or hands a freed heap top back, so the next step's first
write to each page is a page fault (9 ms of a 40 ms step of the running-text recipe on the
2-core machine). `keep_freed_memory()` has malloc serve blocks up to 32 MiB from its heap and
keep up to 256 MiB freed there: the peak is the same, reused. Elsewhere than glibc, no change.
"""

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers, from glibc's malloc.h


def keep_freed_memory():
    """Ask glibc's malloc to reuse freed blocks instead of returning them; True if it agreed."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6').mallopt
    except (OSError, AttributeError):  # no C library by that name, or one without mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # 1 on success; setting either one stops glibc's own adjustment of both
    return bool(mallopt(M_MMAP_THRESHOLD, 32 << 20) and mallopt(M_TRIM_THRESHOLD, 256 << 20))
