"""Build step beyond pyproject.toml: bundle libtutti.so (and the C headers, which tutti.torch's
shim compiles against) into the package.

The library comes from TUTTI_LIBRARY when set, else from the repository's build/release (this
file's ../build/release); the headers from TUTTI_INCLUDE, else ../include. Without either the package is built without it, and finds the
library at run time through TUTTI_LIBRARY or the system's library path.
"""

import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


def _library():
    env = os.environ.get("TUTTI_LIBRARY")
    if env:
        if not os.path.exists(env):
            raise SystemExit("setup.py: TUTTI_LIBRARY=%s does not exist" % env)
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    cand = os.path.join(os.path.dirname(here), "build", "release", "libtutti.so")
    return cand if os.path.exists(cand) else None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        include = os.environ.get("TUTTI_INCLUDE") or os.path.join(os.path.dirname(here),
                                                                  "include")
        if os.path.exists(os.path.join(include, "nccl.h")):
            dst_inc = os.path.join(self.build_lib, "tutti", "include")
            os.makedirs(dst_inc, exist_ok=True)
            for name in ("nccl.h", "tutti.h"):
                shutil.copyfile(os.path.join(include, name), os.path.join(dst_inc, name))
        lib = _library()
        if lib is None:
            print("setup.py: no libtutti.so found (set TUTTI_LIBRARY); building without it")
            return
        dst = os.path.join(self.build_lib, "tutti", "libtutti.so")
        # Follow the libtutti.so -> libtutti.so.0 -> libtutti.so.0.1.0 links: copy the file.
        shutil.copyfile(os.path.realpath(lib), dst)
        print("setup.py: bundled %s as %s" % (os.path.realpath(lib), dst))


setup(cmdclass={"build_py": BuildPyWithLibrary})
