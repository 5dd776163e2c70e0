"""The host's process tree, read from /proc (Linux)."""

from __future__ import annotations

from pathlib import Path


def process_tree(root: int) -> set[int]:
    """`root` and its live descendants, from /proc (only `root` where there is no /proc)."""
    children: dict[int, list[int]] = {}
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        entries = []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue      # gone meanwhile
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return tree
