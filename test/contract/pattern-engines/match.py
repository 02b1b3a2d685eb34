"""Reads {"patterns": [...], "probes": [...]} on stdin and prints, for each pattern, whether Python's re finds it in
each probe: JSON Schema's `pattern` is a search, as re.search is. Used by input-schema.test.ts."""
import json
import re
import sys

d = json.load(sys.stdin)
print(json.dumps([[re.search(p, s) is not None for s in d["probes"]] for p in d["patterns"]]))
