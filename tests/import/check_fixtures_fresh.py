"""The committed import fixtures are exactly what tests/import/fixtures/make.py makes: none
missing, none extra, none edited by hand (gzipped ones compared after decompression, since
another zlib may pack the same bytes differently)."""
import gzip
import os

from common import FIXTURES, check, done, fixture, fixture_maker

MADE_BY_HAND = {"make.py"}


def main():
    want = fixture_maker().fixtures()
    for name, data in sorted(want.items()):
        path = fixture(name)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            have = f.read()
        if name.endswith(".gz") and not name.startswith("broken/"):
            have, data = gzip.decompress(have), gzip.decompress(data)
        check(have == data, f"fixture {name} differs from what make.py makes")
    found = set()
    for top, dirs, files in os.walk(FIXTURES):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            found.add(os.path.relpath(os.path.join(top, f), FIXTURES))
    extra = sorted(found - set(want) - MADE_BY_HAND)
    check(not extra, f"files in the fixtures folder that make.py does not make: {extra}")
    done()


main()
