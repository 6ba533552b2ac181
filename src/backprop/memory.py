"""
Freed memory kept for the next step: the numpy engine's arrays are reused, not fetched anew.

A training step allocates the same arrays every time (the activations, their gradients, Adam's
temporaries: tens of MB for the running-text recipe) and frees them at its end. glibc's malloc,
which numpy allocates through on Linux, serves every block of over 128 KiB to 32 MiB with a
fresh mmap, or gives the freed top of its heap back to the operating system once more than
about twice that is free. Either way the next step's arrays are new pages, and the first write
to each 4 KiB page is a page fault: on the recipe's model (n_layer 4, n_embd 128, batch 12,
float32) that was 9 ms of a 40 ms step on this project's 2-core machine, quiet (the same steps
timed with glibc's MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ set and unset).

`keep_freed_memory()` tells malloc, through its own mallopt(), to serve blocks up to 32 MiB from
its heap and to keep up to 256 MiB of freed memory there, so that every step after the first
reuses the pages of the one before. The process's peak memory is the same (a freed block is
reused, not added to); what changes is that memory freed after the peak is kept for reuse
instead of returned. Where the C library is not glibc (macOS, musl), nothing is changed.
"""

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1   # mallopt's parameter numbers, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2 ** 20   # blocks up to this come from the heap: glibc's largest allowed value
TRIM_THRESHOLD = 256 * 2 ** 20  # free memory kept at the top of the heap, not handed back


def keep_freed_memory():
    """Ask glibc's malloc to reuse freed blocks instead of returning them; True if it agreed."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6')
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # no C library by that name, or one without mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mallopt returns 1 on success; setting either one stops glibc's own adjustment of both
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
