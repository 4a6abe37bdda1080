"""Shipped data: pkg: references resolve through importlib.resources; every folder of real data
carries its SOURCES and upstream licence; nothing reads a shared folder outside the repository."""
from __future__ import annotations

import gzip

import pytest

from lustre_alloc_data import DataFileError, is_package_reference, resource_path
from tests.conftest import DATA, FIXTURES, PROJECT_ROOT


def test_package_reference_resolves_to_the_shipped_file():
    p = resource_path("pkg:lustre_alloc_data/nersc-pytokio/lfs-df.txt.gz")
    assert p == DATA / "nersc-pytokio" / "lfs-df.txt.gz"
    with gzip.open(p, "rt") as fh:
        assert "UUID" in fh.read(4000)


@pytest.mark.parametrize("ref,words", [
    ("pkg:lustre_alloc_data", "pkg:<package>/<path"),
    ("pkg:no_such_package_xyz/a.txt", "not installed"),
    ("pkg:lustre_alloc_data/nersc-pytokio/none.gz", "no such file"),
    ("nersc-pytokio/lfs-df.txt.gz", "not a package reference"),
])
def test_bad_package_reference_is_one_line_naming_it(ref, words):
    with pytest.raises(DataFileError) as e:
        resource_path(ref)
    assert ref in str(e.value) and words in str(e.value) and "\n" not in str(e.value)


def test_is_package_reference():
    assert is_package_reference("pkg:x/y") and not is_package_reference("/abs/x.gz")


@pytest.mark.parametrize("folder", [DATA / "nersc-pytokio", FIXTURES / "lustre",
                                    FIXTURES / "lustre" / "hpe-lustre-2.10.1",
                                    FIXTURES / "lustre" / "ddn-lctl-2.14-2.15"])
def test_real_data_folders_carry_sources_and_licence(folder):
    sources = folder / "SOURCES.md" if (folder / "SOURCES.md").exists() else folder.parent / "SOURCES.md"
    assert sources.read_text().count("|") > 10
    if folder.name != "lustre":
        assert (folder / "LICENSE").stat().st_size > 500


def test_no_code_scenario_or_test_reads_a_shared_folder_beside_the_checkout():
    needles = ("../shared", "LUSTRE_ALLOC_SHARED", "{shared}", "shared_dir")
    offenders = []
    for sub in ("lustre_alloc", "lustre_alloc_data", "bench", "scripts", "tests"):
        for p in (PROJECT_ROOT / sub).rglob("*"):
            if p.suffix in (".py", ".toml", ".sh", ".cfg") and p.is_file() and p.name != "test_data_package.py":
                text = p.read_text(errors="replace")
                offenders += [f"{p.relative_to(PROJECT_ROOT)}: {n}" for n in needles if n in text]
    assert offenders == ["tests/test_packaging.py: LUSTRE_ALLOC_SHARED"]  # it sets it to /nonexistent
