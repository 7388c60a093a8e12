#!/usr/bin/env python3
"""The layer check: no file under src/ imports from a layer above its own.

Layers, lowest first (a file's layer is its first folder under src/):
  engine < observe < bulkhead < {keyed, adaptive} < registry < integrations
keyed and adaptive are siblings: neither imports the other. Code paths are checked
(`crate::layer...` outside comments); doc links are not imports. src/lib.rs and src/bin/
stand above everything. Exits 1 naming each offending line.
"""
import os
import re
import sys

RANK = {"engine": 0, "observe": 1, "bulkhead": 2, "keyed": 3, "adaptive": 3,
        "registry": 4, "integrations": 5}
# The public re-exports at the crate root that lower layers may name in code, each with
# the layer that defines it.
ROOT_ITEMS = {
    "Bulkhead": "bulkhead", "BulkheadConfig": "bulkhead", "BulkheadConfigBuilder": "bulkhead",
    "ConfigError": "bulkhead", "BulkheadFull": "bulkhead", "Acquire": "bulkhead",
    "AcquireOwned": "bulkhead", "AcquireWithSleep": "bulkhead", "Drained": "bulkhead",
    "Outcome": "bulkhead", "OwnedPermit": "bulkhead", "Permit": "bulkhead",
    "timer": "engine", "model": "engine", "file": "integrations", "tower": "integrations",
    "metrics_export": "integrations", "BulkheadEvent": "observe", "BulkheadEventKind": "observe",
    "ListenerHandle": "observe", "BulkheadMetrics": "observe", "RejectReason": "observe",
    "BulkheadRegistry": "registry", "BulkheadRegistryBuilder": "registry",
    "BulkheadSpec": "registry", "RegistryError": "registry", "__private": "registry",
}
root = sys.argv[1] if len(sys.argv) > 1 else "src"
bad = []
for dirpath, _, files in os.walk(root):
    rel = os.path.relpath(dirpath, root).split(os.sep)
    layer = rel[0]
    if layer not in RANK:
        continue
    for name in files:
        if not name.endswith(".rs"):
            continue
        path = os.path.join(dirpath, name)
        for n, line in enumerate(open(path), 1):
            code = line.split("//", 1)[0]
            for m in re.finditer(r"crate::(\{[^}]*\}|[A-Za-z_]+)", code):
                targets = re.findall(r"[A-Za-z_]+", m.group(1)) if m.group(1).startswith("{") \
                    else [m.group(1)]
                for t in targets:
                    target = t if t in RANK else ROOT_ITEMS.get(t)
                    if target is None or target == layer:
                        continue
                    upward = RANK[target] > RANK[layer]
                    sibling = RANK[target] == RANK[layer]
                    if upward or sibling:
                        bad.append(f"{path}:{n}: layer '{layer}' imports '{t}' of layer "
                                   f"'{target}': {line.strip()}")
for b in bad:
    print(b)
if bad:
    print(f"{len(bad)} imports from a layer above (or beside) the file's own", file=sys.stderr)
    sys.exit(1)
print("layers: no file imports from a layer above its own")
