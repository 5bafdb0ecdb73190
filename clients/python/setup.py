"""Build step of the raftkv Python client.

The gRPC stubs are not in the source tree: they are generated here, at build
time, from the API's .proto files with grpcio-tools (a build requirement,
pyproject.toml), into the package as raftkv/v1/*_pb2.py, *_pb2.pyi and
*_pb2_grpc.py. protoc runs with ``-I <protos>``, so the generated imports read
``from raftkv.v1 import kv_pb2``, which resolves inside this package.

Where the .proto files are taken from, first found wins:
  1. $RAFTKV_PROTOS_DIR (the directory holding raftkv/v1/kv.proto), for
     builds outside the repository;
  2. ../../protos (the repository's protos/, for `pip install ./clients/python`);
  3. ./protos (the copy that `python -m build --sdist` puts in the sdist).

The runtime requirements are pinned to what the generated code needs: grpcio
at least the grpcio-tools version that generated it, and the protobuf runtime
range that this grpcio-tools itself requires (the gencode checks the runtime
version when it is imported).
"""

import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py as _build_py
from setuptools.command.sdist import sdist as _sdist

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_PACKAGE = os.path.join("raftkv", "v1")


def _protos_dir():
    env = os.environ.get("RAFTKV_PROTOS_DIR")
    candidates = [env] if env else [
        os.path.join(HERE, "..", "..", "protos"),
        os.path.join(HERE, "protos"),
    ]
    for c in candidates:
        if os.path.isfile(os.path.join(c, PROTO_PACKAGE, "kv.proto")):
            return os.path.abspath(c)
    where = "RAFTKV_PROTOS_DIR=%s" % env if env else " or ".join(os.path.abspath(c) for c in candidates)
    raise SystemExit(
        "raftkv: cannot find raftkv/v1/kv.proto under %s; set RAFTKV_PROTOS_DIR to the "
        "directory that holds raftkv/v1/*.proto (the repository's protos/)" % where)


def _proto_files(root):
    files = sorted(glob.glob(os.path.join(root, PROTO_PACKAGE, "*.proto")))
    if not files:
        raise SystemExit("raftkv: no .proto files in %s" % os.path.join(root, PROTO_PACKAGE))
    return files


def generate_stubs(out_dir):
    """Runs grpc_tools.protoc on raftkv/v1/*.proto, writing out_dir/raftkv/v1/*."""
    try:
        import grpc_tools
        from grpc_tools import protoc
    except ImportError as e:  # pragma: no cover - a build without the build requirements
        raise SystemExit("raftkv: grpcio-tools is needed to build this package (%s)" % e)
    root = _protos_dir()
    protos = _proto_files(root)
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    os.makedirs(out_dir, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        "-I" + root,
        "-I" + well_known,
        "--python_out=" + out_dir,
        "--pyi_out=" + out_dir,
        "--grpc_python_out=" + out_dir,
    ] + protos
    rc = protoc.main(args)
    if rc != 0:
        raise SystemExit("raftkv: protoc failed (exit %d): %s" % (rc, " ".join(args)))
    for p in protos:
        name = os.path.splitext(os.path.basename(p))[0]
        for suffix in ("_pb2.py", "_pb2_grpc.py"):
            path = os.path.join(out_dir, PROTO_PACKAGE, name + suffix)
            if not os.path.isfile(path):
                raise SystemExit("raftkv: protoc did not write %s" % path)


class build_py(_build_py):
    """build_py, then the gRPC stubs into the built package."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            # `pip install -e`: the package is imported from src/.
            generate_stubs(os.path.join(HERE, "src"))
        else:
            generate_stubs(self.build_lib)

    def get_outputs(self, include_bytecode=True):
        outputs = list(super().get_outputs(include_bytecode))
        if not getattr(self, "editable_mode", False):
            for p in _proto_files(_protos_dir()):
                name = os.path.splitext(os.path.basename(p))[0]
                for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"):
                    outputs.append(os.path.join(self.build_lib, PROTO_PACKAGE, name + suffix))
        return outputs


class sdist(_sdist):
    """sdist with a copy of the .proto files, so that it builds on its own."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        root = _protos_dir()
        dest = os.path.join(base_dir, "protos", PROTO_PACKAGE)
        os.makedirs(dest, exist_ok=True)
        for p in _proto_files(root):
            shutil.copy2(p, dest)


def _runtime_requirements():
    """grpcio >= the generating grpcio-tools; the protobuf range it requires."""
    try:
        from importlib import metadata
        tools_version = metadata.version("grpcio-tools")
        protobuf = [r for r in (metadata.requires("grpcio-tools") or [])
                    if r.replace(" ", "").lower().startswith("protobuf") and ";" not in r]
    except Exception:  # metadata alone is needed (e.g. `setup.py --version`)
        return ["grpcio", "protobuf"]
    return ["grpcio>=" + tools_version] + (protobuf or ["protobuf"])


setup(
    install_requires=_runtime_requirements(),
    cmdclass={"build_py": build_py, "sdist": sdist},
)
