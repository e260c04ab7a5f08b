"""What the deterministic indexer reads out of one file: chunks with line ranges, ``fact`` nodes and the
edges inside the file, each with evidence (a chunk and its lines), plus the references (imports, calls,
links) the indexer resolves across the whole tree.

Python is read with :mod:`ast` (never imported or run): a chunk per top-level statement group (the module's
head, each top-level class or function with its decorators), a ``module`` node, ``class`` and ``function``
nodes (methods included) with ``defines`` edges, and references for ``import`` / ``from ... import``, calls
that resolve statically (a name defined or imported in the module, ``alias.name`` of an imported module,
``self.method`` in a class). Markdown: a chunk per heading section, a ``document`` node, a ``heading`` node
per heading (``declares`` from the document, ``contains`` from the parent heading) and a reference for
every relative link. Long chunks are cut at :data:`MAX_CHUNK_LINES`.
"""

from __future__ import annotations

import ast
import bisect
import posixpath
import re
import warnings
from dataclasses import dataclass, field

MAX_CHUNK_LINES = 120
PY_MEDIA = "text/x-python"
MD_MEDIA = "text/markdown"

Key = tuple[str, str]  # (kind, normalized label): unique in a snapshot


@dataclass
class NodeSpec:
    kind: str
    label: str
    normalized: str
    summary: str
    attributes: dict[str, object]
    evidence: list[tuple[int, int, int]]  # (chunk ordinal, start line, end line)

    @property
    def key(self) -> Key:
        return (self.kind, self.normalized)


@dataclass
class EdgeSpec:
    source: Key
    target: Key
    relation: str
    evidence: list[tuple[int, int, int]]
    confidence: float = 1.0


@dataclass
class FileWork:
    """One file's self-contained work, keyed (ids are given when a snapshot is assembled)."""

    path: str
    sha256: str
    size: int
    media_type: str
    title: str
    chunks: list[tuple[int, int, str]] = field(default_factory=list)  # (start line, end line, text)
    nodes: list[NodeSpec] = field(default_factory=list)
    edges: list[EdgeSpec] = field(default_factory=list)
    reused: bool = False
    _starts: list[int] = field(default_factory=list, repr=False)

    def chunk_at(self, line: int) -> int:
        """The chunk holding ``line`` (chunks are in line order; a line between two is given to the earlier)."""
        if len(self._starts) != len(self.chunks):
            self._starts = [start for start, _end, _text in self.chunks]
        return max(0, bisect.bisect_right(self._starts, line) - 1)

    def cite(self, start: int, end: int | None = None) -> tuple[int, int, int]:
        ordinal = self.chunk_at(start)
        c_start, c_end, _ = self.chunks[ordinal]
        return (ordinal, max(start, c_start), min(end if end is not None else start, c_end))


def _cut(lines: list[str], starts: list[int]) -> list[tuple[int, int, str]]:
    """Chunks of ``lines`` (0-based ``starts``), trailing blank lines trimmed, long ones cut."""
    out: list[tuple[int, int, str]] = []
    for n, start in enumerate(starts):
        end = (starts[n + 1] if n + 1 < len(starts) else len(lines)) - 1
        while end > start and not lines[end].strip():
            end -= 1
        for piece in range(start, end + 1, MAX_CHUNK_LINES):
            last = min(end, piece + MAX_CHUNK_LINES - 1)
            out.append((piece + 1, last + 1, "\n".join(lines[piece : last + 1])))
    return out or [(1, 1, "")]


def module_name(path: str) -> str:
    parts = path[: -len(".py")].split("/") if path.endswith(".py") else path.split("/")
    if parts and parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0].strip()[:200]


def _dedupe(seen: set[Key], kind: str, normalized: str) -> str:
    candidate, n = normalized, 2
    while (kind, candidate) in seen:
        candidate = f"{normalized}#{n}"
        n += 1
    seen.add((kind, candidate))
    return candidate


class _Calls(ast.NodeVisitor):
    def __init__(self, resolve: dict[str, str], modules: dict[str, str], local: str, cls: str | None) -> None:
        self.resolve, self.modules, self.local, self.cls = resolve, modules, local, cls
        self.found: list[tuple[str, int]] = []

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        target = ""
        if isinstance(func, ast.Name):
            target = self.resolve.get(func.id, "")
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            base = func.value.id
            if base == "self" and self.cls:
                target = f"{self.local}.{self.cls}.{func.attr}"
            elif base in self.modules:
                target = f"{self.modules[base]}.{func.attr}"
            elif base in self.resolve:
                target = f"{self.resolve[base]}.{func.attr}"  # a class imported or defined here: Class.method()
        if target:
            self.found.append((target, node.lineno))
        self.generic_visit(node)


def extract_python(work: FileWork, text: str) -> None:
    lines = text.split("\n")
    mod = module_name(work.path)
    try:
        with warnings.catch_warnings():  # an odd escape in the file is the file's business, not a warning of ours
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=work.path)
    except (SyntaxError, ValueError):
        tree = None
    top = [] if tree is None else [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    starts = sorted({0} | {min([n.lineno] + [d.lineno for d in n.decorator_list]) - 1 for n in top})
    work.chunks = _cut(lines, starts)
    seen: set[Key] = set()
    doc = ast.get_docstring(tree) if tree is not None else None
    work.title = _first_line(doc)
    imports: list[tuple[str, int]] = []
    resolve: dict[str, str] = {}  # a name used in this module -> the dotted name it stands for
    modules: dict[str, str] = {}  # a module alias -> the module
    package = mod if work.path.endswith("__init__.py") else mod.rpartition(".")[0]
    for node in (tree.body if tree is not None else []):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imports.append((alias.name, node.lineno))
                modules[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                source = ".".join([*base, source] if source else base)
            for alias in node.names:
                if alias.name == "*":
                    imports.append((source, node.lineno))
                    continue
                imports.append((f"{source}.{alias.name}", node.lineno))
                resolve[alias.asname or alias.name] = f"{source}.{alias.name}"
                modules[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            resolve[node.name] = f"{mod}.{node.name}"
    head_end = work.chunks[0][1]
    module = NodeSpec("module", mod, _dedupe(seen, "module", f"{work.path}:".lower()), work.title,
                      {"path": work.path, "refs": [["imports", t, line] for t, line in imports]},
                      [work.cite(1, head_end)])
    work.nodes.append(module)

    def define(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, parent: NodeSpec, qual: str,
               cls: str | None) -> None:
        kind = "class" if isinstance(node, ast.ClassDef) else "function"
        label = f"{mod}.{qual}"
        refs: list[list[object]] = []
        if not isinstance(node, ast.ClassDef):
            calls = _Calls(resolve, modules, mod, cls)
            for stmt in node.body:
                calls.visit(stmt)
            refs = [["calls", t, line] for t, line in calls.found]
        else:
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id in resolve:
                    refs.append(["inherits", resolve[base.id], node.lineno])
        spec = NodeSpec(kind, label, _dedupe(seen, kind, f"{work.path}:{qual}".lower()), _first_line(ast.get_docstring(node)),
                        {"path": work.path, "refs": refs}, [work.cite(node.lineno, node.end_lineno)])
        work.nodes.append(spec)
        work.edges.append(EdgeSpec(parent.key, spec.key, "defines", [work.cite(node.lineno)]))
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    define(item, spec, f"{qual}.{item.name}", node.name if not isinstance(item, ast.ClassDef) else None)

    for node in top:
        define(node, module, node.name, None)


HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def extract_markdown(work: FileWork, text: str) -> None:
    lines = text.split("\n")
    fence = False
    headings: list[tuple[int, int, str]] = []  # (0-based line, level, text)
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
            continue
        match = None if fence else HEADING.match(line)
        if match and match.group(2):
            headings.append((i, len(match.group(1)), match.group(2)))
    work.chunks = _cut(lines, sorted({0} | {h[0] for h in headings}))
    work.title = headings[0][2][:200] if headings else ""
    seen: set[Key] = set()
    doc = NodeSpec("document", work.path, _dedupe(seen, "document", work.path.lower()), work.title,
                   {"path": work.path, "refs": []}, [work.cite(1, work.chunks[0][1])])
    work.nodes.append(doc)
    stack: list[tuple[int, NodeSpec]] = []
    owner_at: list[tuple[int, NodeSpec]] = []
    for i, level, title in headings:
        chunk = work.chunk_at(i + 1)
        section_end = work.chunks[chunk][1]
        spec = NodeSpec("heading", title, _dedupe(seen, "heading", f"{work.path}#{title}".lower()), "",
                        {"path": work.path, "refs": [], "level": level}, [work.cite(i + 1, section_end)])
        work.nodes.append(spec)
        while stack and stack[-1][0] >= level:
            stack.pop()
        parent = stack[-1][1] if stack else doc
        work.edges.append(EdgeSpec(parent.key, spec.key, "declares" if parent is doc else "contains",
                                   [work.cite(i + 1)]))
        stack.append((level, spec))
        owner_at.append((i + 1, spec))
    folder = posixpath.dirname(work.path)
    fence = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
            continue
        if fence:
            continue
        for match in LINK.finditer(line):
            target = match.group(1).split("#", 1)[0]
            if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("/"):
                continue
            resolved = posixpath.normpath(posixpath.join(folder, target))
            if resolved.startswith("../") or resolved == "..":
                continue
            owner = doc
            for start, spec in owner_at:
                if start <= i + 1:
                    owner = spec
            refs = owner.attributes["refs"]
            assert isinstance(refs, list)
            refs.append(["links", resolved, i + 1])


def extract(path: str, data: bytes, sha256: str) -> FileWork:
    text = data.decode("utf-8")
    media = PY_MEDIA if path.endswith(".py") else MD_MEDIA
    work = FileWork(path=path, sha256=sha256, size=len(data), media_type=media, title="")
    if media == PY_MEDIA:
        extract_python(work, text)
    else:
        extract_markdown(work, text)
    return work
