"""The `search` tool's summary of grep's output: the first N matches, the total, the files with most.

Run by `harness.tools.retrieval.search` as `python3 -c <this file's text> OUT ERR RC CAP` with the
sandbox's python3, whatever its version: any Python 3, so no annotations (type comments for mypy),
no f-strings. Prints one JSON object.
"""

import collections
import json
import sys


def summary(out, err, rc, cap):
    # type: (str, str, int, int) -> dict[str, object]
    counts = collections.Counter()  # type: collections.Counter[str]
    first = []  # type: list[list[object]]
    total = 0
    with open(out, "rb") as f:
        for raw in f:
            raw_name, _, rest = raw.partition(b"\0")
            num, _, text = rest.partition(b":")
            name = raw_name.decode("utf-8", "replace")
            name = name[2:] if name.startswith("./") else name
            counts[name] += 1
            total += 1
            if len(first) < cap:
                shown = text.rstrip(b"\r\n").decode("utf-8", "replace")[:200]
                first.append([name, int(num) if num.isdigit() else 0, shown])
    with open(err, errors="replace") as f:
        errors = f.read()[-1500:]
    return {"rc": rc, "total": total, "nfiles": len(counts), "top": counts.most_common(8), "first": first,
            "err": errors}


if __name__ == "__main__":
    print(json.dumps(summary(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
