"""The Lustre client stand-in (liblustre_alloc/tests/lustre_model.c) from the tests' side:
a mount root, its OST states file, and programs run with the stand-in preloaded (after the
shim, when there is one).  docs/reference/lustre-semantics.md lists its rules and sources."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from lustre_alloc.common import lustre_layout as ll

LIBDIR = Path(__file__).resolve().parents[2] / "liblustre_alloc"
MODEL_SO = LIBDIR / "tests" / "liblustre_model.so"
SHIM_SO = LIBDIR / "liblustre_alloc.so"
LOV_XATTR = "user.lustre_model.lov"
EMPTY_XATTR = "user.lustre_model.empty"


@dataclass
class LustreModel:
    """A modelled mount at ``root`` with ``osts`` OSTs; the OST states are written to
    ``state`` at every change (the stand-in re-reads them at each allocation)."""

    root: Path
    state: Path
    osts: int = 32
    inactive: set[int] = field(default_factory=set)
    nocreate: set[int] = field(default_factory=set)
    enospc: set[int] = field(default_factory=set)
    readonly: set[int] = field(default_factory=set)
    client: str = "2.15.4"
    default_count: int = 1
    default_size: int = 4 << 20            # lov.stripesize, 2.16.0+ (LOV_DESC_STRIPE_SIZE_DEFAULT)
    pools: dict[str, list[int]] = field(default_factory=dict)
    root_squash: bool = False              # mdt.*.root_squash: root's opens checked as a user

    def write(self) -> None:
        def ids(s: set[int]) -> str:
            return ",".join(str(i) for i in sorted(s))
        lines = [f"root = {self.root}", f"osts = {self.osts}",
                 f"inactive = {ids(self.inactive)}", f"nocreate = {ids(self.nocreate)}",
                 f"enospc = {ids(self.enospc)}", f"readonly = {ids(self.readonly)}",
                 f"client = {self.client}", f"default_count = {self.default_count}",
                 f"default_size = {self.default_size}",
                 f"root_squash = {int(self.root_squash)}"]
        lines += [f"pool.{name} = {','.join(map(str, osts))}"
                  for name, osts in self.pools.items()]
        self.state.write_text("\n".join(lines) + "\n")

    def env(self, shim: bool = False, **extra: str) -> dict[str, str]:
        """The environment of a program on this mount: the stand-in preloaded, after the
        shim when ``shim``."""
        self.write()
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env["LUSTRE_MODEL"] = str(self.state)
        env["LD_PRELOAD"] = f"{SHIM_SO} {MODEL_SO}" if shim else str(MODEL_SO)
        env.update(extra)
        return env

    def set_default(self, directory: Path, lum: bytes) -> None:
        """``lfs setstripe ... DIR``: the directory's default layout."""
        os.setxattr(directory, LOV_XATTR, lum)

    def layout(self, path: Path) -> ll.Layout | None:
        """``lfs getstripe FILE``: its layout, None while it has none."""
        try:
            return ll.parse(os.getxattr(path, LOV_XATTR))
        except OSError:
            return None

    def python(self, code: str, shim: bool = False, **env: str) -> dict:
        """Run ``code`` in a Python child on this mount; it sets ``out`` (a dict), which
        comes back as JSON.  Errors come back as ``out["error"]``."""
        prog = ("import errno, fcntl, json, os\n"
                "from lustre_alloc.common import lustre_layout as ll\n"
                "out = {}\n"
                "try:\n" + textwrap.indent(textwrap.dedent(code), "    ") +
                "\nexcept OSError as e:\n    out['error'] = errno.errorcode[e.errno]\n"
                "print('MODEL-OUT ' + json.dumps(out))\n")
        proc = subprocess.run([sys.executable, "-c", prog], env=self.env(shim, **env),
                              capture_output=True, text=True, timeout=60,
                              cwd=str(Path(__file__).resolve().parents[2]))
        assert proc.returncode == 0, proc.stderr
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("MODEL-OUT ")][-1]
        return json.loads(line[len("MODEL-OUT "):])


def make_model(tmp_path: Path, **kw) -> LustreModel:
    root = tmp_path / "lustre"
    root.mkdir()
    model = LustreModel(root=root, state=tmp_path / "lustre-model.conf", **kw)
    model.write()
    return model
