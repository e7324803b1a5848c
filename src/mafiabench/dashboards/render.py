"""`render_dashboards(con, out_dir)`: the flow's last step. Gated on the quality check, written atomically.

Publishing is refused unless the latest build passed its quality gate and no game was landed since
(`transform.gate_passed`). Pages are written to a temporary sibling folder and swapped in at the end, so a refused
or crashed render leaves the previous dashboards exactly as they were.

The Vega, Vega-Lite and vega-embed scripts are written once to `assets/vega-bundle.js` (from vl-convert, no
network) and every page loads them by relative path, so the folder works offline from `file://` (one ~900 KB copy
instead of one per page).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from mafiabench import __version__
from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import ASSETS, STYLESHEET, VEGA_BUNDLE, Page, data_status, render_page, stylesheet
from mafiabench.dashboards.page_registry import Context, registered
from mafiabench.dashboards.pages.transcripts import transcript_pages, transcript_path
from mafiabench.errors import UserError
from mafiabench.scratch import alive

KEEP_FILES = ("README.md",)  # hand-written files of the output folder that a render carries over
SITE_FILE = "site.json"  # which warehouse (and build) a folder's pages show: a render never silently replaces another's


class PublishBlockedError(UserError):
    """The quality gate did not pass: nothing is published and the previous dashboards stay as they were."""


@dataclass
class RenderResult:
    out_dir: Path
    pages: list[str] = field(default_factory=list)  # overview pages, relative to out_dir
    transcripts: int = 0
    games: int = 0
    transcripts_sampled: bool = False
    images: list[str] = field(default_factory=list)
    figures_dir: Path | None = None  # where the images were also copied (--figures)
    build_id: str | None = None
    seconds: float = 0.0

    def summary(self) -> str:
        sampled = " (linked games plus a sample)" if self.transcripts_sampled else ""
        images = f", {len(self.images)} images" if self.images else ""
        return (
            f"dashboards written to {self.out_dir}: {len(self.pages)} pages, {self.transcripts} of {self.games} game "
            f"transcripts{sampled}{images} in {self.seconds:.1f}s (build {self.build_id}); open "
            f"{self.out_dir / 'index.html'}"
            + (f"; the {len(self.images)} images also in {self.figures_dir}" if self.figures_dir else "")
        )


@functools.lru_cache(maxsize=1)
def vega_bundle() -> str:
    """vega + vega-lite + vega-embed as one classic script, from vl-convert (offline).

    Bundling takes 2-6 s, so the result is cached in memory and in the user's cache folder, keyed by the
    vl-convert version that made it (the bundle depends on nothing else).
    """
    import vl_convert

    cache_root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    cached = cache_root / "mafiabench" / f"vega-bundle-vl-convert-{getattr(vl_convert, '__version__', 'unknown')}.js"
    try:
        text = cached.read_text(encoding="utf-8")
        if "window.vegaEmbed" in text:
            return text
    except OSError:
        pass
    text = str(vl_convert.javascript_bundle(None))  # type: ignore[arg-type]  # None: the default snippet
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f"{cached.name}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, cached)
    except OSError:
        pass  # a read-only home only costs the next render a few seconds
    return text


def check_gate(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The latest build, if publishing is allowed; else `PublishBlockedError` saying why and what to do."""
    from mafiabench.warehouse import builds as transform

    build = transform.latest_build(con)
    if transform.gate_passed(con):
        assert build is not None
        return build
    if build is None:
        raise PublishBlockedError(
            "the warehouse has not been built: run `mafiabench build` first; dashboards not published"
        )
    if build.get("status") == "failed":
        first = (build.get("message") or "").splitlines()
        detail = f": {first[0]}" if first else ""
        raise PublishBlockedError(
            f"the latest build {build['build_id']} failed its quality gate ({build.get('n_failed')} of "
            f"{build.get('n_expectations')} expectations failed){detail}. Dashboards not published; the previous "
            "ones are left untouched. Fix the data or the models and run `mafiabench build` again."
        )
    if not build.get("published"):
        raise PublishBlockedError(
            f"the latest build {build['build_id']} was not validated (status {build.get('status')}); run "
            "`mafiabench build` with validation; dashboards not published"
        )
    raise PublishBlockedError(
        f"games were landed or removed after the latest build {build['build_id']}: its marts are stale. Run "
        "`mafiabench build` again; dashboards not published"
    )


def select_transcripts(
    m: Marts, linked: Sequence[str], *, max_transcripts: int, sample: int
) -> tuple[list[str], int, str]:
    """Which games get a transcript page: all of them for a warehouse of at most `max_transcripts` games, else
    every linked game plus a deterministic sample spread over the cells. Returns (ids, total games, note)."""
    total = int(m.scalar("select count(*) from fct_games") or 0)
    if total <= max_transcripts:
        ids = [r["game_id"] for r in m.rows("select game_id from fct_games order by study, cell, game_index, game_id")]
        return ids, total, f"All {total:,} games have a transcript."
    n_cells = int(m.scalar("select count(distinct cell) from fct_games") or 1)
    per_cell = max(1, -(-sample // max(n_cells, 1)))
    sampled = m.rows(
        """select game_id from fct_games
           qualify row_number() over (partition by cell order by hash(game_id), game_id) <= ?
           order by hash(game_id), game_id limit ?""",
        [per_cell, sample],
    )
    ids = list(dict.fromkeys([*linked, *(r["game_id"] for r in sampled)]))
    note = (
        f"{len(ids):,} of {total:,} games have a transcript: every game linked from another page "
        f"({len(set(linked)):,}) plus a deterministic sample of up to {sample:,} spread over the cells. "
        "The full event log of every game is in the warehouse."
    )
    return ids, total, note


def render_dashboards(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path | str = Path("dashboards"),
    *,
    export_images: bool = False,
    figures: Path | str | None = None,
    max_transcripts: int = 2000,
    transcript_sample: int = 200,
    max_rows: int = 500,
    force: bool = False,
) -> RenderResult:
    """Render every page from the marts into `out_dir`, replacing its previous content atomically.

    `figures`: a folder of the user's choosing that keeps a copy of every chart's PNG and SVG (implies
    `export_images`): the pages' folder is replaced by every render, so images kept only there do not last.

    Raises `PublishBlockedError` (the previous dashboards untouched) when the latest build did not pass its gate, and
    a `UserError` when `out_dir` holds the pages of another warehouse (`SITE_FILE`), unless `force`.
    """
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    export_images = export_images or figures is not None
    warehouse = warehouse_of(con)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{out_dir} exists and is not a folder")
    check_site(out_dir, warehouse, force=force)
    build = check_gate(con)
    parent = out_dir.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out_dir)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-{os.getpid()}-", dir=parent))
    try:
        result = _render_into(
            con,
            staging,
            build=build,
            warehouse=warehouse,
            export_images=export_images,
            max_transcripts=max_transcripts,
            transcript_sample=transcript_sample,
            max_rows=max_rows,
        )
        for name in KEEP_FILES:
            if (out_dir / name).is_file():
                shutil.copy2(out_dir / name, staging / name)
        os.chmod(staging, 0o755)
        _swap(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    result.out_dir = out_dir
    if figures is not None:
        result.figures_dir = copy_figures(out_dir, result.images, Path(figures))
    result.seconds = time.perf_counter() - t0
    return result


def copy_figures(out_dir: Path, images: list[str], figures: Path) -> Path:
    """Copy the rendered charts' images (paths relative to `out_dir`) into `figures`, keeping their names: that
    folder is the user's, never replaced by a render (an image already there is overwritten by its new version)."""
    if figures.exists() and not figures.is_dir():
        raise UserError(f"--figures {figures}: exists and is not a folder")
    for rel in images:
        target = figures / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(out_dir / rel, target)
    return figures


_STAGING_PID = re.compile(r"\.(?:tmp|old)-(\d+)-")
STALE_STAGING_S = 600.0


def remove_stale_staging(out_dir: Path) -> int:
    """Delete the staging and swapped-out folders a killed render left next to `out_dir` (`.<name>.tmp-<pid>-*`,
    `.<name>.old-<pid>-*`): those whose process is gone, and unnamed ones untouched for `STALE_STAGING_S`."""
    parent = out_dir.absolute().parent
    n = 0
    for pattern in (f".{out_dir.name}.tmp-*", f".{out_dir.name}.old-*"):
        for p in parent.glob(pattern):
            m = _STAGING_PID.search(p.name)
            if m is not None:
                stale = not alive(int(m.group(1)))
            else:
                try:
                    stale = time.time() - p.stat().st_mtime > STALE_STAGING_S
                except OSError:
                    continue
            if stale:
                shutil.rmtree(p, ignore_errors=True)
                n += 1
    return n


def _swap(new: Path, target: Path) -> None:
    """Put `new` in place of `target`: two renames in the same folder (the old one is deleted afterwards)."""
    if target.exists():
        old = target.absolute().parent / f".{target.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.rename(target, old)
        try:
            os.rename(new, target)
        except BaseException:
            os.rename(old, target)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(new, target)


def warehouse_of(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The DuckDB file behind `con`, resolved (None in memory)."""
    rows = con.execute("select path from duckdb_databases() where database_name = current_database()").fetchall()
    return Path(rows[0][0]).resolve() if rows and rows[0][0] else None


def site_of(out_dir: Path) -> dict[str, Any] | None:
    """What a pages folder says it shows (`SITE_FILE`): warehouse, build, when; None for an empty folder or pages
    rendered before the file existed."""
    try:
        data = json.loads((Path(out_dir) / SITE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def check_site(out_dir: Path, warehouse: Path | None, *, force: bool = False) -> None:
    """Refuse to replace the pages of another warehouse (two experiments with their own warehouses and one pages
    folder would overwrite each other's site silently); `force` replaces them."""
    site = site_of(out_dir)
    if force or site is None or warehouse is None or not site.get("warehouse"):
        return
    if Path(site["warehouse"]) != Path(warehouse).resolve():
        raise UserError(
            f"{out_dir} shows the pages of warehouse {site['warehouse']} (build {site.get('build_id')}), not of "
            f"{warehouse}: render into another folder (--dashboards / --out), or replace them with --force"
        )


def display_path(path: Path | None) -> str:
    """A path as a reader of the pages knows it: relative to the current folder when under it."""
    if path is None:
        return "(in memory)"
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _render_into(
    con: duckdb.DuckDBPyConnection,
    out: Path,
    *,
    build: dict[str, Any],
    warehouse: Path | None,
    export_images: bool,
    max_transcripts: int,
    transcript_sample: int,
    max_rows: int,
) -> RenderResult:
    m = Marts(con)
    if not m.has("fct_games", "mart_transcript_events", "fct_player_games"):
        raise UserError(
            "the warehouse has no fct_games / fct_player_games / mart_transcript_events: run `mafiabench build`"
        )
    specs = registered()  # every module of dashboards/pages registered its pages when the package was imported
    nav = [(spec.path, spec.label) for spec in specs]
    linked = list(dict.fromkeys(gid for spec in specs if spec.links for gid in spec.links(m, max_rows)))
    ids, total, note = select_transcripts(m, linked, max_transcripts=max_transcripts, sample=transcript_sample)
    rendered = {gid: transcript_path(gid) for gid in ids}
    ctx = Context(
        marts=m,
        transcripts=rendered,
        n_games=total,
        transcripts_note=note,
        max_rows=max_rows,
        build=build,
    )
    if len(ids) < total:
        ctx.notes.append(note)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    footer = (
        f"Generated {generated} by mafiabench {__version__} from warehouse {display_path(warehouse)}, build "
        f"{build.get('build_id')}. Static files: no server and no network needed."
    )
    (out / SITE_FILE).write_text(json.dumps({
        "warehouse": None if warehouse is None else str(warehouse),
        "build_id": build.get("build_id"),
        "generated": generated,
        "mafiabench": __version__,
    }, indent=1), encoding="utf-8")
    (out / ASSETS).mkdir()
    (out / ASSETS / VEGA_BUNDLE).write_text(vega_bundle(), encoding="utf-8")
    (out / ASSETS / STYLESHEET).write_text(stylesheet(), encoding="utf-8")
    (out / "transcripts").mkdir()

    result = RenderResult(
        out_dir=out,
        games=total,
        transcripts=len(ids),
        transcripts_sampled=len(ids) < total,
        build_id=build.get("build_id"),
    )
    status = warehouse_status(m)
    for spec in specs:
        page = spec.build(ctx)
        if page.path != spec.path:
            raise RuntimeError(f"page registered at {spec.path} was built for {page.path}")
        if export_images:
            result.images.extend(_export_images(page, out))
        _write(out, page, nav, footer, rendered, status)
        result.pages.append(page.path)
        for more in spec.extra(ctx) if spec.extra else ():
            _write(out, more, nav, footer, rendered)
    for page in transcript_pages(m, ids, rendered=rendered):
        _write(out, page, nav, footer, rendered, status)
    return result


def _write(out: Path, page: Page, nav: list[tuple[str, str]], footer: str, transcripts: dict[str, str],
           status: str = "") -> None:
    path = out / page.path
    path.parent.mkdir(parents=True, exist_ok=True)
    for key, rows in page.exports.items():
        write_csv(path.parent / page.export_name(key), rows)
    path.write_text(render_page(page, nav=nav, footer=footer, transcripts=transcripts, data_status=status),
                    encoding="utf-8")


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """A page's table as CSV (lists joined with `;`, missing values empty), with a header even when it has no rows.
    Text that a spreadsheet would read as a formula (=, +, -, @ first) is written with a leading apostrophe: model
    text is data wherever it is shown."""
    import csv

    def cell(v: Any) -> Any:
        if v is None:
            return ""
        if isinstance(v, list):
            v = ";".join(map(str, v))
        if isinstance(v, str) and v[:1] in ("=", "+", "-", "@"):
            return "'" + v
        return v

    columns = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for r in rows:
            writer.writerow([cell(r.get(c)) for c in columns])


def warehouse_status(m: Marts) -> str:
    """`data_status` of the built warehouse: how many games, how many scored, why the others are not."""
    counts = m.rows("select count(*) as n, count(*) filter (where is_scored) as k from fct_games")[0]
    reasons = [
        (r["reason"], r["n"])
        for r in m.rows(
            """select coalesce(invalid_reason, case when status <> 'finished' then status else 'no winner' end)
                      as reason, count(*) as n
               from fct_games where not is_scored group by all order by n desc, reason limit 3"""
        )
    ]
    return data_status(int(counts["n"] or 0), int(counts["k"] or 0), reasons)


def _export_images(page: Page, out: Path) -> list[str]:
    """PNG (2x) and SVG of each chart, written beside the page as `<page>.<chart>.png|svg`; links added."""
    import vl_convert

    written: list[str] = []
    folder = (out / page.path).parent
    stem = Path(page.path).stem
    for block in page.charts:
        base = f"{stem}.{block.key}"
        svg = vl_convert.vegalite_to_svg(block.spec)
        (folder / f"{base}.svg").write_text(svg, encoding="utf-8")
        (folder / f"{base}.png").write_bytes(vl_convert.svg_to_png(svg, scale=2))  # 4x faster than from the spec
        block.images = {"png": f"{base}.png", "svg": f"{base}.svg"}
        prefix = str(Path(page.path).parent / base) if "/" in page.path else base
        written += [f"{prefix}.png", f"{prefix}.svg"]
    return written
