"""Every relative link and section reference in the repository's Markdown resolves (issue 40 item 1): a link's file
exists and its `#anchor` is a heading there (GitHub's slugs), and a citation such as "games.md §3" names a file of
the repository with a section 3 (the README once cited a spec that is not in the repository). The README keeps
its newcomer's shape: the two commands first, then the three paths within its first 120 lines."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
SECTION_REF = re.compile(r"([\w./-]+\.md) §(\d+)")
FENCE = re.compile(r"^(```|~~~)")


def markdown_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    files = [ROOT / line for line in out.stdout.splitlines()]
    untracked = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]  # new pages count before they are committed
    return sorted({f for f in [*files, *untracked] if f.exists()})


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code: what a reader follows as a link."""
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to -."""
    text = re.sub(r"[`*_]{1,2}(?=\S)|(?<=\S)[`*_]{1,2}", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(text: str) -> list[str]:
    """The lines outside fenced code blocks (inline code kept: a heading's slug keeps its words)."""
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return kept


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in headings(path.read_text()):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            out.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
    return out


def sections(path: Path) -> set[str]:
    """The numbers of a file's numbered sections: `## 3. Title`, `## 3 Title` or `## §3 Title`."""
    return {m.group(1) for m in re.finditer(r"^#{1,6}\s+§?(\d+)[.\s]", path.read_text(), flags=re.M)}


def broken_links(path: Path) -> list[str]:
    bad = []
    text = prose(path.read_text())
    for target in LINK.findall(text) + IMAGE.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, file:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest.name}")
    return bad


def broken_section_refs(path: Path) -> list[str]:
    bad = []
    for name, number in SECTION_REF.findall(path.read_text()):
        candidates = [c for c in (path.parent / name, ROOT / name, ROOT / "docs" / name) if c.exists()]
        if not candidates:
            bad.append(f"{name} §{number}: {name} is not in the repository")
        elif number not in sections(candidates[0]):
            bad.append(f"{name} §{number}: {name} has no section {number}")
    return bad


def test_every_relative_link_and_anchor_resolves() -> None:
    files = markdown_files()
    assert ROOT / "README.md" in files and len(files) > 10
    bad = {str(f.relative_to(ROOT)): b for f in files if (b := broken_links(f))}
    assert not bad, bad


def test_every_section_reference_names_a_section_of_the_repository() -> None:
    shown = [*markdown_files(), *(ROOT / "experiments").glob("*.toml"),
             *(ROOT / "src" / "mafiabench" / "dashboards" / "templates").glob("*.j2")]
    bad = {str(f.relative_to(ROOT)): b for f in shown if (b := broken_section_refs(f))}
    assert not bad, bad


def test_the_checks_fire_on_a_broken_link_and_a_missing_section(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## 2. Second\n\n## A title (with `code`)\n")
    page.write_text("[ok](other.md#a-title-with-code) [gone](missing.md) [no anchor](other.md#nowhere)\n"
                    "`[in code](missing.md)`\nSee other.md §2 and other.md §3 and games.md §3.\n")
    assert broken_links(page) == ["missing.md: no such file", "other.md#nowhere: no heading #nowhere in other.md"]
    assert [b.split(":")[0] for b in broken_section_refs(page)] == ["other.md §3", "games.md §3"]


def test_the_readme_fits_the_three_paths_in_its_first_120_lines() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[3].startswith("make demo") and lines[4].startswith("make test")  # the two commands, first
    head = lines[:120]
    for path in ("## Try it offline", "## Replicate a paper", "## Your own models"):
        assert path in head, f"{path!r} is not in the README's first 120 lines"
    ends = max(i for i, line in enumerate(lines) if line.startswith("## Your own models"))
    following = next(i for i, line in enumerate(lines) if i > ends and line.startswith("## "))
    assert following <= 120, f"the third path ends at line {following}"


def test_the_readmes_own_study_is_a_valid_experiment_the_run_would_accept(tmp_path: Path) -> None:
    from mafiabench.study.estimate import study_needs
    from mafiabench.study.spec import load_experiment

    text = (ROOT / "README.md").read_text()
    block = re.search(r"```toml\n(# my_study\.toml.*?)```", text, flags=re.S)
    assert block, "the README's own-study example is gone"
    path = tmp_path / "my_study.toml"
    path.write_text(block.group(1))
    needs = study_needs(load_experiment(path), probe=False)
    assert not needs.refusals, needs.refusals
    assert {m.status for m in needs.models} <= {"priced", "free"}
