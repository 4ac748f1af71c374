"""Build the extension zip and check it with Blender's own extension validator.

    python tools/build_extension.py [--out-dir dist] [--no-validate]

The zip holds only what Blender loads: the manifest, the entry ``__init__.py``,
the engine's ``solver/**.py``, the whole ``itasc_addon/`` package (no tests,
benchmarks, dotfiles or caches) and the wheels the manifest lists (``wheels = [...]``:
Blender installs them when the extension is installed). Entries are sorted and
time-stamped 1980-01-01, so the same sources give the same bytes.

Wheels are not kept in the repository: each listed ``./wheels/<name>-<version>-....whl``
is taken from ``build/wheels/`` or fetched there once from the package index by pip
(``pip download <name>==<version> --no-deps --only-binary=:all:``).
"""

import argparse
import importlib.util
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = "blender_manifest.toml"
WHEEL_CACHE = Path("build") / "wheels"


class BuildError(RuntimeError):
    """The zip could not be built or Blender's validator rejected it."""


def manifest(root=ROOT):
    with open(root / MANIFEST, "rb") as fh:
        return tomllib.load(fh)


def _skipped(rel):
    return any(part.startswith(".") or part == "__pycache__" for part in rel.parts) or rel.suffix == ".pyc"


def package_files(root=ROOT):
    """Paths (relative to root) that go into the zip, sorted."""
    files = [Path(MANIFEST), Path("__init__.py")]
    files += [p.relative_to(root) for p in (root / "solver").rglob("*.py")]
    files += [p.relative_to(root) for p in (root / "itasc_addon").rglob("*") if p.is_file()]
    return sorted({f for f in files if not _skipped(f)}, key=lambda p: p.as_posix())


def wheel_files(root=ROOT):
    """{path inside the zip: path on disk} of the manifest's wheels, fetched into the cache when missing."""
    found = {}
    for entry in manifest(root).get("wheels", []):
        inside = Path(entry).as_posix().removeprefix("./")
        cached = root / WHEEL_CACHE / Path(inside).name
        if not cached.is_file():
            name, version = Path(inside).name.split("-")[:2]
            cmd = [sys.executable, "-m", "pip", "download", f"{name}=={version}", "--no-deps", "--only-binary=:all:",
                   "--quiet", "--dest", str(cached.parent)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0 or not cached.is_file():
                raise BuildError(f"could not fetch the wheel {cached.name} ({' '.join(cmd)}):\n{proc.stderr}")
        found[inside] = cached
    return found


def write_zip(out_dir, root=ROOT):
    meta = manifest(root)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{meta['id']}-{meta['version']}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in package_files(root):
            info = zipfile.ZipInfo(rel.as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, (root / rel).read_bytes())
        for inside, cached in sorted(wheel_files(root).items()):
            info = zipfile.ZipInfo(inside, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, cached.read_bytes())
    return path


def blender_scripts_dir():
    """``<bpy>/<major.minor>/scripts`` of the installed bpy wheel, found without importing bpy."""
    spec = importlib.util.find_spec("bpy")
    if spec is None or not spec.submodule_search_locations:
        raise BuildError("bpy is not installed in this Python; run `make venv` (requirements-blender.txt)")
    bpy_dir = Path(list(spec.submodule_search_locations)[0])
    found = sorted(bpy_dir.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    if not found:
        raise BuildError(f"no bl_pkg/cli/blender_ext.py under {bpy_dir}")
    return found[-1].parents[3]


def validate(zip_path):
    """Run Blender's ``blender_ext.py validate`` (with Blender's own tag list); raise on rejection."""
    scripts = blender_scripts_dir()
    cmd = [
        sys.executable,
        str(scripts / "addons_core/bl_pkg/cli/blender_ext.py"),
        "validate",
        "--valid-tags", str(scripts / "modules/_bpy_internal/extensions/tags.py"),
        str(zip_path),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    report = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or "ERROR" in report:
        raise BuildError(f"Blender's extension validator rejected {zip_path}:\n{report}")
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=ROOT / "dist", type=Path)
    parser.add_argument("--no-validate", action="store_true", help="skip Blender's validator")
    args = parser.parse_args(argv)
    path = write_zip(args.out_dir)
    print(f"wrote {path} ({len(package_files())} files, {len(wheel_files())} wheels)")
    if not args.no_validate:
        try:
            print(validate(path))
        except BuildError as err:
            raise SystemExit(f"error: {err}")
    return path


if __name__ == "__main__":
    main()
