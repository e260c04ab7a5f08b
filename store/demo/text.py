"""The prose of the demo session directory: conversation scripts about three small projects.

Pure data, used only by :mod:`store.demo.build`. Every script is one conversation turn: the user's request, the
assistant's private reasoning, the tool calls it made with their results, and its closing answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ATLAS = "/home/demo/src/atlas"
HARBOR = "/home/demo/src/harbor-api"
NOTES = "/home/demo/notes"


@dataclass(frozen=True)
class Call:
    """One tool call and its result. ``say`` is the assistant's text before the call."""

    tool: str
    args: dict[str, object]
    result: str
    error: bool = False
    say: str = ""
    parallel: bool = False  # issued in the same assistant message as the previous call


@dataclass(frozen=True)
class Script:
    """One conversation turn."""

    title: str
    user: str
    think: str
    calls: tuple[Call, ...]
    answer: str
    followups: tuple[str, ...] = field(default_factory=tuple)  # keys of FOLLOWUPS that fit after this turn


def read(path: str, text: str, **kw: object) -> Call:
    return Call("read_file", {"path": path}, text, **kw)  # type: ignore[arg-type]


def sh(command: str, text: str, **kw: object) -> Call:
    return Call("bash", {"command": command, "timeout": 120}, text, **kw)  # type: ignore[arg-type]


def edit(path: str, old: str, new: str, text: str = "", **kw: object) -> Call:
    added = new.count("\n") + 1
    removed = old.count("\n") + 1
    result = text or f"Applied 1 edit to {path} (+{added} -{removed})."
    return Call("edit", {"path": path, "old_string": old, "new_string": new}, result, **kw)  # type: ignore[arg-type]


def grep(pattern: str, path: str, text: str, **kw: object) -> Call:
    return Call("grep", {"pattern": pattern, "path": path}, text, **kw)  # type: ignore[arg-type]


def write(path: str, content: str, **kw: object) -> Call:
    lines = content.count("\n") + 1
    return Call("write_file", {"path": path, "content": content}, f"Wrote {path} ({lines} lines).", **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# atlas: a Python package that renders vector map tiles, with an on-disk tile cache and a tile server
# --------------------------------------------------------------------------------------------------

ATLAS_SCRIPTS: tuple[Script, ...] = (
    Script(
        title="Fix flaky LRU eviction test in tile cache",
        user=(
            "tests/test_cache.py::test_evicts_least_recently_used fails maybe one run in five on CI but never "
            "on my laptop. Can you figure out what's going on?"
        ),
        think=(
            "A least-recently-used test that only flakes on CI smells like timestamp resolution: if the cache "
            "orders entries by file mtime and two writes land in the same clock tick, the eviction order is "
            "arbitrary. CI runners use overlayfs, which may have coarser mtimes. Check how TileCache picks the "
            "victim before touching the test."
        ),
        calls=(
            read("atlas/cache.py", (
                "class TileCache:\n"
                "    \"\"\"Disk cache of rendered tiles, bounded by max_bytes.\"\"\"\n\n"
                "    def __init__(self, root: Path, max_bytes: int = 512 * 1024 * 1024) -> None:\n"
                "        self.root = root\n"
                "        self.max_bytes = max_bytes\n\n"
                "    def get(self, key: TileKey) -> bytes | None:\n"
                "        path = self._path(key)\n"
                "        if not path.exists():\n"
                "            return None\n"
                "        path.touch()  # mark as recently used\n"
                "        return path.read_bytes()\n\n"
                "    def _evict(self) -> None:\n"
                "        files = sorted(self.root.rglob(\"*.mvt\"), key=lambda p: p.stat().st_mtime)\n"
                "        total = sum(p.stat().st_size for p in files)\n"
                "        while files and total > self.max_bytes:\n"
                "            victim = files.pop(0)\n"
                "            total -= victim.stat().st_size\n"
                "            victim.unlink()\n"
            ), say="Let me look at how the cache decides what to evict."),
            read("tests/test_cache.py", (
                "def test_evicts_least_recently_used(tmp_path):\n"
                "    cache = TileCache(tmp_path, max_bytes=2 * TILE_SIZE)\n"
                "    cache.put(TileKey(3, 1, 1), b\"a\" * TILE_SIZE)\n"
                "    cache.put(TileKey(3, 1, 2), b\"b\" * TILE_SIZE)\n"
                "    cache.get(TileKey(3, 1, 1))\n"
                "    cache.put(TileKey(3, 1, 3), b\"c\" * TILE_SIZE)\n"
                "    assert cache.get(TileKey(3, 1, 2)) is None\n"
                "    assert cache.get(TileKey(3, 1, 1)) is not None\n"
            ), parallel=True),
            sh("for i in $(seq 40); do python -m pytest tests/test_cache.py -q -k evicts_least || break; done", (
                "1 passed in 0.04s\n1 passed in 0.04s\n1 passed in 0.03s\n1 passed in 0.04s\n"
                "F                                                                        [100%]\n"
                "=================================== FAILURES ===================================\n"
                "_______________________ test_evicts_least_recently_used _______________________\n"
                ">       assert cache.get(TileKey(3, 1, 2)) is None\n"
                "E       AssertionError: assert b'bbbbbbbb...' is None\n"
                "tests/test_cache.py:41: AssertionError\n"
                "1 failed in 0.05s\n[exit status 1]"
            ), error=True, say="The ordering depends on st_mtime. I'll try to reproduce by running the test in a loop."),
            edit("atlas/cache.py",
                 "        files = sorted(self.root.rglob(\"*.mvt\"), key=lambda p: p.stat().st_mtime)",
                 "        # st_mtime is too coarse on some filesystems (overlayfs, ext4 with relatime):\n"
                 "        # two writes in the same tick compare equal. Use the access counter instead.\n"
                 "        files = sorted(self.root.rglob(\"*.mvt\"), key=lambda p: self._clock.get(p, 0))",
                 say="Reproduced on the fifth run. I'll order eviction by a monotonic access counter instead of mtime."),
            edit("atlas/cache.py",
                 "        path.touch()  # mark as recently used",
                 "        self._tick += 1\n        self._clock[path] = self._tick"),
            sh("for i in $(seq 200); do python -m pytest tests/test_cache.py -q -k evicts_least || break; done | sort | uniq -c",
               "    200 1 passed in 0.03s"),
        ),
        answer=(
            "Found it. `TileCache._evict` sorted files by `st_mtime`, and `get()` marked a tile as used with "
            "`path.touch()`. When two puts land in the same filesystem tick (likely on CI's overlayfs), their "
            "mtimes compare equal and `sorted` keeps directory order, so the wrong tile can be evicted.\n\n"
            "I replaced the mtime ordering with an in-process access counter (`self._clock`), bumped on every "
            "`get` and `put`. The test passed 200 runs in a row locally.\n\n"
            "One caveat: the counter is per process, so after a restart every cached tile starts at 0 and the "
            "first eviction is in directory order. That matches what the old code did in practice; if you want "
            "it durable we could persist the counter in an index file."
        ),
        followups=("py_test", "py_lint", "py_commit"),
    ),
    Script(
        title="Add --bbox option to atlas render",
        user="Add a `--bbox minlon,minlat,maxlon,maxlat` option to `atlas render` so I can render only part of the world.",
        think=(
            "The CLI is click-based. `render` currently loops over every tile of each zoom level. I need a "
            "parser for the bbox string, validation (min < max, lat within ±85.0511), and a function that turns "
            "a bbox into the tile range per zoom. projection.py already has lonlat_to_tile."
        ),
        calls=(
            read("atlas/cli.py", (
                "@main.command()\n"
                "@click.option(\"--minzoom\", type=int, default=0)\n"
                "@click.option(\"--maxzoom\", type=int, default=14)\n"
                "@click.argument(\"source\", type=click.Path(exists=True, path_type=Path))\n"
                "def render(source: Path, minzoom: int, maxzoom: int) -> None:\n"
                "    layer = load_layer(source)\n"
                "    for z in range(minzoom, maxzoom + 1):\n"
                "        for x, y in all_tiles(z):\n"
                "            write_tile(layer, TileKey(z, x, y))\n"
            )),
            grep("def lonlat_to_tile", "atlas/", "atlas/projection.py:18:def lonlat_to_tile(lon: float, lat: float, zoom: int) -> tuple[int, int]:", parallel=True),
            edit("atlas/cli.py",
                 "@click.argument(\"source\", type=click.Path(exists=True, path_type=Path))\n"
                 "def render(source: Path, minzoom: int, maxzoom: int) -> None:",
                 "@click.option(\"--bbox\", callback=parse_bbox, default=None,\n"
                 "              help=\"minlon,minlat,maxlon,maxlat in WGS84 degrees\")\n"
                 "@click.argument(\"source\", type=click.Path(exists=True, path_type=Path))\n"
                 "def render(source: Path, minzoom: int, maxzoom: int, bbox: BBox | None) -> None:",
                 say="Adding the option with a click callback that validates it."),
            edit("atlas/cli.py",
                 "        for x, y in all_tiles(z):",
                 "        tiles = tiles_in_bbox(bbox, z) if bbox else all_tiles(z)\n        for x, y in tiles:"),
            sh("python -m pytest tests/test_cli.py -q", (
                "....F\n"
                "FAILED tests/test_cli.py::test_bbox_rejects_inverted - AssertionError: assert 0 == 2\n"
                "1 failed, 4 passed in 0.61s\n[exit status 1]"
            ), error=True),
            edit("atlas/cli.py",
                 "    return BBox(*values)",
                 "    box = BBox(*values)\n"
                 "    if box.minlon >= box.maxlon or box.minlat >= box.maxlat:\n"
                 "        raise click.BadParameter(\"min must be smaller than max\", param_hint=\"--bbox\")\n"
                 "    return box",
                 say="The callback accepted an inverted box. Adding the ordering check."),
            sh("python -m pytest tests/test_cli.py -q && atlas render --bbox 5.9,45.8,10.5,47.8 --maxzoom 6 data/ch.geojson",
               "5 passed in 0.58s\nrendered 37 tiles (z0-z6) in 1.8s -> ./tiles"),
        ),
        answer=(
            "`atlas render` now takes `--bbox minlon,minlat,maxlon,maxlat`.\n\n"
            "- `parse_bbox` validates four floats, checks min < max, and clamps latitude to ±85.0511 (the "
            "Web Mercator limit).\n"
            "- `tiles_in_bbox(bbox, z)` converts the corners with `lonlat_to_tile` and yields the x/y range.\n"
            "- Without `--bbox` the behaviour is unchanged.\n\n"
            "Rendering Switzerland up to z6 produced 37 tiles instead of 5,461. Note that a box crossing the "
            "antimeridian (minlon > maxlon) is rejected for now; say if you need that case."
        ),
        followups=("py_test", "py_docs"),
    ),
    Script(
        title="Tiles at the antimeridian render empty",
        user="Tiles around Fiji (lon 178 to -178) come out empty at z8 and above. Pretty sure it's the projection code.",
        think=(
            "Features crossing the antimeridian usually get coordinates like 179.9 followed by -179.9. If the "
            "clipper clips in projected space without unwrapping longitudes, a polygon spanning the line becomes "
            "a sliver the width of the world that gets dropped. Check clip_to_tile and how geometries are "
            "projected."
        ),
        calls=(
            grep("def clip_to_tile|def project_geometry", "atlas/", (
                "atlas/tiles.py:52:def clip_to_tile(geom: BaseGeometry, key: TileKey, buffer: int = 64) -> BaseGeometry:\n"
                "atlas/projection.py:41:def project_geometry(geom: BaseGeometry) -> BaseGeometry:"
            )),
            read("atlas/projection.py", (
                "def project_geometry(geom: BaseGeometry) -> BaseGeometry:\n"
                "    \"\"\"WGS84 lon/lat to Web Mercator metres.\"\"\"\n"
                "    return transform(_to_mercator, geom)\n\n"
                "def _to_mercator(lon, lat):\n"
                "    x = np.radians(lon) * EARTH_RADIUS\n"
                "    y = np.log(np.tan(np.pi / 4 + np.radians(lat) / 2)) * EARTH_RADIUS\n"
                "    return x, y\n"
            )),
            sh("python -c \"from atlas.debug import tile_stats; print(tile_stats('data/fiji.geojson', 8, 255, 141))\"",
               "TileStats(features_in=14, features_out=0, dropped_degenerate=14, bbox_width_m=40075016.7)"),
            edit("atlas/projection.py",
                 "    return transform(_to_mercator, geom)",
                 "    if crosses_antimeridian(geom):\n"
                 "        # Split at 180 so each half projects to a compact shape; otherwise the\n"
                 "        # polygon spans the whole world and clip_to_tile drops it as degenerate.\n"
                 "        geom = split_antimeridian(geom)\n"
                 "    return transform(_to_mercator, geom)",
                 say="Every feature is dropped as degenerate and the bbox is the width of the world. Splitting geometries at ±180 before projecting."),
            sh("python -m pytest tests/test_projection.py -q", "12 passed in 0.22s"),
            sh("python -c \"from atlas.debug import tile_stats; print(tile_stats('data/fiji.geojson', 8, 255, 141))\"",
               "TileStats(features_in=14, features_out=14, dropped_degenerate=0, bbox_width_m=156543.0)", parallel=True),
        ),
        answer=(
            "You were right, it was projection. Polygons crossing the antimeridian (178° to -178°) were projected "
            "as-is, so their projected bounding box spanned the whole world (40,075 km wide). `clip_to_tile` then "
            "treated the result as degenerate and dropped all 14 features in tile 8/255/141.\n\n"
            "`project_geometry` now splits such geometries at ±180° first (`split_antimeridian`, using shapely's "
            "`split` with the meridian line and shifting the western half by 360°). The Fiji tile now keeps all "
            "14 features. I added a regression test with a square from 179° to -179°."
        ),
        followups=("py_test", "py_commit"),
    ),
    Script(
        title="Speed up GeoJSON loading",
        user="Loading data/osm-roads.geojson (1.2 GB) takes over four minutes. Where is the time going?",
        think=(
            "Profile before guessing. py-spy in record mode with the speedscope output would be ideal, but a "
            "quick top will do. Likely candidates: json.load of the entire file into memory, and shapely's "
            "shape() per feature."
        ),
        calls=(
            sh("py-spy top --duration 20 -- python -m atlas.cli stats data/osm-roads.geojson", (
                "Total Samples 2000\n"
                "  %Own   %Total  OwnTime  TotalTime  Function (filename)\n"
                " 61.00%  61.00%   12.20s    12.20s   raw_decode (json/decoder.py)\n"
                " 17.50%  22.00%    3.50s     4.40s   shape (shapely/geometry/geo.py)\n"
                "  9.00%   9.00%    1.80s     1.80s   _read_features (atlas/io/geojson.py)\n"
            )),
            read("atlas/io/geojson.py", (
                "def load_features(path: Path) -> list[Feature]:\n"
                "    with path.open() as fh:\n"
                "        doc = json.load(fh)\n"
                "    return [Feature(shape(f[\"geometry\"]), f.get(\"properties\") or {}) for f in doc[\"features\"]]\n"
            )),
            edit("atlas/io/geojson.py",
                 "    with path.open() as fh:\n        doc = json.load(fh)\n"
                 "    return [Feature(shape(f[\"geometry\"]), f.get(\"properties\") or {}) for f in doc[\"features\"]]",
                 "    with path.open(\"rb\") as fh:\n"
                 "        for raw in ijson.items(fh, \"features.item\", use_float=True):\n"
                 "            yield Feature(shapely.from_geojson(orjson.dumps(raw[\"geometry\"])), raw.get(\"properties\") or {})",
                 say="61% of the time is the stdlib JSON decoder on one huge document. I'll stream features with ijson (yajl2_c backend) and build geometries in bulk."),
            sh("time python -m atlas.cli stats data/osm-roads.geojson", (
                "features: 2,184,303  vertices: 41,992,117\n\n"
                "real\t1m12.4s\nuser\t1m9.8s\nsys\t0m2.1s"
            )),
        ),
        answer=(
            "Most of the four minutes was `json.load` decoding the whole 1.2 GB document at once (61% of "
            "samples), then `shape()` per feature (22%).\n\n"
            "`load_features` is now a generator that streams `features.item` with ijson's C backend and builds "
            "geometries through `shapely.from_geojson`. Loading the roads file went from 4m05s to 1m12s, and peak "
            "memory dropped from 9.1 GB to about 600 MB because features are no longer all in memory.\n\n"
            "Callers that indexed the result (`features[0]`) would break; I checked and only `atlas stats` and "
            "`atlas render` use it, both iterate. ijson is a new dependency (added to pyproject.toml)."
        ),
        followups=("py_test", "py_commit"),
    ),
    Script(
        title="Upgrade to shapely 2",
        user="Let's move to shapely 2.0. Right now the test run prints about 300 ShapelyDeprecationWarnings.",
        think=(
            "Main shapely 2 breaking changes: geometries are immutable, no more array interface, multi-part "
            "geometries are not iterable (use .geoms), and `cascaded_union` is gone. Grep for those patterns."
        ),
        calls=(
            grep(r"cascaded_union|\.coords\[:\] =|for \w+ in (multi|geom)\b|asShape", "atlas/", (
                "atlas/tiles.py:88:    merged = cascaded_union(parts)\n"
                "atlas/tiles.py:131:    for part in geom:\n"
                "atlas/simplify.py:22:    for poly in multi:\n"
                "atlas/io/geojson.py:9:from shapely.geometry import asShape"
            )),
            edit("atlas/tiles.py", "    merged = cascaded_union(parts)", "    merged = unary_union(parts)",
                 say="Four call sites. Fixing them one by one."),
            edit("atlas/tiles.py", "    for part in geom:", "    for part in getattr(geom, \"geoms\", [geom]):", parallel=True),
            edit("atlas/simplify.py", "    for poly in multi:", "    for poly in multi.geoms:", parallel=True),
            sh("pip install -q 'shapely>=2.0,<3' && python -m pytest -q -W error::DeprecationWarning", (
                "ImportError while loading conftest '/home/demo/src/atlas/tests/conftest.py'.\n"
                "atlas/io/geojson.py:9: in <module>\n"
                "    from shapely.geometry import asShape\n"
                "E   ImportError: cannot import name 'asShape' from 'shapely.geometry'\n[exit status 4]"
            ), error=True),
            edit("atlas/io/geojson.py", "from shapely.geometry import asShape", "from shapely.geometry import shape"),
            sh("python -m pytest -q -W error::DeprecationWarning", "148 passed in 6.31s"),
        ),
        answer=(
            "Upgraded to shapely 2.0.6; the suite passes with deprecation warnings turned into errors "
            "(148 tests, 0 warnings).\n\n"
            "Changes:\n"
            "- `cascaded_union` → `unary_union` (tiles.py)\n"
            "- iterating multi-part geometries now goes through `.geoms` (tiles.py, simplify.py)\n"
            "- `asShape` → `shape` in the GeoJSON reader\n\n"
            "Nothing relied on mutable geometries. I pinned `shapely>=2.0,<3` in pyproject.toml."
        ),
        followups=("py_lint", "py_commit"),
    ),
    Script(
        title="Document tile cache settings in README",
        user="The README doesn't say anything about the cache. Write a short section: where tiles go, size limit, how to clear it.",
        think="Read the config loading so the docs match the real environment variables and defaults.",
        calls=(
            grep("ATLAS_CACHE", "atlas/", (
                "atlas/config.py:14:    cache_dir: Path = Path(os.environ.get(\"ATLAS_CACHE_DIR\", \"~/.cache/atlas/tiles\")).expanduser()\n"
                "atlas/config.py:15:    cache_max_mb: int = int(os.environ.get(\"ATLAS_CACHE_MAX_MB\", \"512\"))"
            )),
            read("README.md", "# atlas\n\nRender vector map tiles (MVT) from GeoJSON and PostGIS.\n\n## Install\n\n    pip install -e .\n\n## Usage\n\n    atlas render data/world.geojson --maxzoom 8\n    atlas serve --port 8080\n"),
            edit("README.md", "    atlas serve --port 8080\n",
                 "    atlas serve --port 8080\n\n"
                 "## Tile cache\n\n"
                 "Rendered tiles are cached on disk so `atlas serve` answers repeat requests without re-rendering.\n\n"
                 "| setting | default | meaning |\n| --- | --- | --- |\n"
                 "| `ATLAS_CACHE_DIR` | `~/.cache/atlas/tiles` | where tiles are stored, one `.mvt` file per tile |\n"
                 "| `ATLAS_CACHE_MAX_MB` | `512` | least recently used tiles are removed above this size |\n\n"
                 "Clear it with `atlas cache clear`, or delete the folder while the server is stopped.\n"),
        ),
        answer=(
            "Added a \"Tile cache\" section to README.md with the two environment variables (`ATLAS_CACHE_DIR`, "
            "default `~/.cache/atlas/tiles`; `ATLAS_CACHE_MAX_MB`, default 512), the eviction rule, and how to "
            "clear it with `atlas cache clear`."
        ),
        followups=("py_docs",),
    ),
    Script(
        title="Fix mypy errors after typing refactor",
        user="mypy --strict went from 0 to 23 errors after yesterday's TileKey refactor. Can you clean that up?",
        think="Run mypy first and group the errors; 23 errors after one refactor usually have two or three root causes.",
        calls=(
            sh("mypy --strict atlas/ | tail -n 8", (
                "atlas/server.py:47: error: Argument 1 to \"get\" of \"TileCache\" has incompatible type \"tuple[int, int, int]\"; expected \"TileKey\"  [arg-type]\n"
                "atlas/server.py:52: error: Argument 1 to \"put\" of \"TileCache\" has incompatible type \"tuple[int, int, int]\"; expected \"TileKey\"  [arg-type]\n"
                "atlas/tiles.py:23: error: Returning Any from function declared to return \"TileKey\"  [no-any-return]\n"
                "atlas/cli.py:71: error: Missing type parameters for generic type \"Iterator\"  [type-arg]\n"
                "Found 23 errors in 5 files (checked 19 source files)\n[exit status 1]"
            ), error=True),
            read("atlas/tiles.py", (
                "class TileKey(NamedTuple):\n    z: int\n    x: int\n    y: int\n\n"
                "    @classmethod\n    def parse(cls, text: str) -> \"TileKey\":\n"
                "        return cls._make(map(int, text.split(\"/\")))\n"
            )),
            edit("atlas/server.py", "    tile = cache.get((z, x, y))", "    tile = cache.get(TileKey(z, x, y))",
                 say="Most errors are call sites still passing plain tuples; the rest are missing type parameters."),
            edit("atlas/tiles.py", "        return cls._make(map(int, text.split(\"/\")))",
                 "        z, x, y = (int(part) for part in text.split(\"/\"))\n        return cls(z, x, y)"),
            sh("mypy --strict atlas/", "Success: no issues found in 19 source files"),
        ),
        answer=(
            "mypy --strict is clean again. The 23 errors had three causes:\n\n"
            "1. 17 call sites in server.py and cli.py still passed `(z, x, y)` tuples where `TileKey` is expected.\n"
            "2. `TileKey.parse` used `_make(map(...))`, which mypy types as `Any`; it now unpacks explicitly (and "
            "raises `ValueError` on a wrong number of parts instead of building a broken key).\n"
            "3. Five bare `Iterator`/`dict` annotations got their type parameters."
        ),
        followups=("py_test", "py_commit"),
    ),
    Script(
        title="Slim down the tile server Docker image",
        user="The atlas-server image is 1.4 GB. Can we get it under 300 MB?",
        think=(
            "Likely a full python image plus build tools for GEOS. shapely 2 ships manylinux wheels with GEOS "
            "bundled, so a multi-stage build on python:3.12-slim should work without compilers."
        ),
        calls=(
            read("Dockerfile", "FROM python:3.12\nRUN apt-get update && apt-get install -y libgeos-dev build-essential\nCOPY . /app\nWORKDIR /app\nRUN pip install -e .\nCMD [\"atlas\", \"serve\", \"--port\", \"8080\"]\n"),
            write("Dockerfile", (
                "FROM python:3.12-slim AS build\nWORKDIR /src\nCOPY pyproject.toml README.md ./\nCOPY atlas ./atlas\n"
                "RUN pip wheel --no-cache-dir --wheel-dir /wheels .\n\n"
                "FROM python:3.12-slim\nRUN useradd --create-home atlas\nCOPY --from=build /wheels /wheels\n"
                "RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels\nUSER atlas\nEXPOSE 8080\n"
                "CMD [\"atlas\", \"serve\", \"--host\", \"0.0.0.0\", \"--port\", \"8080\"]\n"
            ), say="Rewriting as a two-stage build on the slim image, installing from wheels."),
            sh("docker build -q -t atlas-server:slim . && docker image ls atlas-server --format '{{.Tag}} {{.Size}}'",
               "sha256:9f1c2e07d4a1\nslim 231MB\nlatest 1.41GB"),
            sh("docker run --rm -d -p 8080:8080 --name atlas-smoke atlas-server:slim && sleep 2 && curl -s -o /dev/null -w '%{http_code}\\n' localhost:8080/tiles/0/0/0.mvt && docker stop atlas-smoke",
               "4c1d8e2f0b7a\n200\natlas-smoke", parallel=False),
        ),
        answer=(
            "The image is now 231 MB (from 1.41 GB):\n\n"
            "- two stages on `python:3.12-slim`; the first builds wheels, the second only installs them\n"
            "- no `build-essential`/`libgeos-dev`: shapely 2 wheels bundle GEOS\n"
            "- runs as an unprivileged `atlas` user and binds 0.0.0.0 so the port mapping works\n\n"
            "A smoke test served `/tiles/0/0/0.mvt` with HTTP 200."
        ),
        followups=("py_commit",),
    ),
    Script(
        title="Tile server memory keeps growing",
        user="atlas serve grows by ~200 MB an hour under the load test and never gives it back. Can you find the leak?",
        think=(
            "Use tracemalloc snapshots a few minutes apart under load and compare by traceback. Candidates: an "
            "unbounded lru_cache on a method (holds self and every argument), or the per-request layer cache."
        ),
        calls=(
            sh("python scripts/memprofile.py --requests 20000 --top 5", (
                "after 20000 requests, top growth by line:\n"
                "atlas/server.py:88: size=412 MiB (+398 MiB), count=19874 (+19861)\n"
                "atlas/render.py:31: size=22.1 MiB (+0.4 MiB), count=811 (+9)\n"
                "shapely/io.py:270: size=3.2 MiB (+0.1 MiB), count=102 (+2)"
            )),
            read("atlas/server.py", (
                "class TileApp:\n"
                "    @functools.lru_cache(maxsize=None)\n"
                "    def render_cached(self, z: int, x: int, y: int, fmt: str) -> bytes:\n"
                "        return render_tile(self.layer, TileKey(z, x, y), fmt)\n"
            )),
            edit("atlas/server.py",
                 "    @functools.lru_cache(maxsize=None)\n    def render_cached(self, z: int, x: int, y: int, fmt: str) -> bytes:\n"
                 "        return render_tile(self.layer, TileKey(z, x, y), fmt)",
                 "    def render_cached(self, z: int, x: int, y: int, fmt: str) -> bytes:\n"
                 "        key = TileKey(z, x, y)\n"
                 "        if (hit := self.cache.get(key)) is not None:\n"
                 "            return hit\n"
                 "        tile = render_tile(self.layer, key, fmt)\n"
                 "        self.cache.put(key, tile)\n"
                 "        return tile",
                 say="An unbounded lru_cache on a method: it keeps every rendered tile (and self) forever. Routing it through the bounded disk cache instead."),
            sh("python scripts/memprofile.py --requests 20000 --top 3", (
                "after 20000 requests, top growth by line:\n"
                "atlas/render.py:31: size=22.3 MiB (+0.5 MiB), count=815 (+11)\n"
                "atlas/cache.py:61: size=1.1 MiB (+0.2 MiB), count=64 (+3)\n"
                "shapely/io.py:270: size=3.2 MiB (+0.1 MiB), count=102 (+2)"
            )),
        ),
        answer=(
            "The leak was `@functools.lru_cache(maxsize=None)` on `TileApp.render_cached`: every distinct "
            "(z, x, y, fmt) kept its rendered tile in memory forever, about 20 KB each. 20,000 requests grew it "
            "by 398 MiB.\n\n"
            "`render_cached` now goes through the bounded `TileCache` on disk. After the same 20,000 requests the "
            "largest growth is 0.5 MiB. If you want a small in-memory layer on top, `lru_cache(maxsize=2048)` on a "
            "module-level function (not a method) would be safe."
        ),
        followups=("py_test", "py_commit"),
    ),
    Script(
        title="Property tests for quadkey encoding",
        user="Can you add hypothesis tests for quadkey encode/decode? I don't trust the z=0 and max zoom cases.",
        think="Round-trip property over z in 0..23 and x, y in range(2**z); plus explicit examples from the Bing Maps docs.",
        calls=(
            read("atlas/tiles.py", (
                "def to_quadkey(key: TileKey) -> str:\n"
                "    digits = []\n"
                "    for i in range(key.z, 0, -1):\n"
                "        mask = 1 << (i - 1)\n"
                "        digits.append(str((1 if key.x & mask else 0) + (2 if key.y & mask else 0)))\n"
                "    return \"\".join(digits)\n\n"
                "def from_quadkey(qk: str) -> TileKey:\n"
                "    x = y = 0\n"
                "    for i, ch in enumerate(reversed(qk)):\n"
                "        ..."
            )),
            write("tests/test_quadkey.py", (
                "from hypothesis import given, strategies as st\n\nfrom atlas.tiles import TileKey, from_quadkey, to_quadkey\n\n\n"
                "@st.composite\ndef tile_keys(draw):\n    z = draw(st.integers(0, 23))\n"
                "    return TileKey(z, draw(st.integers(0, 2**z - 1)), draw(st.integers(0, 2**z - 1)))\n\n\n"
                "@given(tile_keys())\ndef test_round_trip(key):\n    assert from_quadkey(to_quadkey(key)) == key\n\n\n"
                "def test_known_values():\n    assert to_quadkey(TileKey(3, 3, 5)) == \"213\"\n    assert to_quadkey(TileKey(0, 0, 0)) == \"\"\n"
            )),
            sh("python -m pytest tests/test_quadkey.py -q", (
                "F.\n"
                "Falsifying example: test_round_trip(key=TileKey(z=0, x=0, y=0))\n"
                "E   ValueError: empty quadkey\n"
                "1 failed, 1 passed in 0.94s\n[exit status 1]"
            ), error=True),
            edit("atlas/tiles.py", "    if not qk:\n        raise ValueError(\"empty quadkey\")\n", "",
                 say="Your suspicion was right: the empty quadkey (z=0) is rejected on decode. It is valid: it names the root tile."),
            sh("python -m pytest tests/test_quadkey.py -q", "2 passed in 1.12s"),
        ),
        answer=(
            "Added tests/test_quadkey.py with a hypothesis round-trip property over z = 0..23 and a couple of "
            "known values from the Bing Maps tile system docs.\n\n"
            "It found a real bug straight away: `from_quadkey(\"\")` raised `ValueError`, but the empty quadkey is "
            "the root tile 0/0/0. I removed that guard; both tests pass. Max zoom 23 round-trips fine."
        ),
        followups=("py_commit",),
    ),
    Script(
        title="CI fails on Python 3.12: distutils import",
        user="The 3.12 job in CI fails at import time. Log says ModuleNotFoundError: No module named 'distutils'.",
        think="distutils was removed in 3.12. Find who imports it: our code, or an old pinned dependency.",
        calls=(
            grep("distutils", ".", (
                "atlas/config.py:3:from distutils.util import strtobool\n"
                "requirements-dev.txt:7:nose==1.3.7"
            )),
            edit("atlas/config.py", "from distutils.util import strtobool\n", "",
                 say="Our own import, used for one boolean env var. Replacing it with a small helper."),
            edit("atlas/config.py", "    debug: bool = bool(strtobool(os.environ.get(\"ATLAS_DEBUG\", \"0\")))",
                 "    debug: bool = os.environ.get(\"ATLAS_DEBUG\", \"0\").strip().lower() in {\"1\", \"true\", \"yes\", \"on\"}"),
            sh("uv run --python 3.12 -m pytest -q 2>&1 | tail -n 3", "148 passed in 7.02s"),
        ),
        answer=(
            "The only `distutils` user was `atlas/config.py`, which imported `strtobool` for `ATLAS_DEBUG`. I "
            "replaced it with an explicit set of true values. The suite passes on 3.12.\n\n"
            "`nose` in requirements-dev.txt is also dead on 3.12 but nothing runs it; I left it for you to decide."
        ),
        followups=("py_commit",),
    ),
    Script(
        title="Rename zoom_level to zoom everywhere",
        user="Rename `zoom_level` to `zoom` across the codebase, including the CLI flag (keep --zoom-level as a hidden alias).",
        think="grep first to see the blast radius; watch for the serialized config key which would need a migration.",
        calls=(
            grep(r"zoom_level|zoom-level", ".", (
                "atlas/cli.py:22:@click.option(\"--zoom-level\", \"zoom_level\", type=int)\n"
                "atlas/render.py:14:def render_layer(layer, zoom_level: int):\n"
                "atlas/render.py:19:    scale = 2 ** zoom_level\n"
                "atlas/config.py:31:    default_zoom_level: int = 10\n"
                "tests/test_render.py:8:    render_layer(layer, zoom_level=3)\n"
                "docs/config.md:12:| `default_zoom_level` | 10 | |"
            )),
            sh("sed -i 's/\\bzoom_level\\b/zoom/g; s/default_zoom_level/default_zoom/g' atlas/render.py atlas/config.py tests/test_render.py docs/config.md && git diff --stat",
               " atlas/config.py       | 2 +-\n atlas/render.py       | 4 ++--\n docs/config.md        | 2 +-\n tests/test_render.py  | 2 +-\n 4 files changed, 5 insertions(+), 5 deletions(-)"),
            edit("atlas/cli.py", "@click.option(\"--zoom-level\", \"zoom_level\", type=int)",
                 "@click.option(\"--zoom\", \"--zoom-level\", \"zoom\", type=int, help=\"zoom level (--zoom-level is deprecated)\")"),
            sh("python -m pytest -q", "148 passed in 6.40s"),
        ),
        answer=(
            "Renamed across 5 files. `--zoom` is the flag now and `--zoom-level` still works as an alias. The "
            "config key became `default_zoom`; since config files on disk may still say `default_zoom_level`, "
            "`load_config` now accepts the old key and logs a deprecation warning. Tests pass."
        ),
        followups=("py_commit",),
    ),
)

# --------------------------------------------------------------------------------------------------
# harbor-api: a Go HTTP API for berth bookings at a container port
# --------------------------------------------------------------------------------------------------

HARBOR_SCRIPTS: tuple[Script, ...] = (
    Script(
        title="Cursor pagination for GET /v1/bookings",
        user="GET /v1/bookings returns every booking in one response. Add cursor pagination (limit + opaque cursor), default 50, max 200.",
        think=(
            "Keyset pagination on (eta, id) so pages are stable while rows are inserted. The cursor can be "
            "base64url of \"<eta RFC3339>|<id>\". The handler parses limit/cursor, the store takes an After "
            "position, and the response gets a next_cursor."
        ),
        calls=(
            read("internal/booking/handler.go", (
                "func (h *Handler) List(w http.ResponseWriter, r *http.Request) {\n"
                "\tbookings, err := h.store.ListBookings(r.Context())\n"
                "\tif err != nil {\n\t\th.fail(w, r, err)\n\t\treturn\n\t}\n"
                "\twriteJSON(w, http.StatusOK, map[string]any{\"bookings\": bookings})\n}\n"
            )),
            read("internal/booking/store.go", (
                "func (s *Store) ListBookings(ctx context.Context) ([]Booking, error) {\n"
                "\trows, err := s.pool.Query(ctx, `SELECT id, vessel_id, berth_id, eta, etd, status FROM bookings ORDER BY eta`)\n"
                "\tif err != nil {\n\t\treturn nil, fmt.Errorf(\"list bookings: %w\", err)\n\t}\n"
                "\treturn pgx.CollectRows(rows, pgx.RowToStructByName[Booking])\n}\n"
            ), parallel=True),
            edit("internal/booking/store.go",
                 "func (s *Store) ListBookings(ctx context.Context) ([]Booking, error) {\n"
                 "\trows, err := s.pool.Query(ctx, `SELECT id, vessel_id, berth_id, eta, etd, status FROM bookings ORDER BY eta`)",
                 "func (s *Store) ListBookings(ctx context.Context, after *Cursor, limit int) ([]Booking, error) {\n"
                 "\tq := `SELECT id, vessel_id, berth_id, eta, etd, status FROM bookings\n"
                 "\t      WHERE ($1::timestamptz IS NULL OR (eta, id) > ($1, $2))\n"
                 "\t      ORDER BY eta, id LIMIT $3`\n"
                 "\trows, err := s.pool.Query(ctx, q, after.ETA(), after.ID(), limit)",
                 say="Keyset pagination on (eta, id) so inserts between pages don't shift results."),
            edit("internal/booking/handler.go",
                 "\tbookings, err := h.store.ListBookings(r.Context())",
                 "\tpage, err := parsePage(r.URL.Query(), 50, 200)\n"
                 "\tif err != nil {\n\t\twriteError(w, http.StatusBadRequest, \"invalid_cursor\", err.Error())\n\t\treturn\n\t}\n"
                 "\tbookings, err := h.store.ListBookings(r.Context(), page.After, page.Limit+1)"),
            sh("go test ./internal/booking/...", (
                "--- FAIL: TestList_Pagination (0.02s)\n"
                "    handler_test.go:141: page 2 starts with booking 51, want 52 (duplicate across pages)\n"
                "FAIL\nFAIL\texample.com/harbor-api/internal/booking\t0.318s\n[exit status 1]"
            ), error=True),
            edit("internal/booking/handler.go",
                 "\t\tnext = encodeCursor(bookings[len(bookings)-1])",
                 "\t\tbookings = bookings[:page.Limit]\n\t\tnext = encodeCursor(bookings[len(bookings)-1])",
                 say="I fetch limit+1 rows to know whether there is a next page, but encoded the cursor from the extra row. Trimming before encoding."),
            sh("go test ./internal/booking/... && go vet ./...", "ok  \texample.com/harbor-api/internal/booking\t0.297s"),
        ),
        answer=(
            "GET /v1/bookings is paginated:\n\n"
            "- `?limit=` (default 50, max 200) and `?cursor=` (opaque base64url of `eta|id`)\n"
            "- keyset query on `(eta, id)`, so a booking inserted between requests never shifts a page\n"
            "- response: `{\"bookings\": [...], \"next_cursor\": \"...\"}`; `next_cursor` is omitted on the last page\n"
            "- a malformed cursor returns 400 `invalid_cursor`\n\n"
            "The first test run caught an off-by-one (the cursor was encoded from the look-ahead row, so one "
            "booking appeared on two pages). You will want the composite index `bookings (eta, id)`; I can add "
            "the migration next."
        ),
        followups=("go_test", "go_migration", "go_commit"),
    ),
    Script(
        title="Data race in booking confirmation",
        user="`go test -race ./...` reports a data race in booking/service.go since the confirmation worker landed.",
        think="Get the race report; the two stacks will name the shared variable.",
        calls=(
            sh("go test -race ./internal/booking/ -run TestConfirm -count=5", (
                "==================\nWARNING: DATA RACE\n"
                "Write at 0x00c0001a2f30 by goroutine 23:\n"
                "  example.com/harbor-api/internal/booking.(*Service).confirmLoop()\n"
                "      /home/demo/src/harbor-api/internal/booking/service.go:118 +0x1c4\n"
                "Previous read at 0x00c0001a2f30 by goroutine 21:\n"
                "  example.com/harbor-api/internal/booking.(*Service).Pending()\n"
                "      /home/demo/src/harbor-api/internal/booking/service.go:74 +0x64\n"
                "==================\n--- FAIL: TestConfirm_Concurrent (0.11s)\n    testing.go:1398: race detected during execution of test\n"
                "FAIL\n[exit status 1]"
            ), error=True),
            read("internal/booking/service.go", (
                "type Service struct {\n\tstore   *Store\n\tpending map[int64]Booking\n}\n\n"
                "func (s *Service) Pending() int { return len(s.pending) }\n\n"
                "func (s *Service) confirmLoop(ctx context.Context) {\n"
                "\tfor id, b := range s.pending {\n"
                "\t\tif err := s.store.Confirm(ctx, id); err == nil {\n"
                "\t\t\tdelete(s.pending, id) // line 118\n"
                "\t\t}\n\t\t_ = b\n\t}\n}\n"
            )),
            edit("internal/booking/service.go",
                 "type Service struct {\n\tstore   *Store\n\tpending map[int64]Booking\n}",
                 "type Service struct {\n\tstore   *Store\n\tmu      sync.Mutex\n\tpending map[int64]Booking\n}",
                 say="`pending` is shared between the HTTP handlers and the worker without a lock."),
            edit("internal/booking/service.go",
                 "func (s *Service) Pending() int { return len(s.pending) }",
                 "func (s *Service) Pending() int {\n\ts.mu.Lock()\n\tdefer s.mu.Unlock()\n\treturn len(s.pending)\n}"),
            edit("internal/booking/service.go",
                 "\tfor id, b := range s.pending {",
                 "\ts.mu.Lock()\n\tbatch := maps.Clone(s.pending)\n\ts.mu.Unlock()\n\tfor id, b := range batch {"),
            sh("go test -race ./internal/booking/ -count=20", "ok  \texample.com/harbor-api/internal/booking\t4.812s"),
        ),
        answer=(
            "The race: `Service.pending` (a map) was read by `Pending()` from HTTP handlers and modified by "
            "`confirmLoop` in the worker goroutine, with no synchronisation.\n\n"
            "Fixed with a `sync.Mutex`. The worker now clones the map under the lock, confirms outside it (so a "
            "slow database call doesn't block handlers), and deletes confirmed ids under the lock again. "
            "`go test -race -count=20` is clean."
        ),
        followups=("go_test", "go_commit"),
    ),
    Script(
        title="Migration for berth_windows table",
        user="We need a berth_windows table: berth_id, opens_at, closes_at, reason (maintenance/tide/customs). Write the migration with an exclusion constraint so windows of one berth can't overlap.",
        think=(
            "Postgres exclusion constraint with tstzrange and btree_gist for the equality on berth_id. Migrations "
            "are goose-style SQL files under migrations/, numbered. Check the latest number."
        ),
        calls=(
            sh("ls migrations | tail -n 3", "0021_add_vessel_imo.sql\n0022_bookings_eta_index.sql\n0023_invoice_currency.sql"),
            write("migrations/0024_berth_windows.sql", (
                "-- +goose Up\nCREATE EXTENSION IF NOT EXISTS btree_gist;\n\n"
                "CREATE TYPE berth_window_reason AS ENUM ('maintenance', 'tide', 'customs');\n\n"
                "CREATE TABLE berth_windows (\n"
                "    id         BIGSERIAL PRIMARY KEY,\n"
                "    berth_id   BIGINT NOT NULL REFERENCES berths(id) ON DELETE CASCADE,\n"
                "    opens_at   TIMESTAMPTZ NOT NULL,\n"
                "    closes_at  TIMESTAMPTZ NOT NULL,\n"
                "    reason     berth_window_reason NOT NULL,\n"
                "    CHECK (closes_at > opens_at),\n"
                "    EXCLUDE USING gist (berth_id WITH =, tstzrange(opens_at, closes_at) WITH &&)\n"
                ");\n\n-- +goose Down\nDROP TABLE berth_windows;\nDROP TYPE berth_window_reason;\n"
            )),
            sh("make migrate-test", (
                "goose: migrating db environment 'test'\n"
                "2026/10/21 14:02:11 OK   0024_berth_windows.sql (41.3ms)\n"
                "2026/10/21 14:02:11 goose: successfully migrated database to version: 24\n"
                "insert overlapping window: ERROR: conflicting key value violates exclusion constraint \"berth_windows_berth_id_tstzrange_excl\" (SQLSTATE 23P01)  -- expected\n"
                "goose down: OK 0024_berth_windows.sql"
            )),
        ),
        answer=(
            "Added migrations/0024_berth_windows.sql:\n\n"
            "- enum `berth_window_reason` ('maintenance', 'tide', 'customs')\n"
            "- `berth_windows` with a CHECK that `closes_at > opens_at`\n"
            "- an exclusion constraint on `(berth_id WITH =, tstzrange(opens_at, closes_at) WITH &&)`, which "
            "needs the `btree_gist` extension (created if missing)\n\n"
            "`make migrate-test` applied it, the overlap check rejected an overlapping window with SQLSTATE "
            "23P01, and the down migration reverted cleanly. Ranges are half-open, so a window closing at 10:00 "
            "and the next opening at 10:00 are allowed."
        ),
        followups=("go_test", "go_commit"),
    ),
    Script(
        title="Rate limiter returns 500 instead of 429",
        user="When a client hits the rate limit they get a 500 with an empty body. It should be 429 with Retry-After.",
        think="The middleware probably returns an error that the generic error handler maps to 500. Look at middleware/ratelimit.go.",
        calls=(
            read("internal/middleware/ratelimit.go", (
                "func RateLimit(l *rate.Limiter) func(http.Handler) http.Handler {\n"
                "\treturn func(next http.Handler) http.Handler {\n"
                "\t\treturn http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {\n"
                "\t\t\tif !l.Allow() {\n"
                "\t\t\t\tpanic(ErrRateLimited)\n"
                "\t\t\t}\n"
                "\t\t\tnext.ServeHTTP(w, r)\n\t\t})\n\t}\n}\n"
            )),
            edit("internal/middleware/ratelimit.go",
                 "\t\t\tif !l.Allow() {\n\t\t\t\tpanic(ErrRateLimited)\n\t\t\t}",
                 "\t\t\tres := l.Reserve()\n"
                 "\t\t\tif delay := res.Delay(); delay > 0 {\n"
                 "\t\t\t\tres.Cancel()\n"
                 "\t\t\t\tw.Header().Set(\"Retry-After\", strconv.Itoa(int(math.Ceil(delay.Seconds()))))\n"
                 "\t\t\t\twriteError(w, http.StatusTooManyRequests, \"rate_limited\", \"too many requests\")\n"
                 "\t\t\t\treturn\n"
                 "\t\t\t}",
                 say="It panics, and the recovery middleware turns every panic into a bare 500."),
            sh("go test ./internal/middleware/ -run RateLimit -v", (
                "=== RUN   TestRateLimit_Returns429\n--- PASS: TestRateLimit_Returns429 (0.00s)\n"
                "=== RUN   TestRateLimit_RetryAfter\n--- PASS: TestRateLimit_RetryAfter (0.00s)\n"
                "PASS\nok  \texample.com/harbor-api/internal/middleware\t0.014s"
            )),
        ),
        answer=(
            "The limiter `panic`ked with `ErrRateLimited` and the recover middleware mapped every panic to an "
            "empty 500. It now reserves a token, and when the reservation would have to wait it cancels it, sets "
            "`Retry-After` (seconds, rounded up) and writes a 429 with the usual JSON error body "
            "(`code: rate_limited`). Tests for the status and header pass."
        ),
        followups=("go_test", "go_commit"),
    ),
    Script(
        title="Slow query on vessel arrivals report",
        user="The daily arrivals report takes 9 seconds. Can you look at the query plan?",
        think="EXPLAIN ANALYZE against the staging snapshot. Likely a missing index on bookings(eta) combined with a date cast that prevents using it.",
        calls=(
            grep("func (s *Store) DailyArrivals", "internal/", "internal/report/store.go:27:func (s *Store) DailyArrivals(ctx context.Context, day time.Time) ([]Arrival, error) {"),
            read("internal/report/store.go", (
                "\tconst q = `SELECT v.name, v.imo, b.eta, b.berth_id\n"
                "\t           FROM bookings b JOIN vessels v ON v.id = b.vessel_id\n"
                "\t           WHERE date(b.eta AT TIME ZONE 'UTC') = $1\n"
                "\t           ORDER BY b.eta`\n"
            )),
            sh("psql \"$STAGING_RO_URL\" -c \"EXPLAIN (ANALYZE, BUFFERS) SELECT v.name FROM bookings b JOIN vessels v ON v.id = b.vessel_id WHERE date(b.eta AT TIME ZONE 'UTC') = '2026-10-20'\"", (
                " Hash Join  (cost=1894.22..215603.11 rows=4127 width=32) (actual time=8731.402..8911.877 rows=61 loops=1)\n"
                "   ->  Seq Scan on bookings b  (cost=0.00..213512.40 rows=4127 width=24) (actual time=8730.118..8910.301 rows=61 loops=1)\n"
                "         Filter: (date(timezone('UTC'::text, eta)) = '2026-10-20'::date)\n"
                "         Rows Removed by Filter: 825339\n"
                " Planning Time: 0.412 ms\n Execution Time: 8912.105 ms"
            )),
            edit("internal/report/store.go",
                 "\t           WHERE date(b.eta AT TIME ZONE 'UTC') = $1",
                 "\t           WHERE b.eta >= $1 AND b.eta < $1 + interval '1 day'",
                 say="The date() cast makes the predicate non-sargable, so the eta index from migration 0022 is never used. Rewriting it as a half-open range."),
            sh("psql \"$STAGING_RO_URL\" -c \"EXPLAIN (ANALYZE) SELECT v.name FROM bookings b JOIN vessels v ON v.id = b.vessel_id WHERE b.eta >= '2026-10-20T00:00:00Z' AND b.eta < '2026-10-21T00:00:00Z'\"", (
                " Nested Loop  (cost=0.85..512.40 rows=58 width=32) (actual time=0.061..0.402 rows=61 loops=1)\n"
                "   ->  Index Scan using bookings_eta_idx on bookings b  (actual time=0.041..0.117 rows=61 loops=1)\n"
                " Planning Time: 0.388 ms\n Execution Time: 0.451 ms"
            )),
        ),
        answer=(
            "The report filtered with `date(b.eta AT TIME ZONE 'UTC') = $1`. Wrapping the column in a function "
            "means Postgres can't use `bookings_eta_idx`, so it scanned 825k rows (8.9 s).\n\n"
            "I rewrote the predicate as a half-open range on the raw column (`eta >= $1 AND eta < $1 + 1 day`), "
            "passing the day as a UTC midnight `time.Time`. Same 61 rows, 0.45 ms. No new index needed."
        ),
        followups=("go_test", "go_commit"),
    ),
    Script(
        title="OpenAPI spec for booking endpoints",
        user="Generate an OpenAPI 3.1 description for the /v1/bookings endpoints from the handlers. Put it in api/openapi.yaml.",
        think="Read the routes and request/response structs, then write the YAML by hand; no generator in this repo.",
        calls=(
            grep("r\\.(Get|Post|Patch|Delete)\\(\"/v1/bookings", "internal/", (
                "internal/http/routes.go:31:\tr.Get(\"/v1/bookings\", bookings.List)\n"
                "internal/http/routes.go:32:\tr.Post(\"/v1/bookings\", bookings.Create)\n"
                "internal/http/routes.go:33:\tr.Get(\"/v1/bookings/{id}\", bookings.Get)\n"
                "internal/http/routes.go:34:\tr.Patch(\"/v1/bookings/{id}\", bookings.Update)\n"
                "internal/http/routes.go:35:\tr.Post(\"/v1/bookings/{id}/confirm\", bookings.Confirm)"
            )),
            read("internal/booking/model.go", (
                "type Booking struct {\n\tID       int64     `json:\"id\"`\n\tVesselID int64     `json:\"vessel_id\"`\n"
                "\tBerthID  int64     `json:\"berth_id\"`\n\tETA      time.Time `json:\"eta\"`\n\tETD      time.Time `json:\"etd\"`\n"
                "\tStatus   Status    `json:\"status\"` // requested | confirmed | cancelled\n}\n"
            ), parallel=True),
            write("api/openapi.yaml", (
                "openapi: 3.1.0\ninfo:\n  title: Harbor API\n  version: 1.4.0\npaths:\n  /v1/bookings:\n    get:\n"
                "      summary: List bookings, oldest ETA first\n      parameters:\n"
                "        - {name: limit, in: query, schema: {type: integer, minimum: 1, maximum: 200, default: 50}}\n"
                "        - {name: cursor, in: query, schema: {type: string}}\n"
                "      responses:\n        \"200\": {description: A page of bookings}\n"
                "    post:\n      summary: Request a berth booking\n"
                "  /v1/bookings/{id}/confirm:\n    post:\n      summary: Confirm a requested booking\n"
            )),
            sh("npx --yes @redocly/cli lint api/openapi.yaml", (
                "validating api/openapi.yaml...\n"
                "[1] api/openapi.yaml:19:5 at #/paths/~1v1~1bookings/post/responses\n"
                "Operation must have at least one `2XX` response.\n"
                "❌ Validation failed with 1 error.\n[exit status 1]"
            ), error=True),
            edit("api/openapi.yaml", "      summary: Request a berth booking\n",
                 "      summary: Request a berth booking\n      responses:\n        \"201\": {description: Booking created}\n        \"409\": {description: Berth already booked in that window}\n"),
            sh("npx --yes @redocly/cli lint api/openapi.yaml", "validating api/openapi.yaml...\nWoohoo! Your API description is valid. 🎉"),
        ),
        answer=(
            "Wrote api/openapi.yaml (OpenAPI 3.1) covering the five booking routes, the `Booking` schema (status "
            "enum requested/confirmed/cancelled), the pagination parameters and the JSON error body. Redocly's "
            "linter passes after I added the missing 201/409 responses to POST /v1/bookings."
        ),
        followups=("go_commit",),
    ),
    Script(
        title="Upgrade to Go 1.23 and fix lint findings",
        user="Bump the module to Go 1.23 and get golangci-lint green again.",
        think="Update go.mod and the CI image, then run the linter and fix findings grouped by linter.",
        calls=(
            sh("go mod edit -go=1.23 -toolchain=go1.23.4 && go mod tidy && golangci-lint run ./... | tail -n 6", (
                "internal/webhook/dispatcher.go:88:2: ineffectual assignment to err (ineffassign)\n"
                "internal/db/pool.go:41:15: Error return value of `pool.Ping` is not checked (errcheck)\n"
                "internal/booking/handler.go:203:6: copyloopvar: The copy of the 'for' variable \"b\" can be deleted (Go 1.22+) (copyloopvar)\n"
                "internal/berth/scheduler.go:57:6: copyloopvar: The copy of the 'for' variable \"w\" can be deleted (Go 1.22+) (copyloopvar)\n"
                "4 issues.\n[exit status 1]"
            ), error=True),
            edit("internal/db/pool.go", "\tpool.Ping(ctx)", "\tif err := pool.Ping(ctx); err != nil {\n\t\treturn nil, fmt.Errorf(\"ping database: %w\", err)\n\t}"),
            edit("internal/booking/handler.go", "\t\tb := b\n", "", parallel=True),
            edit("internal/berth/scheduler.go", "\t\tw := w\n", "", parallel=True),
            read("internal/webhook/dispatcher.go", "\terr = d.sign(req)\n\terr = d.client.Do(req)\n"),
            edit("internal/webhook/dispatcher.go", "\terr = d.sign(req)\n", "\tif err := d.sign(req); err != nil {\n\t\treturn fmt.Errorf(\"sign webhook: %w\", err)\n\t}\n",
                 say="This one is a real bug: a signing error was silently overwritten."),
            sh("golangci-lint run ./... && go test ./...", "ok  \texample.com/harbor-api/internal/booking\t0.301s\nok  \texample.com/harbor-api/internal/webhook\t0.122s\nok  \texample.com/harbor-api/internal/db\t0.087s"),
        ),
        answer=(
            "go.mod now says `go 1.23` with toolchain go1.23.4, and golangci-lint is clean.\n\n"
            "Of the four findings two were cosmetic (loop-variable copies that Go 1.22+ no longer needs). Two "
            "were real: `pool.Ping` errors were ignored at start-up, and in the webhook dispatcher a signing "
            "error was overwritten by the next assignment, so an unsigned webhook could have been sent. Both "
            "now return wrapped errors. Remember to bump the CI image to golang:1.23 too."
        ),
        followups=("go_test", "go_commit"),
    ),
    Script(
        title="Arrival times stored in server local time",
        user="Bookings created from the Rotterdam office show ETAs one hour off. I think we store local time somewhere.",
        think="Look for time.Parse without a zone or time.Now() formatting. Go's time.Parse with a layout without zone returns UTC, but ParseInLocation with time.Local would be wrong.",
        calls=(
            grep("time.Local|ParseInLocation|Format\\(\"2006-01-02 15:04", "internal/", (
                "internal/booking/validate.go:33:\teta, err := time.ParseInLocation(\"2006-01-02T15:04\", req.ETA, time.Local)\n"
                "internal/booking/validate.go:38:\tetd, err := time.ParseInLocation(\"2006-01-02T15:04\", req.ETD, time.Local)"
            )),
            edit("internal/booking/validate.go",
                 "\teta, err := time.ParseInLocation(\"2006-01-02T15:04\", req.ETA, time.Local)",
                 "\teta, err := time.Parse(time.RFC3339, req.ETA)",
                 say="The request layout has no zone and is interpreted in the server's zone. The API should require RFC 3339 with an offset."),
            edit("internal/booking/validate.go",
                 "\tetd, err := time.ParseInLocation(\"2006-01-02T15:04\", req.ETD, time.Local)",
                 "\tetd, err := time.Parse(time.RFC3339, req.ETD)", parallel=True),
            sh("go test ./internal/booking/ -run Validate", "ok  \texample.com/harbor-api/internal/booking\t0.044s"),
        ),
        answer=(
            "Found it: `validate.go` parsed `eta`/`etd` with `time.ParseInLocation(..., time.Local)` and a layout "
            "without an offset. The servers run in Europe/Amsterdam, so a client sending UTC got shifted by one "
            "hour (two in summer).\n\n"
            "The API now requires RFC 3339 with an explicit offset (`2026-10-22T06:30:00Z` or `+02:00`); anything "
            "else is a 400 `invalid_time`. Existing rows are probably off too: rows created since the office "
            "started using the API (about 2,100) would need `eta - interval '1 hour'`. I haven't touched the data."
        ),
        followups=("go_migration", "go_commit"),
    ),
    Script(
        title="Structured logging with slog",
        user="Replace our log.Printf calls with log/slog, JSON output in production, text locally. Include request_id on every request log.",
        think="Count call sites first. Add a logger in main, a middleware that stores a request-scoped logger in context, and convert call sites.",
        calls=(
            sh("grep -rn 'log.Printf\\|log.Println' --include=*.go . | wc -l", "57"),
            write("internal/logging/logging.go", (
                "package logging\n\nimport (\n\t\"context\"\n\t\"log/slog\"\n\t\"os\"\n)\n\n"
                "func New(format string, level slog.Level) *slog.Logger {\n"
                "\topts := &slog.HandlerOptions{Level: level}\n"
                "\tif format == \"json\" {\n\t\treturn slog.New(slog.NewJSONHandler(os.Stdout, opts))\n\t}\n"
                "\treturn slog.New(slog.NewTextHandler(os.Stderr, opts))\n}\n\n"
                "type ctxKey struct{}\n\nfunc With(ctx context.Context, l *slog.Logger) context.Context { return context.WithValue(ctx, ctxKey{}, l) }\n\n"
                "func From(ctx context.Context) *slog.Logger {\n\tif l, ok := ctx.Value(ctxKey{}).(*slog.Logger); ok {\n\t\treturn l\n\t}\n\treturn slog.Default()\n}\n"
            )),
            sh("gofmt -l . && go build ./... && go test ./... 2>&1 | tail -n 4", (
                "ok  \texample.com/harbor-api/internal/booking\t0.288s\n"
                "ok  \texample.com/harbor-api/internal/logging\t0.009s\n"
                "ok  \texample.com/harbor-api/internal/middleware\t0.015s\n"
                "ok  \texample.com/harbor-api/internal/webhook\t0.117s"
            ), say="Converted the 57 call sites to logging.From(ctx) with key/value attributes. Building and testing."),
        ),
        answer=(
            "All 57 `log.Printf`/`log.Println` calls now use `log/slog`:\n\n"
            "- `internal/logging`: `New(format, level)` (JSON to stdout when `LOG_FORMAT=json`, text to stderr "
            "otherwise) plus `With`/`From` to carry a logger in the context\n"
            "- the request-id middleware stores `logger.With(\"request_id\", id)` in the request context, so every "
            "log line of a request carries it\n"
            "- messages became constant strings with attributes (`\"booking confirmed\", \"booking_id\", id`), "
            "which makes them searchable in Loki"
        ),
        followups=("go_test", "go_commit"),
    ),
    Script(
        title="Verify webhook signatures",
        user="Partners asked how to verify our webhook signatures. Can you check what we actually send and write a verification example in Go?",
        think="Read the signer: header name, algorithm, what is signed (timestamp + body?), and whether there's replay protection.",
        calls=(
            read("internal/webhook/signer.go", (
                "// Sign sets Harbor-Signature: t=<unix>,v1=<hex hmac-sha256(secret, t + \".\" + body)>\n"
                "func (s Signer) Sign(req *http.Request, body []byte, now time.Time) {\n"
                "\tts := strconv.FormatInt(now.Unix(), 10)\n"
                "\tmac := hmac.New(sha256.New, s.secret)\n"
                "\tmac.Write([]byte(ts + \".\"))\n\tmac.Write(body)\n"
                "\treq.Header.Set(\"Harbor-Signature\", \"t=\"+ts+\",v1=\"+hex.EncodeToString(mac.Sum(nil)))\n}\n"
            )),
            write("docs/webhooks/verify.go", (
                "// Verify checks a Harbor-Signature header. Reject requests older than five minutes.\n"
                "func Verify(secret, body []byte, header string, now time.Time) error {\n"
                "\tparts := map[string]string{}\n"
                "\tfor _, kv := range strings.Split(header, \",\") {\n"
                "\t\tk, v, _ := strings.Cut(kv, \"=\")\n\t\tparts[k] = v\n\t}\n"
                "\tts, err := strconv.ParseInt(parts[\"t\"], 10, 64)\n"
                "\tif err != nil || now.Sub(time.Unix(ts, 0)).Abs() > 5*time.Minute {\n\t\treturn errors.New(\"stale or missing timestamp\")\n\t}\n"
                "\tmac := hmac.New(sha256.New, secret)\n\tmac.Write([]byte(parts[\"t\"] + \".\"))\n\tmac.Write(body)\n"
                "\twant, _ := hex.DecodeString(parts[\"v1\"])\n"
                "\tif !hmac.Equal(mac.Sum(nil), want) {\n\t\treturn errors.New(\"signature mismatch\")\n\t}\n\treturn nil\n}\n"
            )),
            sh("go test ./docs/webhooks/", "ok  \texample.com/harbor-api/docs/webhooks\t0.006s"),
        ),
        answer=(
            "We send `Harbor-Signature: t=<unix seconds>,v1=<hex>` where `v1` is HMAC-SHA256 over "
            "`<t>.<raw body>` with the partner's webhook secret.\n\n"
            "I wrote docs/webhooks/verify.go as a copy-paste example: it parses the header, rejects timestamps "
            "more than five minutes off (replay protection), recomputes the MAC over the raw body and compares "
            "with `hmac.Equal` (constant time). There's a test with a known vector. Partners must verify the raw "
            "bytes before any JSON parsing, which I called out in the comment."
        ),
        followups=("go_commit",),
    ),
    Script(
        title="docker-compose healthcheck never turns healthy",
        user="`docker compose up` leaves the api container 'starting' forever and the worker never starts because it depends on it being healthy.",
        think="Check the healthcheck command: the distroless image has no curl or wget, so a curl-based healthcheck always fails.",
        calls=(
            read("docker-compose.yml", (
                "  api:\n    build: .\n    healthcheck:\n      test: [\"CMD\", \"curl\", \"-f\", \"http://localhost:8080/healthz\"]\n"
                "      interval: 5s\n      retries: 10\n  worker:\n    depends_on:\n      api:\n        condition: service_healthy\n"
            )),
            sh("docker compose exec api /bin/sh -c 'command -v curl'", "OCI runtime exec failed: exec failed: unable to start container process: exec: \"/bin/sh\": stat /bin/sh: no such file or directory\n[exit status 126]", error=True),
            edit("docker-compose.yml", "      test: [\"CMD\", \"curl\", \"-f\", \"http://localhost:8080/healthz\"]",
                 "      test: [\"CMD\", \"/harbor-api\", \"healthcheck\", \"--url\", \"http://localhost:8080/healthz\"]",
                 say="The image is distroless: no shell, no curl. I'll add a `healthcheck` subcommand to the binary and use that."),
            sh("docker compose up -d --build && sleep 12 && docker compose ps --format '{{.Service}} {{.Status}}'",
               "api Up 11 seconds (healthy)\nworker Up 4 seconds\npostgres Up 12 seconds (healthy)"),
        ),
        answer=(
            "The api image is distroless, so the healthcheck's `curl` didn't exist and the check failed forever. "
            "I added `harbor-api healthcheck --url ...` (a tiny HTTP GET with a 2 s timeout, exit 0 on 2xx) and "
            "pointed the compose healthcheck at it. The api turns healthy after ~10 s and the worker starts."
        ),
        followups=("go_commit",),
    ),
)

# --------------------------------------------------------------------------------------------------
# notes: a folder of markdown notes
# --------------------------------------------------------------------------------------------------

NOTES_SCRIPTS: tuple[Script, ...] = (
    Script(
        title="Weekly summary of meeting notes",
        user="Summarise this week's meeting notes (meetings/2026-W45-*.md) into one page: decisions, open questions, owners.",
        think="List the files, read them, and extract decisions/actions. Keep owners as the role names used in the notes.",
        calls=(
            sh("ls meetings/2026-W45-*", "meetings/2026-W45-mon-standup.md\nmeetings/2026-W45-tue-harbor-planning.md\nmeetings/2026-W45-thu-atlas-review.md"),
            read("meetings/2026-W45-tue-harbor-planning.md", (
                "# Harbor planning, Tue\n\n- berth windows: schema agreed (exclusion constraint), ship in 1.5\n"
                "- pagination: cursor, not offset. Mobile team OK with it.\n- ? who owns the partner webhook docs\n"
                "- TODO(api team): remove v0 endpoints after 2026-12-01\n"
            )),
            read("meetings/2026-W45-thu-atlas-review.md", (
                "# Atlas review, Thu\n\n- shapely 2 upgrade merged, no regressions on the benchmark set\n"
                "- antimeridian bug: fixed, needs a release\n- ? do we keep the Docker image on Docker Hub or move to GHCR\n"
            ), parallel=True),
            write("summaries/2026-W45.md", (
                "# Week 45 summary\n\n## Decisions\n- Harbor: cursor pagination for list endpoints\n"
                "- Harbor: berth windows use an exclusion constraint; ships in 1.5\n- Atlas: shapely 2 is in\n\n"
                "## Open questions\n- Who owns the partner webhook docs?\n- Docker Hub or GHCR for atlas images?\n\n"
                "## Actions\n- api team: remove v0 endpoints after 2026-12-01\n- atlas: cut a release with the antimeridian fix\n"
            )),
        ),
        answer=(
            "Wrote summaries/2026-W45.md. Highlights:\n\n"
            "**Decisions:** cursor pagination for Harbor list endpoints; berth windows via an exclusion "
            "constraint (ships in 1.5); shapely 2 is merged in Atlas.\n\n"
            "**Open:** who owns the partner webhook docs; Docker Hub vs GHCR for Atlas images.\n\n"
            "**Actions:** api team removes v0 endpoints after 2026-12-01; Atlas needs a release with the "
            "antimeridian fix. The Monday stand-up had nothing beyond status updates."
        ),
        followups=("notes_tidy",),
    ),
    Script(
        title="Outline for berth scheduling design doc",
        user="Help me outline a design doc for automatic berth scheduling in harbor-api v2. I want to present it on Monday.",
        think="A useful outline: problem, goals/non-goals, constraints (tides, windows, crane capacity), approach options (greedy vs. constraint solver), data model changes, rollout. Check existing notes for context first.",
        calls=(
            grep("berth", "projects/harbor/", (
                "projects/harbor/ideas.md:4:- auto-assign berths? today ops do it in a spreadsheet every morning\n"
                "projects/harbor/ideas.md:5:- constraint: draft vs. berth depth at low tide\n"
                "projects/harbor/metrics.md:12:- avg berth idle time 2025: 18%"
            )),
            write("projects/harbor/design-berth-scheduling.md", (
                "# Automatic berth scheduling (draft)\n\n## Problem\nOps assign berths by hand each morning in a spreadsheet; idle time is 18%.\n\n"
                "## Goals\n- propose an assignment for the next 72 h, ops approve or edit\n- respect berth windows, draft at low tide, crane capacity\n\n"
                "## Non-goals\n- fully automatic assignment without review\n- pricing\n\n"
                "## Options\n1. Greedy by ETA with backtracking\n2. CP-SAT model (OR-Tools) solved every 15 min\n\n"
                "## Data model\n- berth_windows (exists in 1.5)\n- assignment_proposals(id, generated_at, solver, score)\n\n"
                "## Rollout\nShadow mode for two weeks: compare proposals with ops' choices.\n"
            )),
        ),
        answer=(
            "Drafted projects/harbor/design-berth-scheduling.md with: problem (manual spreadsheet, 18% idle "
            "time), goals and non-goals (proposals that ops approve; no pricing), hard constraints (berth "
            "windows, draft at low tide, crane capacity), two options (greedy with backtracking vs. a CP-SAT "
            "model re-solved every 15 minutes), data model additions, and a shadow-mode rollout. For Monday I'd "
            "lead with the idle-time number and the shadow-mode plan; that's what ops will care about."
        ),
        followups=("notes_tidy",),
    ),
    Script(
        title="Deduplicate the reading list",
        user="reading-list.md has grown to 300 lines with lots of duplicates. Dedupe it (same URL = same item) and group by topic.",
        think="Duplicates can differ by tracking parameters (utm_*) or trailing slashes; normalise before comparing.",
        calls=(
            sh("grep -oE 'https?://[^ )]+' reading-list.md | wc -l; grep -oE 'https?://[^ )]+' reading-list.md | sed -E 's/[?&]utm_[^&]*//g; s#/$##' | sort -u | wc -l", "212\n164"),
            sh("python3 scripts/dedupe_links.py reading-list.md --group-by-heading-keywords > reading-list.new.md && diff <(wc -l < reading-list.md) <(wc -l < reading-list.new.md)", "1c1\n< 301\n---\n> 196"),
            sh("mv reading-list.new.md reading-list.md && head -n 12 reading-list.md", (
                "# Reading list\n\n## Databases\n- [SQLite WAL mode](https://www.sqlite.org/wal.html)\n"
                "- [Postgres exclusion constraints](https://www.postgresql.org/docs/current/ddl-constraints.html)\n\n"
                "## Maps\n- [Tile system math](https://learn.microsoft.com/bingmaps/articles/bing-maps-tile-system)\n"
            )),
        ),
        answer=(
            "The list had 212 links but only 164 distinct ones once `utm_*` parameters and trailing slashes are "
            "ignored. reading-list.md is now 196 lines, grouped under Databases, Maps, Go, Python, Writing and "
            "Misc; where duplicates had different notes I kept both notes under the one link."
        ),
    ),
    Script(
        title="Release notes for atlas 0.9",
        user="Write release notes for atlas 0.9 from the git log since v0.8.2. Audience: people who use the CLI, not contributors.",
        think="git log --oneline v0.8.2..HEAD in the atlas repo, then group by user-visible effect and drop internal refactors.",
        calls=(
            sh("git -C ~/src/atlas log --oneline v0.8.2..HEAD", (
                "a41c9e2 render: add --bbox option\n7be0d13 projection: split geometries at the antimeridian\n"
                "c09f5aa cache: order eviction by access counter, not mtime\n51e2b8d io: stream GeoJSON with ijson\n"
                "e7d3310 deps: shapely 2\n0f9ac14 typing: TileKey everywhere\n2ad5b71 docker: slim two-stage image\n"
                "93b1c60 cli: rename --zoom-level to --zoom"
            )),
            write("drafts/atlas-0.9-release-notes.md", (
                "# atlas 0.9\n\n## New\n- `atlas render --bbox minlon,minlat,maxlon,maxlat` renders part of the world.\n\n"
                "## Faster\n- Large GeoJSON files load about 3x faster and use a fraction of the memory.\n"
                "- The Docker image is 231 MB instead of 1.4 GB.\n\n## Fixed\n- Tiles crossing the antimeridian (e.g. Fiji) are no longer empty.\n"
                "- The tile cache no longer evicts recently used tiles on some filesystems.\n\n"
                "## Changed\n- `--zoom-level` is now `--zoom` (the old name still works).\n- Requires shapely 2.\n"
            )),
        ),
        answer=(
            "Draft in drafts/atlas-0.9-release-notes.md, grouped as New / Faster / Fixed / Changed. I left out "
            "the TileKey typing commit (no user-visible effect) and phrased the ijson change by its effect (about "
            "3x faster loading, far less memory). The `--zoom` rename is under Changed with a note that the old "
            "flag still works."
        ),
    ),
    Script(
        title="Talk outline: caching map tiles",
        user="I'm giving a 20 minute talk at the local Python meetup about caching map tiles. Help me outline it, with the LRU mtime bug as the war story.",
        think="20 minutes: ~8 slides of content. Hook with the flaky test, then cache design, the bug, the fix, lessons.",
        calls=(
            read("projects/atlas/notes-cache-bug.md", "- flaky on CI only, 1 in 5\n- st_mtime granularity on overlayfs\n- touch() as 'mark used' is a trap\n- fix: access counter\n"),
            write("talks/tile-caching-outline.md", (
                "# Caching map tiles (20 min)\n\n1. A test that fails one time in five (2 min)\n2. What a tile is, why cache (3 min)\n"
                "3. Disk cache design: keys, layout, size bound (4 min)\n4. LRU by mtime: why it looked fine (3 min)\n"
                "5. The bug: clock granularity on overlayfs (3 min)\n6. The fix and how we proved it (2 min)\n7. Lessons: time is not an order (2 min)\n8. Questions (1 min)\n"
            )),
        ),
        answer=(
            "Outline in talks/tile-caching-outline.md: eight sections that fit 20 minutes, opening cold with the "
            "test that fails one run in five, then just enough tile and cache background, then the mtime story "
            "and the fix. The closing lesson, \"a timestamp is not an ordering\", makes a good last slide. A "
            "live demo of `touch` on overlayfs would be fun but risky; a recorded terminal clip is safer."
        ),
    ),
    Script(
        title="Translate the deploy checklist for the Shanghai team",
        user="Translate ops/deploy-checklist.md into Chinese for the Shanghai ops team. Keep commands and file names untranslated.",
        think="Keep code spans and commands verbatim; translate prose. Use common Chinese ops terminology (部署, 回滚, 灰度).",
        calls=(
            read("ops/deploy-checklist.md", (
                "# Deploy checklist\n\n1. Check that CI is green on the release tag.\n2. Run `make migrate-prod` and confirm the migration version.\n"
                "3. Deploy to 10% of instances (canary) and watch error rates for 15 minutes.\n4. Roll out to all instances.\n"
                "5. If error rates rise, roll back with `make rollback VERSION=<previous>`.\n"
            )),
            write("ops/deploy-checklist.zh.md", (
                "# 部署检查清单\n\n1. 确认发布标签上的 CI 全部通过。\n2. 运行 `make migrate-prod`，并确认迁移版本号。\n"
                "3. 先部署到 10% 的实例（灰度发布），观察错误率 15 分钟。\n4. 全量发布到所有实例。\n"
                "5. 如果错误率上升，使用 `make rollback VERSION=<previous>` 回滚。\n"
            )),
        ),
        answer=(
            "Done: ops/deploy-checklist.zh.md. Commands, file names and `VERSION=<previous>` are unchanged. I "
            "used 灰度发布 for \"canary\" and 回滚 for \"roll back\", which is what most Chinese ops teams use. "
            "Worth having someone in Shanghai skim it once."
        ),
    ),
    Script(
        title="Turn scattered TODOs into a checklist",
        user="There are TODO lines all over my notes folder. Collect them into todo.md, grouped by project, with a link back to where each came from.",
        think="grep -rn for TODO in *.md, skip todo.md itself, group by top-level folder.",
        calls=(
            grep("TODO", ".", (
                "projects/harbor/ideas.md:9:TODO: ask ops for last year's berth idle numbers per berth\n"
                "projects/atlas/roadmap.md:14:TODO: decide on GHCR vs Docker Hub\n"
                "meetings/2026-W45-tue-harbor-planning.md:5:- TODO(api team): remove v0 endpoints after 2026-12-01\n"
                "journal/2026-11-02.md:3:TODO renew the domain for the meetup site\n"
                "talks/tile-caching-outline.md:11:TODO record the overlayfs demo"
            )),
            write("todo.md", (
                "# TODO\n\n## harbor\n- [ ] ask ops for last year's berth idle numbers per berth ([ideas](projects/harbor/ideas.md#L9))\n"
                "- [ ] api team: remove v0 endpoints after 2026-12-01 ([W45 planning](meetings/2026-W45-tue-harbor-planning.md#L5))\n\n"
                "## atlas\n- [ ] decide on GHCR vs Docker Hub ([roadmap](projects/atlas/roadmap.md#L14))\n\n"
                "## talks\n- [ ] record the overlayfs demo ([outline](talks/tile-caching-outline.md#L11))\n\n"
                "## personal\n- [ ] renew the domain for the meetup site ([journal](journal/2026-11-02.md#L3))\n"
            )),
        ),
        answer=(
            "Collected 5 TODOs into todo.md under harbor, atlas, talks and personal, each a checkbox with a link "
            "to the file and line it came from. I left the original lines in place; say if you want them "
            "replaced by links to todo.md."
        ),
    ),
    Script(
        title="Weekly retro notes",
        user="Help me write my weekly retro: what went well, what didn't, what I'll change. Use my journal entries from this week.",
        think="Read the week's journal files and pull out themes. Keep it in the user's voice, first person, short.",
        calls=(
            sh("ls journal/2026-11-1*.md", "journal/2026-11-16.md\njournal/2026-11-17.md\njournal/2026-11-18.md\njournal/2026-11-19.md"),
            read("journal/2026-11-18.md", "Long pgx migration day. Got through booking and berth packages. Too many context switches in the afternoon (3 meetings). Compile errors mostly NullString -> pgtype.Text.\n"),
            write("retros/2026-W47.md", (
                "# Retro, week 47\n\n## Went well\n- pgx migration: booking, berth, vessel and invoice packages done\n"
                "- the fork-and-compare approach for pagination settled the debate fast\n\n"
                "## Didn't\n- afternoons fragmented by meetings; deep work only before noon\n\n"
                "## Change\n- block 13:00-16:00 on Tue/Thu for migration work\n"
            )),
        ),
        answer=(
            "Wrote retros/2026-W47.md from your four journal entries. Went well: most of the pgx migration "
            "(booking, berth, vessel, invoice). Didn't: afternoons broken up by meetings. Change: block "
            "13:00-16:00 on Tuesdays and Thursdays for migration work."
        ),
    ),
)

# --------------------------------------------------------------------------------------------------
# follow-up turns: {file} and {test} are filled in from the session's first script
# --------------------------------------------------------------------------------------------------

FOLLOWUPS: dict[str, tuple[Script, ...]] = {
    "py_test": (
        Script("", "Nice. Can you add a regression test for exactly that case?",
               "Add a focused test that fails on the old code and passes now.",
               (read("{test}", "import pytest\n\nfrom atlas.cache import TileCache, TileKey\n\nTILE_SIZE = 1024\n"),
                edit("{test}", "TILE_SIZE = 1024\n", "TILE_SIZE = 1024\n\n\ndef test_regression_same_tick(tmp_path, monkeypatch):\n    ...\n"),
                sh("python -m pytest {test} -q", "7 passed in 0.19s")),
               "Added a regression test to {test}. I checked it against the old code with `git stash`: it fails there and passes now."),
        Script("", "Run the whole suite once more before I push.",
               "Full suite plus the doctests.",
               (sh("python -m pytest -q --doctest-modules atlas tests", "151 passed, 2 skipped in 7.88s"),),
               "Full suite: 151 passed, 2 skipped (the two PostGIS tests skip without `ATLAS_PG_URL`). Good to push."),
    ),
    "py_lint": (
        Script("", "Also run ruff and fix whatever it finds.",
               "ruff check with the repo config, autofix the safe ones, look at the rest.",
               (sh("ruff check atlas tests", "atlas/cache.py:12:1: I001 [*] Import block is un-sorted or un-formatted\natlas/tiles.py:140:89: E501 Line too long (97 > 88)\nFound 2 errors.\n[*] 1 fixable with the `--fix` option.\n[exit status 1]", error=True),
                sh("ruff check --fix atlas tests && ruff format atlas tests", "Found 2 errors (1 fixed, 1 remaining).\n2 files reformatted, 31 files left unchanged"),
                edit("atlas/tiles.py", "    raise ValueError(f\"tile {key} is outside the valid range for zoom {key.z} (0..{2 ** key.z - 1})\")",
                     "    limit = 2**key.z - 1\n    raise ValueError(f\"tile {key} is outside 0..{limit} for zoom {key.z}\")"),
                sh("ruff check atlas tests", "All checks passed!")),
               "ruff is clean: one import block sorted automatically, and I shortened one long error message by hand."),
    ),
    "py_docs": (
        Script("", "Mention it in the CHANGELOG too.",
               "Add an Unreleased entry in Keep a Changelog style.",
               (read("CHANGELOG.md", "# Changelog\n\n## [Unreleased]\n\n## [0.8.2] - 2026-09-30\n### Fixed\n- `atlas serve` honours `--host`\n"),
                edit("CHANGELOG.md", "## [Unreleased]\n", "## [Unreleased]\n### Added\n- {title}\n")),
               "Added an entry under Unreleased in CHANGELOG.md."),
    ),
    "py_commit": (
        Script("", "Commit it with a good message.",
               "Check the diff, then commit with a short subject and a body that says why.",
               (sh("git status --short && git diff --stat", " M {file}\n M {test}\n 2 files changed, 41 insertions(+), 9 deletions(-)"),
                sh("git commit -am \"{commit}\" && git log --oneline -1", "[main {sha}] {commit}\n 2 files changed, 41 insertions(+), 9 deletions(-)\n{sha} {commit}")),
               "Committed as {sha}: \"{commit}\". Not pushed."),
    ),
    "go_test": (
        Script("", "Add a table-driven test for the edge cases.",
               "Table-driven test with the boundary values; use t.Run with descriptive names.",
               (read("{test}", "func TestHandler_List(t *testing.T) {\n\tsrv := newTestServer(t)\n\t...\n}\n"),
                edit("{test}", "func TestHandler_List(t *testing.T) {", "func TestHandler_EdgeCases(t *testing.T) {\n\tcases := []struct {\n\t\tname string\n\t\tquery string\n\t\twant int\n\t}{\n\t\t{\"zero limit\", \"limit=0\", 400},\n\t\t{\"max limit\", \"limit=200\", 200},\n\t\t{\"over max\", \"limit=201\", 400},\n\t}\n\t...\n}\n\nfunc TestHandler_List(t *testing.T) {"),
                sh("go test ./... -run EdgeCases -v 2>&1 | tail -n 6", "--- PASS: TestHandler_EdgeCases (0.03s)\n    --- PASS: TestHandler_EdgeCases/zero_limit (0.01s)\n    --- PASS: TestHandler_EdgeCases/max_limit (0.01s)\n    --- PASS: TestHandler_EdgeCases/over_max (0.00s)\nPASS\nok  \texample.com/harbor-api/internal/booking\t0.212s")),
               "Added `TestHandler_EdgeCases` in {test} with three cases (0, 200 and 201). All pass."),
        Script("", "Run the full test suite with -race once.",
               "go test -race ./... takes ~40 s here.",
               (sh("go test -race ./...", "ok  \texample.com/harbor-api/internal/auth\t1.204s\nok  \texample.com/harbor-api/internal/berth\t2.911s\nok  \texample.com/harbor-api/internal/booking\t4.377s\nok  \texample.com/harbor-api/internal/webhook\t1.018s"),),
               "`go test -race ./...` passes in every package."),
    ),
    "go_migration": (
        Script("", "Add the migration for that too.",
               "Next migration number; must be reversible.",
               (sh("ls migrations | tail -n 1", "0024_berth_windows.sql"),
                write("migrations/0025_{slug}.sql", "-- +goose Up\nCREATE INDEX CONCURRENTLY IF NOT EXISTS bookings_eta_id_idx ON bookings (eta, id);\n\n-- +goose Down\nDROP INDEX IF EXISTS bookings_eta_id_idx;\n"),
                sh("make migrate-test", "OK   0025_{slug}.sql (212.6ms)\ngoose: successfully migrated database to version: 25")),
               "Added migrations/0025_{slug}.sql (reversible) and applied it to the test database. It uses `CREATE INDEX CONCURRENTLY`, so goose must run it outside a transaction; I added the `-- +goose NO TRANSACTION` annotation."),
    ),
    "go_commit": (
        Script("", "Looks good, commit it.",
               "Review the diff stat, commit with a conventional message.",
               (sh("git diff --stat", " {file} | 38 ++++++++++++++++++++++++++----------\n 1 file changed, 27 insertions(+), 11 deletions(-)"),
                sh("git commit -am \"{commit}\"", "[feature/{slug} {sha}] {commit}\n 1 file changed, 27 insertions(+), 11 deletions(-)")),
               "Committed on feature/{slug} as {sha}."),
    ),
    "notes_tidy": (
        Script("", "Thanks. Also link it from index.md.",
               "Add a link under the right heading in index.md.",
               (read("index.md", "# Notes\n\n## Recent\n- [Week 44 summary](summaries/2026-W44.md)\n"),
                edit("index.md", "## Recent\n", "## Recent\n- [{title}]({file})\n")),
               "Linked it at the top of the Recent section in index.md."),
    ),
}

# What the follow-up placeholders become, per first script (by title).
SCRIPT_FILES: dict[str, tuple[str, str, str]] = {
    # title: (file, test file, commit subject)
    "Fix flaky LRU eviction test in tile cache": ("atlas/cache.py", "tests/test_cache.py", "cache: order eviction by access counter, not mtime"),
    "Add --bbox option to atlas render": ("atlas/cli.py", "tests/test_cli.py", "render: add --bbox option"),
    "Tiles at the antimeridian render empty": ("atlas/projection.py", "tests/test_projection.py", "projection: split geometries at the antimeridian"),
    "Speed up GeoJSON loading": ("atlas/io/geojson.py", "tests/test_geojson.py", "io: stream GeoJSON with ijson"),
    "Upgrade to shapely 2": ("atlas/tiles.py", "tests/test_tiles.py", "deps: shapely 2"),
    "Document tile cache settings in README": ("README.md", "tests/test_cache.py", "docs: tile cache settings"),
    "Fix mypy errors after typing refactor": ("atlas/tiles.py", "tests/test_tiles.py", "typing: TileKey everywhere"),
    "Slim down the tile server Docker image": ("Dockerfile", "tests/test_server.py", "docker: slim two-stage image"),
    "Tile server memory keeps growing": ("atlas/server.py", "tests/test_server.py", "server: drop unbounded lru_cache on render_cached"),
    "Property tests for quadkey encoding": ("atlas/tiles.py", "tests/test_quadkey.py", "tiles: accept the empty quadkey (z=0)"),
    "CI fails on Python 3.12: distutils import": ("atlas/config.py", "tests/test_config.py", "config: drop distutils (removed in 3.12)"),
    "Rename zoom_level to zoom everywhere": ("atlas/cli.py", "tests/test_render.py", "cli: rename --zoom-level to --zoom"),
    "Cursor pagination for GET /v1/bookings": ("internal/booking/handler.go", "internal/booking/handler_test.go", "booking: cursor pagination for list"),
    "Data race in booking confirmation": ("internal/booking/service.go", "internal/booking/service_test.go", "booking: guard pending map with a mutex"),
    "Migration for berth_windows table": ("migrations/0024_berth_windows.sql", "internal/berth/store_test.go", "berth: add berth_windows with exclusion constraint"),
    "Rate limiter returns 500 instead of 429": ("internal/middleware/ratelimit.go", "internal/middleware/ratelimit_test.go", "middleware: answer 429 with Retry-After"),
    "Slow query on vessel arrivals report": ("internal/report/store.go", "internal/report/store_test.go", "report: sargable eta range for daily arrivals"),
    "OpenAPI spec for booking endpoints": ("api/openapi.yaml", "internal/booking/handler_test.go", "api: OpenAPI 3.1 for bookings"),
    "Upgrade to Go 1.23 and fix lint findings": ("go.mod", "internal/webhook/dispatcher_test.go", "build: go 1.23, fix lint findings"),
    "Arrival times stored in server local time": ("internal/booking/validate.go", "internal/booking/validate_test.go", "booking: require RFC 3339 times with offset"),
    "Structured logging with slog": ("internal/logging/logging.go", "internal/logging/logging_test.go", "logging: move to log/slog"),
    "Verify webhook signatures": ("docs/webhooks/verify.go", "docs/webhooks/verify_test.go", "docs: webhook signature verification example"),
    "docker-compose healthcheck never turns healthy": ("docker-compose.yml", "cmd/harbor-api/healthcheck_test.go", "compose: healthcheck via the binary"),
    "Weekly summary of meeting notes": ("summaries/2026-W45.md", "", ""),
    "Outline for berth scheduling design doc": ("projects/harbor/design-berth-scheduling.md", "", ""),
}

# Titles the user typed later (session_info source manual), by original title.
RETITLES: dict[str, str] = {
    "Fix flaky LRU eviction test in tile cache": "Tile cache: flaky eviction (mtime granularity)",
    "Cursor pagination for GET /v1/bookings": "Bookings pagination (keyset)",
    "Slow query on vessel arrivals report": "Arrivals report: 9 s -> 0.5 ms",
    "Weekly summary of meeting notes": "W45 summary",
}

# --------------------------------------------------------------------------------------------------
# channel sessions (chat bots bound to WeChat / Feishu conversations)
# --------------------------------------------------------------------------------------------------

CHANNEL_SCRIPTS: dict[str, tuple[Script, ...]] = {
    "wechat-notes": (
        Script("整理本周会议纪要",
               "帮我把这周的会议纪要整理成一页摘要，发到群里。",
               "The user writes in Chinese; answer in Chinese. Read the W45 meeting files and reuse the summary that exists.",
               (read("summaries/2026-W45.md", "# Week 45 summary\n\n## Decisions\n- Harbor: cursor pagination for list endpoints\n- Harbor: berth windows use an exclusion constraint; ships in 1.5\n- Atlas: shapely 2 is in\n"),),
               "本周摘要：\n\n**决定**\n- Harbor：列表接口改用游标分页\n- Harbor：泊位时间窗使用排他约束，随 1.5 版本发布\n- Atlas：已升级到 shapely 2\n\n**待定**\n- 合作方 webhook 文档由谁负责？\n- Atlas 镜像放 Docker Hub 还是 GHCR？"),
        Script("",
               "谢谢！能不能再附上完整的 PDF 版本？",
               "Render the markdown to PDF with pandoc and attach it to the reply.",
               (sh("pandoc summaries/2026-W45.md -o /tmp/2026-W45.pdf --pdf-engine=weasyprint && ls -l /tmp/2026-W45.pdf", "-rw-r--r-- 1 demo demo 48213 Nov  6 17:41 /tmp/2026-W45.pdf"),),
               "已生成 PDF（48 KB），附在这条消息里。"),
        Script("",
               "下周一提醒我跟进 webhook 文档负责人的问题。",
               "Create a one-shot reminder for Monday 09:00 local time.",
               (Call("schedule_reminder", {"at": "2026-11-09T09:00:00+08:00", "text": "跟进：合作方 webhook 文档由谁负责"}, "Reminder created for Mon 2026-11-09 09:00 (+08:00)."),),
               "好的，已设置下周一（11 月 9 日）上午 9 点的提醒：跟进合作方 webhook 文档的负责人。"),
    ),
    "wechat-release": (
        Script("Harbor release checklist status",
               "what's left on the harbor-api 1.5 release checklist?",
               "Read the release checklist in the harbor project notes and list the unchecked items.",
               (read("projects/harbor/release-1.5.md", "# Release 1.5\n\n- [x] berth_windows migration\n- [x] cursor pagination\n- [ ] OpenAPI spec published to partner portal\n- [ ] load test at 2x peak\n- [ ] remove v0 endpoints (after 2026-12-01)\n"),),
               "Three items are still open for 1.5:\n\n1. publish the OpenAPI spec to the partner portal\n2. load test at 2x peak traffic\n3. remove the v0 endpoints (not before 2026-12-01)\n\nThe migration and pagination are done."),
        Script("",
               "把负载测试的结果图发我一下",
               "The load test report has a PNG chart. Send it as an image attachment.",
               (sh("ls -l reports/loadtest-2026-11-12/*.png", "-rw-r--r-- 1 demo demo 183004 Nov 12 16:20 reports/loadtest-2026-11-12/latency-p99.png"),),
               "这是 11 月 12 日负载测试的 p99 延迟图（2 倍峰值下 p99 为 184 ms）。"),
    ),
    "feishu-harbor": (
        Script("Nightly build status",
               "@harbor-bot did last night's build pass?",
               "Check the latest nightly workflow run with the GitHub CLI.",
               (sh("gh run list --workflow nightly.yml --limit 1 --json conclusion,createdAt,displayTitle", "[{\"conclusion\":\"failure\",\"createdAt\":\"2026-11-18T02:00:41Z\",\"displayTitle\":\"nightly\"}]"),
                sh("gh run view --log-failed --workflow nightly.yml | tail -n 5", "integration\tTestBerthWindows_Overlap\t--- FAIL: TestBerthWindows_Overlap (0.41s)\nintegration\tTestBerthWindows_Overlap\t    windows_test.go:77: got SQLSTATE 23505, want 23P01\nintegration\tFAIL\texample.com/harbor-api/internal/berth\t3.204s")),
               "Last night's build **failed**: `TestBerthWindows_Overlap` expected SQLSTATE 23P01 (exclusion violation) but got 23505 (unique violation). The nightly database probably still has the old unique index from before migration 0024. Want me to post the full log here?"),
        Script("",
               "ok, can you post the full log file here so the on-call can look",
               "Upload the full log as a file.",
               (sh("gh run view --log --workflow nightly.yml > /tmp/nightly-2026-11-18.log && wc -c /tmp/nightly-2026-11-18.log", "2291734 /tmp/nightly-2026-11-18.log"),),
               "Uploading the full log (2.2 MB) as `nightly-2026-11-18.log`."),
    ),
    "feishu-ops": (
        Script("Disk usage alert on tile cache host",
               "告警：tile cache 磁盘使用率 91%，需要处理吗？",
               "Check the cache size against ATLAS_CACHE_MAX_MB and see whether eviction is running.",
               (sh("du -sh /var/cache/atlas/tiles && grep ATLAS_CACHE_MAX_MB /etc/atlas/env", "38G\t/var/cache/atlas/tiles\nATLAS_CACHE_MAX_MB=40960"),),
               "缓存目录 38 GB，上限配置为 40 GB，说明淘汰机制正常工作。91% 是因为磁盘本身只有 42 GB。建议把 `ATLAS_CACHE_MAX_MB` 调到 30720，或者扩容磁盘。"),
        Script("",
               "调到 30720 吧，改完告诉我",
               "Edit the env file and restart the service.",
               (sh("sudo sed -i 's/^ATLAS_CACHE_MAX_MB=.*/ATLAS_CACHE_MAX_MB=30720/' /etc/atlas/env && sudo systemctl restart atlas-serve && systemctl is-active atlas-serve", "active"),),
               "已改为 30720（30 GB）并重启服务，状态 active。下一次写入时会淘汰到 30 GB 以下。"),
    ),
}

# --------------------------------------------------------------------------------------------------
# unfinished turns (runs still "running")
# --------------------------------------------------------------------------------------------------

ORPHAN_TURN = Script(
    "", "Clean out dist/ and build, then cut the 0.9.0 release build and upload it to the internal index.",
    "This deletes build output and publishes a package; the upload needs approval in this mode. Ask for it.",
    (sh("rm -rf dist/ build/ && python -m build && twine upload --repository internal dist/*", ""),),
    "",
)

LIVE_TURN = Script(
    "", "Run the full integration suite against the staging database and tell me which tests fail. It takes about 20 minutes.",
    "Long-running; start it and report when done. Use -json output so failures can be summarised.",
    (sh("make integration STAGE=staging GOFLAGS=-json 2>&1 | tee /tmp/integration.json", ""),),
    "",
)

STUCK_TURN = Script(
    "", "Regenerate the vessel fixtures from the staging snapshot (scripts/gen_fixtures.go).",
    "Run the generator; it reads the staging snapshot through the read-only URL.",
    (sh("go run ./scripts/gen_fixtures.go -source \"$STAGING_RO_URL\" -out testdata/vessels", ""),),
    "",
)

# --------------------------------------------------------------------------------------------------
# the long refactoring session: harbor-api from database/sql to pgx v5
# --------------------------------------------------------------------------------------------------

LONG_TITLE = "Migrate harbor-api from database/sql to pgx v5"
LONG_RETITLE = "pgx v5 migration (all packages)"

LONG_PACKAGES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # package, entity, files
    ("booking", "Booking", ("store.go", "service.go", "handler.go", "validate.go", "store_test.go")),
    ("berth", "Berth", ("store.go", "windows.go", "scheduler.go", "store_test.go")),
    ("vessel", "Vessel", ("store.go", "model.go", "handler.go", "store_test.go")),
    ("invoice", "Invoice", ("store.go", "generator.go", "store_test.go")),
    ("webhook", "Delivery", ("outbox.go", "dispatcher.go", "outbox_test.go")),
    ("auth", "Token", ("store.go", "tokens.go", "store_test.go")),
    ("audit", "Event", ("store.go", "log.go")),
    ("report", "Arrival", ("store.go", "daily.go", "store_test.go")),
    ("crane", "Crane", ("store.go", "allocation.go", "store_test.go")),
    ("tide", "TideWindow", ("store.go", "forecast.go")),
    ("customs", "Declaration", ("store.go", "handler.go", "store_test.go")),
    ("partner", "Partner", ("store.go", "keys.go", "store_test.go")),
)

LONG_USER_PROMPTS: dict[str, tuple[str, ...]] = {
    "convert": (
        "Next: internal/{pkg}/{file}. Same pattern as before: pgxpool, pgx.CollectRows, pgtype instead of sql.Null*.",
        "Let's do internal/{pkg}/{file} now.",
        "ok continue with {pkg}/{file}",
        "Go on with internal/{pkg}/{file}. Keep the exported API identical so callers don't change.",
        "{pkg}/{file} next please. Careful, it has the transaction helper.",
        "Convert internal/{pkg}/{file}.",
    ),
    "tests": (
        "Tests in internal/{pkg} are red after the last change, can you look?",
        "go test ./internal/{pkg}/... fails now. Fix it?",
        "CI says {pkg} tests fail. Probably the ErrNoRows thing again.",
    ),
    "grep": (
        "Are there any sql.ErrNoRows comparisons left anywhere?",
        "Check for leftover database/sql imports across the repo.",
        "Find remaining sql.Null* usages.",
    ),
    "question": (
        "Quick question: should the pool size stay at 20 with pgxpool?",
        "What's the difference between pgx.CollectRows and scanning manually, performance-wise?",
        "Do we still need the custom retry on serialization failures with pgx?",
        "Is QueryExecModeCacheStatement safe behind PgBouncer?",
    ),
    "lint": (
        "Run the linter over what we have so far.",
        "golangci-lint please, then fix what it finds.",
    ),
    "commit": (
        "Commit the {pkg} package.",
        "Good, commit this step.",
        "Let's commit {pkg} and move on.",
    ),
}

LONG_ANSWERS: dict[str, tuple[str, ...]] = {
    "convert": (
        "internal/{pkg}/{file} is converted: `*sql.DB` → `*pgxpool.Pool`, `QueryRowContext` → `QueryRow`, rows collected with `pgx.CollectRows(rows, pgx.RowToStructByName[{entity}])`, and nullable columns use `pgtype.Text` / `pgtype.Timestamptz`. Build and tests are green.",
        "Done with {pkg}/{file}. The exported signatures are unchanged; only the internals moved to pgx. `go test ./internal/{pkg}/...` passes.",
        "{file} in {pkg} now uses pgx. One behavioural change: `pgx.ErrNoRows` replaces `sql.ErrNoRows`, and I mapped it to `ErrNotFound` in one place so handlers stay the same.",
        "Converted. The transaction helper now uses `pgx.BeginTxFunc`, which rolls back on error and commits otherwise, so the manual defer/rollback dance is gone. Tests pass.",
    ),
    "tests": (
        "Fixed. The test still compared against `sql.ErrNoRows`; with pgx the store returns `ErrNotFound` (wrapping `pgx.ErrNoRows`). I switched the assertion to `errors.Is(err, ErrNotFound)`.",
        "The failure was the test fixture opening a `*sql.DB`. It now builds a `pgxpool.Pool` from the same DSN via `testdb.Pool(t)`. All {pkg} tests pass.",
    ),
    "grep": (
        "Found the leftovers above and fixed them; nothing matches anymore.",
        "Those were the last ones. The search comes back empty now.",
    ),
    "question": (
        "pgxpool's default `MaxConns` is max(4, NumCPU). Our old pool had 20 and the database allows 100 per service, so I'd set `pool_max_conns=20` in the DSN to keep behaviour identical, and add `pool_max_conn_idle_time=5m`.",
        "`CollectRows` with `RowToStructByName` maps columns by name via reflection once per query; the cost is negligible next to the round trip. Manual scanning is only worth it in the hot loop of the arrivals report, which I kept manual.",
        "Yes: pgx doesn't retry on `40001`. Our `withSerializableRetry` still applies; I ported it to check `pgconn.PgError.Code == \"40001\"`.",
        "No. Behind PgBouncer in transaction mode the statement cache breaks because prepared statements don't survive across server connections. Use `QueryExecModeExec` or `QueryExecModeSimpleProtocol`; I set `default_query_exec_mode=exec` in the DSN.",
    ),
    "lint": (
        "golangci-lint is clean for the converted packages.",
        "Two findings fixed (an unchecked `rows.Close` and a shadowed `err`); the linter passes now.",
    ),
    "commit": (
        "Committed: \"{pkg}: move store to pgx v5\".",
        "Committed the {pkg} step.",
    ),
}

# --------------------------------------------------------------------------------------------------
# knowledge base documents (harbor-api docs)
# --------------------------------------------------------------------------------------------------

KB_DOCS: tuple[tuple[str, str, str], ...] = (
    ("docs/architecture.md", "Harbor API architecture", (
        "# Harbor API architecture\n\n"
        "Harbor API is a Go service that manages berth bookings at a container port. It exposes a JSON HTTP API\n"
        "under /v1 and runs a background worker for confirmations and webhooks.\n\n"
        "## Components\n\n"
        "The booking service validates requests, checks berth availability and stores bookings in PostgreSQL.\n"
        "The berth scheduler proposes berth assignments from berth windows, tide forecasts and crane capacity.\n"
        "The webhook dispatcher reads the webhook outbox table and delivers signed events to partners.\n\n"
        "## Storage\n\n"
        "All state lives in PostgreSQL 16. The service talks to it through pgx v5 with a pgxpool connection pool\n"
        "(pool_max_conns=20, default_query_exec_mode=exec because PgBouncer runs in transaction mode).\n"
        "Migrations are goose SQL files under migrations/.\n"
    )),
    ("docs/booking-lifecycle.md", "Booking lifecycle", (
        "# Booking lifecycle\n\n"
        "A booking moves from requested to confirmed or cancelled. POST /v1/bookings creates a requested booking;\n"
        "the confirmation worker confirms it once the berth window and tide forecast allow the vessel's draft.\n\n"
        "## Idempotency\n\n"
        "Clients send an Idempotency-Key header. A repeated request with the same key returns the original booking;\n"
        "the same key with a different body is rejected with 409 idempotency_conflict.\n\n"
        "## Pagination\n\n"
        "GET /v1/bookings uses keyset pagination on (eta, id). The cursor is opaque base64url; limit defaults to 50\n"
        "and is capped at 200.\n"
    )),
    ("docs/adr/0007-pgx-migration.md", "ADR 0007: move from database/sql to pgx v5", (
        "# ADR 0007: move from database/sql to pgx v5\n\n"
        "Status: accepted (2026-11-16)\n\n"
        "## Context\n\n"
        "database/sql with lib/pq hides PostgreSQL types behind sql.Null* wrappers, and lib/pq is in maintenance mode.\n\n"
        "## Decision\n\n"
        "Every store package moves to pgx v5 and pgxpool. Nullable columns use pgtype. Errors wrap pgx.ErrNoRows\n"
        "into each package's ErrNotFound so handlers do not change.\n\n"
        "## Consequences\n\n"
        "The statement cache must stay off behind PgBouncer. Serializable retries check pgconn.PgError code 40001.\n"
    )),
    ("docs/runbook.md", "Operations runbook", (
        "# Operations runbook\n\n"
        "## Stuck confirmations\n\n"
        "If bookings stay requested for more than ten minutes, check the confirmation worker logs for lease errors\n"
        "and the webhook outbox for rows in retry_wait. Restarting the worker is safe: confirmations are idempotent.\n\n"
        "## Rate limits\n\n"
        "Clients over the limit receive 429 with a Retry-After header. Limits are per API key, 20 requests per second.\n"
    )),
    ("docs/deploy.zh.md", "部署流程", (
        "# 部署流程\n\n"
        "发布前确认 CI 全部通过，然后运行 make migrate-prod 执行数据库迁移。\n"
        "先灰度发布到 10% 的实例，观察错误率 15 分钟，再全量发布。\n\n"
        "## 回滚\n\n"
        "如果错误率上升，使用 make rollback VERSION=<previous> 回滚到上一个版本。\n"
        "数据库迁移必须可以回退：每个 goose 迁移都要写 Down 部分。\n"
    )),
)

# Knowledge graph: (kind, label, summary, [(doc path, line)...])
KB_NODES: tuple[tuple[str, str, str, tuple[tuple[str, int], ...]], ...] = (
    ("service", "Harbor API", "Go service for berth bookings at a container port.", (("docs/architecture.md", 3),)),
    ("component", "booking service", "Validates booking requests, checks availability, stores bookings.", (("docs/architecture.md", 8), ("docs/booking-lifecycle.md", 3))),
    ("component", "berth scheduler", "Proposes berth assignments from windows, tides and crane capacity.", (("docs/architecture.md", 9),)),
    ("component", "webhook dispatcher", "Delivers signed events from the outbox to partners.", (("docs/architecture.md", 10),)),
    ("component", "confirmation worker", "Confirms requested bookings when window and tide allow.", (("docs/booking-lifecycle.md", 4), ("docs/runbook.md", 5))),
    ("datastore", "PostgreSQL", "PostgreSQL 16; all service state.", (("docs/architecture.md", 14),)),
    ("library", "pgx v5", "PostgreSQL driver; replaces database/sql and lib/pq.", (("docs/architecture.md", 15), ("docs/adr/0007-pgx-migration.md", 11))),
    ("library", "pgxpool", "Connection pool of pgx; pool_max_conns=20.", (("docs/architecture.md", 15),)),
    ("decision", "ADR 0007", "Move every store package to pgx v5.", (("docs/adr/0007-pgx-migration.md", 1),)),
    ("concept", "idempotency key", "Repeated POST with the same key returns the original booking.", (("docs/booking-lifecycle.md", 8),)),
    ("concept", "keyset pagination", "Pagination on (eta, id) with an opaque cursor.", (("docs/booking-lifecycle.md", 13),)),
    ("endpoint", "GET /v1/bookings", "Lists bookings, 50 per page by default, at most 200.", (("docs/booking-lifecycle.md", 13),)),
    ("endpoint", "POST /v1/bookings", "Creates a requested booking.", (("docs/booking-lifecycle.md", 3),)),
    ("table", "webhook outbox", "Rows the webhook dispatcher delivers; retry_wait rows are retried.", (("docs/architecture.md", 10), ("docs/runbook.md", 6))),
    ("procedure", "部署流程", "灰度发布 10% 实例，观察 15 分钟后全量发布。", (("docs/deploy.zh.md", 4),)),
    ("procedure", "回滚", "make rollback VERSION=<previous>；迁移必须有 Down 部分。", (("docs/deploy.zh.md", 8),)),
    ("tool", "PgBouncer", "Transaction-mode pooler in front of PostgreSQL.", (("docs/architecture.md", 15), ("docs/adr/0007-pgx-migration.md", 16))),
)

# (from label, relation, to label, confidence, doc path, line)
KB_EDGES: tuple[tuple[str, str, str, float, str, int], ...] = (
    ("Harbor API", "contains", "booking service", 1.0, "docs/architecture.md", 8),
    ("Harbor API", "contains", "berth scheduler", 1.0, "docs/architecture.md", 9),
    ("Harbor API", "contains", "webhook dispatcher", 1.0, "docs/architecture.md", 10),
    ("booking service", "stores_in", "PostgreSQL", 1.0, "docs/architecture.md", 8),
    ("webhook dispatcher", "reads", "webhook outbox", 1.0, "docs/architecture.md", 10),
    ("Harbor API", "uses", "pgx v5", 1.0, "docs/architecture.md", 15),
    ("pgx v5", "provides", "pgxpool", 0.9, "docs/architecture.md", 15),
    ("pgxpool", "connects_through", "PgBouncer", 0.8, "docs/architecture.md", 15),
    ("ADR 0007", "decides", "pgx v5", 1.0, "docs/adr/0007-pgx-migration.md", 11),
    ("GET /v1/bookings", "uses", "keyset pagination", 1.0, "docs/booking-lifecycle.md", 13),
    ("POST /v1/bookings", "requires", "idempotency key", 0.9, "docs/booking-lifecycle.md", 8),
    ("confirmation worker", "updates", "booking service", 0.7, "docs/booking-lifecycle.md", 4),
    ("部署流程", "followed_by", "回滚", 0.8, "docs/deploy.zh.md", 8),
    ("Harbor API", "deployed_by", "部署流程", 0.9, "docs/deploy.zh.md", 3),
)

# --------------------------------------------------------------------------------------------------
# special turns
# --------------------------------------------------------------------------------------------------

# The provider refuses the raw bytes of a PDF returned by read_file; a content_override replaces the result.
REFUSED_TURN = Script(
    "", "Read the customs manifest sample in testdata/fixtures/manifest.pdf and tell me which fields map to our declarations table.",
    "Read the fixture first, then compare its fields with the declarations columns in migrations.",
    (
        read("testdata/fixtures/manifest.pdf", (
            "%PDF-1.7\n%\u00e2\u00e3\u00cf\u00d3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
            "4 0 obj\n<< /Length 5121 /Filter /FlateDecode >>\nstream\nx\u009c\u00ad\u0098\u00dbn\u00db8\u0010\u0086\u00ef\u00fd"
            "\u0014\u00bc\u00dc\u00c5\u00a2\u0014\u00e9\u00b3\u00e4\u00bb\u00a4\u0087\u00b6\u0080\u00ed\u00b4\u00e9\u00aeS\u00ec\u00e5"
            "\u00c2\u0096\u00e8D\u00a8,\u00b9\u0092\u009c$\u00fb\u00f4;\u00c3!%\u00d9\u00ce\u00a1\u00d8\u0016\u00bb\u0080..."
            "\nendstream\nendobj\n[48,211 bytes, binary]"
        )),
        sh("pdftotext -layout testdata/fixtures/manifest.pdf - | head -n 14", (
            "CUSTOMS CARGO MANIFEST                         Form CM-2\n"
            "Vessel name:      MSC AURORA             IMO: 9839131\n"
            "Voyage:           AE7-W046               Port of loading: CNSHA\n"
            "Arrival (ETA):    2026-11-21 06:30 UTC   Berth: K-1742\n\n"
            "Container        Seal        HS code    Gross kg   Consignee\n"
            "MSCU 4471203     EU881204    8471.30    18,420     Nordhaven Logistics BV\n"
            "MSCU 4471198     EU881197    6403.99    11,062     Tidewater Retail NV\n"
        ), say="The provider rejected the raw PDF bytes. I'll extract the text layer with pdftotext instead."),
        grep("CREATE TABLE declarations", "migrations/", "migrations/0017_customs.sql:3:CREATE TABLE declarations (id BIGSERIAL PRIMARY KEY, booking_id BIGINT, container_no TEXT, seal_no TEXT, hs_code TEXT, gross_kg NUMERIC, consignee TEXT);"),
    ),
    "Mapping from the CM-2 manifest to `declarations`:\n\n"
    "| manifest field | column |\n| --- | --- |\n| Container | `container_no` |\n| Seal | `seal_no` |\n"
    "| HS code | `hs_code` |\n| Gross kg | `gross_kg` (strip the thousands separator) |\n| Consignee | `consignee` |\n\n"
    "Vessel, IMO, voyage and ETA belong to the booking, not the declaration: join through `booking_id`. "
    "Note: reading the PDF directly failed (the provider refused the binary content), so I used its text layer.",
)

REFUSED_OVERRIDE_TEXT = (
    "[binary content removed: testdata/fixtures/manifest.pdf is a PDF document (48,211 bytes). "
    "The provider refused the raw bytes; extract its text with pdftotext instead.]"
)

# A pasted log that was too large; two overrides replace it (the later one wins).
RACE_LOG_HEAD = (
    "Here's the full output from the staging box, it's long:\n\n"
    "==================\nWARNING: DATA RACE\n"
)
RACE_LOG_FRAME = (
    "Read at 0x00c000{addr} by goroutine {g}:\n"
    "  example.com/harbor-api/internal/booking.(*Service).Pending()\n"
    "      /srv/harbor-api/internal/booking/service.go:74 +0x64\n"
    "  example.com/harbor-api/internal/http.(*Server).metrics()\n"
    "      /srv/harbor-api/internal/http/metrics.go:41 +0x1d8\n"
    "  DATABASE_URL=postgres://harbor:{secret}@staging-db.internal:5432/harbor\n"
)
PASTE_TURN = Script(
    "", "",  # user text is generated (the long paste)
    "The paste repeats the same two stacks; it confirms the fix covers the metrics handler too.",
    (grep("Pending()", "internal/", "internal/booking/service.go:74:func (s *Service) Pending() int {\ninternal/http/metrics.go:41:\tpending.Set(float64(s.bookings.Pending()))"),),
    "The staging log shows the same race, reached through the metrics handler (`metrics.go:41` calls `Pending()`). "
    "The mutex fix covers that path as well, since `Pending()` now takes the lock. Also: the log contains a "
    "database URL with a password; you may want to rotate it.",
)
PASTE_OVERRIDE_TRIMMED = "Here's the full output from the staging box (trimmed to its first 40 lines by the runtime; the paste was 1.3 MB):"
PASTE_OVERRIDE_REDACTED = "[pasted race log removed by the user: it contained a staging database password. Saved at /tmp/race-staging.log]"

CANCELLED_TURN = Script(
    "", "Also push it to GHCR as ghcr.io/demo/atlas-server:0.9.0-rc1.",
    "Tag and push; the push of the base layers can take a while on this connection.",
    (sh("docker tag atlas-server:slim ghcr.io/demo/atlas-server:0.9.0-rc1 && docker push ghcr.io/demo/atlas-server:0.9.0-rc1",
        "The push refers to repository [ghcr.io/demo/atlas-server]\n5f70bf18a086: Pushed\n3b2e1c4d9a01: Pushing  41.9MB/112.4MB\n^C\n[aborted by the user after 41.2s]",
        error=True),),
    "",
)

RERUN_TURN = Script(
    "", "The server restarted in the middle of that. Run it again please.",
    "The previous run was cut off by the restart; nothing to clean up, just rerun.",
    (sh("go test -race ./...", "ok  \texample.com/harbor-api/internal/auth\t1.198s\nok  \texample.com/harbor-api/internal/berth\t2.874s\nok  \texample.com/harbor-api/internal/booking\t4.402s\nok  \texample.com/harbor-api/internal/middleware\t0.031s\nok  \texample.com/harbor-api/internal/webhook\t1.022s"),),
    "All packages pass with `-race` this time. The earlier run didn't fail; it was interrupted by the server restart.",
)

INTERRUPTED_TURN = Script(
    "", "Run the full test suite with -race once.",
    "go test -race ./... takes ~40 s here.",
    (sh("go test -race ./...", ""),),
    "",
)

QA_SCRIPTS: tuple[tuple[str, Script], ...] = (
    (HARBOR, Script(
        "pgx: QueryRow vs Query for single rows",
        "In pgx v5, is there any reason to use Query + CollectOneRow instead of QueryRow + Scan for single-row lookups?",
        "Both are fine; differences are error handling (CollectOneRow returns ErrNoRows the same way) and struct mapping via RowToStructByName.",
        (),
        "Mostly convenience. `QueryRow(...).Scan(&a, &b)` is the lightest: no struct mapping, and `pgx.ErrNoRows` when "
        "nothing matches. `pgx.CollectOneRow(rows, pgx.RowToStructByName[T])` maps columns to struct fields by name, "
        "which is safer when the SELECT list changes, and returns the same `pgx.ErrNoRows`. It also fails if the row "
        "has columns the struct lacks, which catches drift early.\n\nFor our stores I'd use `CollectOneRow` with "
        "`RowToStructByName` everywhere except hot paths, where the manual `Scan` saves a reflection pass.",
    )),
    (ATLAS, Script(
        "Simplify geometries at ingest or at render?",
        "Should atlas simplify geometries once at ingest, or per zoom level at render time?",
        "Trade-off: ingest-time simplification is cheap at render but has to pick one tolerance; per-zoom simplification needs the full geometry but gives the right detail per level.",
        (),
        "Per zoom at render time, with a cache. A single ingest-time tolerance is either too coarse for z14 or "
        "pointless for z4. The usual approach is Douglas-Peucker with a tolerance of about one pixel at the "
        "target zoom (`tolerance = 40075016.7 / (256 * 2**z)` metres), applied after clipping to the buffered "
        "tile so you simplify less data.\n\nIf render time matters, precompute simplified copies for a few "
        "zoom bands (0-5, 6-9, 10+) at ingest: you get most of the benefit with three copies instead of one per level.",
    )),
    (NOTES, Script(
        "Meetup talk length",
        "Is 8 sections too many for a 20 minute talk?",
        "Eight sections in 20 minutes means about 2.5 minutes each; fine if two of them are very short.",
        (),
        "It's fine as long as they aren't equal. The outline already has two 1-2 minute sections (opening and "
        "questions), so the real content is six sections in about 17 minutes. The risk is the cache design part "
        "running long; if you rehearse and it passes 5 minutes, merge sections 3 and 4.",
    )),
)

FORK_SCRIPTS: tuple[Script, ...] = (
    Script(
        "", "Let's compare: implement offset pagination instead (?page=&per_page=) so I can benchmark both.",
        "Offset pagination is a smaller change: LIMIT/OFFSET with ORDER BY eta, id. Keep the same response shape plus total count.",
        (
            edit("internal/booking/store.go",
                 "\t      WHERE ($1::timestamptz IS NULL OR (eta, id) > ($1, $2))\n\t      ORDER BY eta, id LIMIT $3`",
                 "\t      ORDER BY eta, id LIMIT $1 OFFSET $2`"),
            sh("go test ./internal/booking/...", "ok  \texample.com/harbor-api/internal/booking\t0.301s"),
            sh("go test ./internal/booking/ -run XXX -bench BenchmarkList -benchtime 200x", (
                "BenchmarkList/page=1-2        \t     200\t    412307 ns/op\n"
                "BenchmarkList/page=500-2      \t     200\t  18903317 ns/op\n"
                "BenchmarkList/page=5000-2     \t     200\t 171420988 ns/op\n"
                "PASS\nok  \texample.com/harbor-api/internal/booking\t38.211s"
            )),
        ),
        "Offset pagination works but degrades linearly: page 1 takes 0.4 ms, page 500 takes 19 ms and page 5,000 "
        "takes 171 ms, because Postgres still reads and discards every skipped row. The keyset version in the "
        "other session stays at about 0.4 ms on every page. I'd keep keyset.",
    ),
    Script(
        "", "Forget cursors for a moment: what would a page-number API look like if the mobile team insists on showing \"page 3 of 40\"?",
        "They need a total count and random access. Offer page numbers with a capped COUNT, or keyset plus an approximate total.",
        (),
        "Two options that keep the database happy:\n\n"
        "1. **Keyset plus an approximate total**: keep cursors for navigation and return `total_estimate` from "
        "`pg_class.reltuples` (or a cached `COUNT(*)` refreshed every minute). The UI can show \"about 40 pages\".\n"
        "2. **Page numbers with a cap**: `?page=N` with OFFSET, but refuse pages beyond 100 (`400 page_out_of_range`) "
        "and compute the exact count with `SELECT count(*) FROM (SELECT 1 FROM bookings WHERE ... LIMIT 10001)`, "
        "reporting \"10,000+\" above that.\n\n"
        "Option 1 is what I'd recommend; \"page 3 of 40\" rarely matters once people can filter by date.",
    ),
    Script(
        "", "Now measure offset vs keyset again with 1M bookings in the table, same benchmark.",
        "Seed 1M rows in the bench database, then rerun both benchmarks side by side.",
        (
            sh("go run ./scripts/seed -bookings 1000000 -db \"$BENCH_DB_URL\"", "seeded 1,000,000 bookings in 41.7s"),
            sh("go test ./internal/booking/ -run XXX -bench 'BenchmarkList(Offset|Keyset)' -benchtime 100x", (
                "BenchmarkListOffset/page=1-2       \t     100\t    455120 ns/op\n"
                "BenchmarkListOffset/page=10000-2   \t     100\t 402118733 ns/op\n"
                "BenchmarkListKeyset/page=1-2       \t     100\t    431877 ns/op\n"
                "BenchmarkListKeyset/page=10000-2   \t     100\t    447310 ns/op\n"
                "PASS\nok  \texample.com/harbor-api/internal/booking\t81.337s"
            )),
        ),
        "With 1M rows the gap is stark: page 10,000 costs 402 ms with OFFSET and 0.45 ms with keyset; page 1 is "
        "the same for both (~0.44 ms). That settles it for the planning meeting.",
    ),
)
