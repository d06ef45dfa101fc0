"""tutti.torch: Tutti as a torch.distributed backend (PyTorch 1.13, Debian's python3-torch).

    import torch.distributed as dist
    import tutti.torch                      # registers the backend "tutti"
    dist.init_process_group("tutti", init_method="file:///tmp/rendezvous", rank=r, world_size=n)

The backend is a C++ shim (backend.cpp) compiled on first import with
torch.utils.cpp_extension against the installed torch and linked to the libtutti.so the tutti
package uses; the build is cached in TUTTI_TORCH_BUILD_DIR (default
~/.cache/tutti/torch-VERSION-HASH, one per libtutti.so path).
It needs libtorch-dev, pybind11-dev, g++ and ninja. Operations are asynchronous (host streams
and per-operation events); large CPU tensors come from memory the host's ranks map
(install_allocator). docs/python.md says what maps to what.
"""

import atexit
import hashlib
import os

import torch
import torch.distributed as dist

from .. import _lib

_ext = None


def _include_dir():
    env = os.environ.get("TUTTI_INCLUDE")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(os.path.dirname(here), "include")  # an installed package's copy
    repo_include = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(here))),
                                "include")
    for cand in (bundled, repo_include):
        if os.path.exists(os.path.join(cand, "nccl.h")):
            return cand
    raise ImportError("tutti.torch: nccl.h not found; set TUTTI_INCLUDE to Tutti's include/")


def extension():
    """The compiled shim (built on first use)."""
    global _ext
    if _ext is not None:
        return _ext
    from torch.utils import cpp_extension

    lib = os.path.abspath(_lib.library_path())  # loads libtutti.so, whose soname the shim needs
    # One cache per libtutti.so: the shim is linked against that file, and a shim another
    # checkout's library left in a shared cache must not be loaded against this one.
    lib_key = hashlib.sha256(lib.encode()).hexdigest()[:12]
    build_dir = os.environ.get("TUTTI_TORCH_BUILD_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tutti", "torch-%s-%s" % (torch.__version__, lib_key))
    os.makedirs(build_dir, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    _ext = cpp_extension.load(
        name="tutti_torch_c",
        sources=[os.path.join(here, "backend.cpp"), os.path.join(here, "allocator.cpp")],
        extra_include_paths=[_include_dir()],
        extra_cflags=["-O2"],
        extra_ldflags=[lib, "-Wl,-rpath," + os.path.dirname(lib)],
        build_directory=build_dir,
        with_cuda=False,
        verbose=bool(os.environ.get("TUTTI_TORCH_VERBOSE")))
    return _ext


def _env_bytes(name, default):
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError("%s=%r is not a number of bytes" % (name, text)) from None
    if value < 0:
        raise ValueError("%s=%r is negative" % (name, text))
    return value


def install_allocator():
    """Serves CPU tensors of TUTTI_TORCH_ALLOC_MIN_BYTES (default 256 KiB) or more from
    shareable host memory (tuttiMemAllocHost), which the host's other ranks map, keeping up to
    TUTTI_TORCH_ALLOC_CACHE_BYTES (default 1 GiB) of freed blocks for reuse. Called when the
    first "tutti" process group is created unless TUTTI_TORCH_ALLOCATOR=0. Returns whether
    the allocator is installed."""
    return extension().install_allocator(
        _env_bytes("TUTTI_TORCH_ALLOC_MIN_BYTES", 256 << 10),
        _env_bytes("TUTTI_TORCH_ALLOC_CACHE_BYTES", 1 << 30))


def allocator_stats():
    """(installed, blocks made, blocks reused, live blocks, cached bytes)."""
    return extension().allocator_stats()


def _stop_completion_threads():
    # Before the interpreter finalizes: a completion thread that then needed the GIL (to
    # release a tensor whose Python object is gone) would be ended by Python mid-destructor.
    if _ext is not None:
        _ext.stop_completion_threads()


# Registered at import, not at the first group: atexit runs its handlers last registered
# first, so a program's own handlers registered after this import (a final barrier, a
# destroy_process_group) run while the completion threads still complete Works, enforce the
# groups' timeouts and run their futures' callbacks.
atexit.register(_stop_completion_threads)


def _raise_nofile():
    """The library raises the soft RLIMIT_NOFILE to the hard limit at its first init
    (TUTTI_RAISE_NOFILE, docs/design.md "Descriptors"); done here first, with the same rule, so
    that the allocator sizes its budget of blocks (half the soft limit) from the raised one."""
    if os.environ.get("TUTTI_RAISE_NOFILE", "1") == "0":
        return
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open("/proc/sys/fs/nr_open") as f:
                want = int(f.read())
        except (OSError, ValueError):
            return
    if soft == resource.RLIM_INFINITY or want <= soft:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ValueError, OSError):
        pass  # the library's own attempt says why at INFO


def _create(store, rank, size, timeout):
    _raise_nofile()
    if os.environ.get("TUTTI_TORCH_ALLOCATOR", "1") != "0" and install_allocator():
        # Tensors from the allocator's threshold on lie in shareable memory on every rank: the
        # cost model may count on Direct mapping them (every rank sets the same, from the same
        # environment; read at the communicator's init, compared between the ranks there).
        os.environ.setdefault("TUTTI_SHAREABLE_BYTES",
                              str(max(1, _env_bytes("TUTTI_TORCH_ALLOC_MIN_BYTES", 256 << 10))))
    return extension().create_process_group(store, rank, size, timeout, inline_bytes())


def inline_bytes():
    """Collectives whose largest tensor has at most TUTTI_TORCH_INLINE_BYTES bytes (default
    4 MiB; -1: none) run on the calling thread when nothing is queued ahead of them, and their
    Work is complete when returned (docs/python.md, "Asynchronous work"). Read when a group is
    made."""
    text = os.environ.get("TUTTI_TORCH_INLINE_BYTES")
    if not text:
        return 4 << 20
    try:
        value = int(text)
    except ValueError:
        raise ValueError("TUTTI_TORCH_INLINE_BYTES=%r is not a number of bytes" % text) from None
    if value < -1:
        raise ValueError("TUTTI_TORCH_INLINE_BYTES=%r: give a size, 0, or -1" % text)
    return value


if not hasattr(dist.Backend, "TUTTI"):
    dist.Backend.register_backend("tutti", _create)
