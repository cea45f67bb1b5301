"""notes.py reads top to bottom: each section builds only on the sections above it.

The sections are marked by a rule line (# ---...) and a comment line that
starts with the section's title.  Each top-level statement may refer only to
names defined in its own section or in a section above it; the record rules
do no I/O at all.
"""

import ast
import re
from pathlib import Path

NOTES = Path(__file__).resolve().parent.parent / "notes.py"
SECTIONS = ("Constants", "Errors", "Record rules", "Storage", "Session", "Recap", "Export and restore", "Batches",
            "Redaction", "Command line", "MCP", "Entry")
# What the pure record rules must never touch: the process, its streams, files.
IO_NAMES = {"sys", "os", "open", "print", "input", "fcntl"}


def section_starts(source: str) -> list:
    """(line number, title) of each section header, in file order."""
    lines = source.splitlines()
    found = []
    for number, line in enumerate(lines[:-1], 1):
        if re.fullmatch(r"# -{20,}", line) and lines[number].startswith("# "):
            title = next((title for title in SECTIONS if lines[number][2:].startswith(title)), None)
            assert title, "unknown section header at line %d: %s" % (number + 1, lines[number])
            found.append((number, title))
    return found


def section_of(line: int, starts: list) -> int:
    """Index in SECTIONS of the section holding this line (-1: the preamble before the first header)."""
    index = -1
    for start, title in starts:
        if line >= start:
            index = SECTIONS.index(title)
    return index


def defined_names(node) -> list:
    """The module-level names a top-level statement defines."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    if isinstance(node, ast.Try):
        return [name for child in node.body + [h for handler in node.handlers for h in handler.body]
                for name in defined_names(child)]
    return []


def used_names(node) -> set:
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load)}


def layout():
    source = NOTES.read_text("utf-8")
    tree = ast.parse(source)
    starts = section_starts(source)
    home = {}
    for node in tree.body:
        for name in defined_names(node):
            home.setdefault(name, section_of(node.lineno, starts))
    return source, tree, starts, home


def test_the_sections_come_in_order_and_the_docstring_lists_them():
    source, tree, starts, _ = layout()
    assert [title for _, title in starts] == list(SECTIONS)
    contents = ast.get_docstring(tree)
    positions = [contents.find(title) for title in SECTIONS]
    assert -1 not in positions and positions == sorted(positions), "the contents miss or reorder a section"
    last = tree.body[-1]
    assert isinstance(last, ast.If) and ast.unparse(last.test) == "__name__ == '__main__'"


def test_no_name_refers_to_a_section_below_its_own():
    _, tree, starts, home = layout()
    upward = []
    for node in tree.body:
        own = section_of(node.lineno, starts)
        for name in sorted(used_names(node)):
            if name in home and home[name] > own:
                where = SECTIONS[own] if own >= 0 else "preamble"
                upward.append("line %d (%s) uses %s from %s" % (node.lineno, where, name, SECTIONS[home[name]]))
    assert not upward, "\n".join(upward)


def test_the_record_rules_do_no_io():
    _, tree, starts, _ = layout()
    rules = SECTIONS.index("Record rules")
    touched = []
    for node in tree.body:
        if section_of(node.lineno, starts) == rules:
            touched += ["line %d uses %s" % (node.lineno, name) for name in sorted(used_names(node) & IO_NAMES)]
    assert not touched, "\n".join(touched)


def test_the_checker_sees_a_planted_upward_reference():
    # The test above must be able to fail: a rule that calls the parser is caught.
    source, _, _, _ = layout()
    planted = source.replace('def _is_note_id(value) -> bool:\n',
                             'def _is_note_id(value) -> bool:\n    _build_parser()\n', 1)
    assert planted != source
    tree = ast.parse(planted)
    starts = section_starts(planted)
    node = next(node for node in tree.body if getattr(node, "name", None) == "_is_note_id")
    home = {name: section_of(n.lineno, starts) for n in tree.body for name in defined_names(n)}
    assert home["_build_parser"] > section_of(node.lineno, starts) and "_build_parser" in used_names(node)


# Issue 28: notes.py stays in proportion to its task: 5,400 lines and 250,000 bytes with every
# feature of its batch in, docstrings and comments at most 18% of its bytes.
LINE_LIMIT, BYTE_LIMIT, COMMENTARY_SHARE = 5400, 250000, 0.18


def commentary_bytes(source: str) -> int:
    """The bytes of every comment and of every docstring (module, class, function)."""
    import io
    import tokenize

    lines = source.splitlines(True)
    total = sum(len(token.string.encode("utf-8")) for token in tokenize.generate_tokens(io.StringIO(source).readline)
                if token.type == tokenize.COMMENT)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                total += sum(len(line.encode("utf-8")) for line in lines[first.lineno - 1:first.end_lineno])
    return total


def test_notes_py_stays_within_its_size_and_commentary_limits():
    source = NOTES.read_text("utf-8")
    size = len(source.encode("utf-8"))
    assert len(source.splitlines()) <= LINE_LIMIT
    assert size <= BYTE_LIMIT
    assert commentary_bytes(source) <= COMMENTARY_SHARE * size


def test_the_commentary_measure_counts_comments_and_docstrings():
    sample = 'def f():\n    """Doc."""\n    return 1  # why\n'
    assert commentary_bytes(sample) == len('    """Doc."""\n') + len("# why")
