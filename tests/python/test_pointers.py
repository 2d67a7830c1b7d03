"""Every pointer the tree holds still leads somewhere: a Markdown link to a
file and its section, a comment's `docs/NOTES.md, "Caveats"`, a path of the
tree named in any file; and the documents' headings go down one level at a
time, so their outline (and the anchors links use) reads as written."""

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCUMENTS = {"README": "README.md", "NOTES": "docs/NOTES.md", "MEASURED": "docs/MEASURED.md",
             "DEVELOPING": "docs/DEVELOPING.md"}
# Folders whose paths the tree names (bench/image_run.py, docs/NOTES.md, ...).
FOLDERS = ("src", "include", "bench", "tests", "docs", "scripts", "tools", "bindings", "python", "fuzz",
           "examples", "cmake")
# Named but not kept: what benches and scripts write, and recipes' placeholders.
NOT_KEPT = re.compile(r"^bench/out\b|NAME")


def tracked(*patterns):
    names = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    return [n for n in names if not n.startswith("fuzz/regressions/") and os.path.isfile(os.path.join(ROOT, n))]


def read(name):
    with open(os.path.join(ROOT, name), encoding="utf-8", errors="replace") as f:
        return f.read()


def outline(text):
    """(level, title) of each heading of a Markdown text, code blocks left out."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [(len(m.group(1)), m.group(2).strip()) for m in re.finditer(r"^(#+) (.+)$", text, re.M)]


def anchor(title):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def anchors(text):
    seen, out = {}, set()
    for _, title in outline(text):
        a = anchor(title)
        out.add(a if a not in seen else f"{a}-{seen[a]}")
        seen[a] = seen.get(a, 0) + 1
    return out


def sections(text):
    """What a pointer may name in a document: its headings and the bold lead
    of a paragraph (``**A shuffle for corpora bigger than RAM.**``)."""
    return [title for _, title in outline(text)] + re.findall(r"^\*\*([^*]+?)\.?\*\*", text, re.M)


def test_the_anchor_rule_is_githubs():
    assert anchor("Images and clips: `ImageDecode` / `ClipDecode` against PIL + torchvision and DALI") == \
        "images-and-clips-imagedecode--clipdecode-against-pil--torchvision-and-dali"
    assert anchor("DINOv2's multi-crop: `ImageDecode(crops=...)`") == "dinov2s-multi-crop-imagedecodecrops"


@pytest.mark.parametrize("name", tracked("*.md"))
def test_every_markdown_link_leads_to_a_file_and_its_section(name):
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", read(name)):
        if re.match(r"[a-z]+:", target):
            continue  # another site
        path, _, section = target.partition("#")
        file = os.path.normpath(os.path.join(os.path.dirname(name), path)) if path else name
        if not os.path.exists(os.path.join(ROOT, file)):
            bad.append(f"{target}: no file {file}")
        elif section and file.endswith(".md") and section not in anchors(read(file)):
            bad.append(f"{target}: {file} has no section #{section}")
    assert not bad, f"{name}: links that lead nowhere:\n" + "\n".join(bad)


def test_every_section_a_file_points_to_is_there():
    """`docs/NOTES.md, "Caveats"` and the like, in comments, docstrings and
    documents (a comment's line breaks and markers folded away)."""
    pointer = re.compile(r"\b((?:docs/)?(README|NOTES|MEASURED|DEVELOPING)(?:\.md)?)(?:'s)?,?\s+\"([^\"]+)\"")
    bad, seen = [], 0
    for name in tracked():
        text = re.sub(r"[ \t]*\n[ \t]*(?://+|#+|\*|;+)?[ \t]*", " ", read(name))
        for spelled, document, title in pointer.findall(text):
            seen += 1
            if not any(s.startswith(title) for s in sections(read(DOCUMENTS[document]))):
                bad.append(f'{name}: {spelled}, "{title}"')
    assert seen >= 8, f"only {seen} section pointers found: has the way they are written changed?"
    assert not bad, "pointers to sections that are not there:\n" + "\n".join(bad)


def test_every_path_of_the_tree_a_file_names_is_there():
    """A path such as src/reader/reader_rep.h or bench/image_run.py named in a
    comment, a docstring, a document or a script names a file or folder that
    exists (a string a program builds a path from is no pointer: left out)."""
    path = re.compile(r"(?<![\w./$\"'-])((?:%s)/[\w./+-]*\w)" % "|".join(FOLDERS))
    bad = []
    for name in tracked():
        for named in set(path.findall(read(name))):
            if NOT_KEPT.search(named) or os.path.exists(os.path.join(ROOT, named)):
                continue
            bad.append(f"{name}: {named}")
    assert not bad, "paths named that are not in the tree:\n" + "\n".join(sorted(bad))


@pytest.mark.parametrize("name", tracked("*.md"))
def test_headings_go_down_one_level_at_a_time(name):
    jumps, level = [], 0
    for depth, title in outline(read(name)):
        if depth > level + 1:
            jumps.append(f"{'#' * level or '(top)'} -> {'#' * depth} {title}")
        level = depth
    assert not jumps, f"{name}: headings that skip a level:\n" + "\n".join(jumps)
