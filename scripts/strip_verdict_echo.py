"""Remove the ``Verdict(...)`` echo that check cells saved before ``Verdict`` hid its repr in Jupyter.

Usage: python scripts/strip_verdict_echo.py notebooks/*.ipynb
Only execute_result outputs whose sole text is a Verdict repr are removed; nothing is re-executed.
The file is rewritten only if it changes, byte for byte in nbformat's own layout.
"""
import json
import re
import sys

PAT = re.compile(r"^Verdict\('[0-9a-z.]+', passed=(True|False)\)$")


def strip(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    nb = json.loads(text)
    removed = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        keep = []
        for out in cell.get("outputs", []):
            plain = "".join(out.get("data", {}).get("text/plain", [])) if out.get("output_type") == "execute_result" else None
            if plain is not None and PAT.match(plain.strip()) and set(out["data"]) == {"text/plain"}:
                removed += 1
                continue
            keep.append(out)
        cell["outputs"] = keep
    if removed:
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return removed


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(p, strip(p))
