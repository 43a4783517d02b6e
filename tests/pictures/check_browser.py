#!/usr/bin/python3
"""The pages of `vramtap view` in a real browser (Debian's chromium, headless): the simulated
training run, its post-mortem, an imported Kineto trace and an imported memory-snapshot pickle.
Each page must render (data-rendered="true" on the root) with no console message (errors and
Content-Security-Policy violations are console messages) and no network request made for the
page (chromium's net log, recorded with every request sent to a dead proxy); each device's
chart is an <svg> with one <path> per category; the bill table holds the report's exact
figures. A screenshot of each page is kept beside this test's build folder."""
import html.parser
import json
import os
import shutil
import subprocess
import sys

from common import (CATS, ENV, check, cli, expect, finish, imported, page_data, report,
                    report_categories, simulated, tmpdir)

CHROMIUM = shutil.which("chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--no-default-browser-check", "--disable-extensions", "--disable-sync",
         "--disable-background-networking", "--disable-component-update",
         "--disable-default-apps", "--disable-domain-reliability", "--hide-scrollbars",
         "--proxy-server=127.0.0.1:9", "--enable-logging=stderr", "--v=0",
         "--window-size=1100,1400"]


class Dom(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.root = None
        self.charts = {}  # device -> [category of each path]
        self.cells = {}   # (device, category) -> data-bytes of the bill table
        self.oom_size = None
        self._device = None
        self._chart = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.root = a
        if tag == "section" and "device" in (a.get("class") or "").split():
            self._device = int(a["data-device"])
        if tag == "svg" and a.get("class") == "vt-chart":
            self._chart = int(a["data-device"])
            self.charts[self._chart] = []
        if tag == "svg" and a.get("class") != "vt-chart":
            self._chart = None
        if tag == "path" and self._chart is not None:
            self.charts[self._chart].append((a.get("data-category"), a.get("d") or ""))
        if tag == "td" and a.get("data-category") and self._device is not None:
            self.cells[(self._device, a["data-category"])] = int(a["data-bytes"])
        if tag == "td" and a.get("id") == "oom-size":
            self.oom_size = int(a["data-bytes"])


def page_requests(netlog):
    """URLs the page asked for: requests made on behalf of a file:// document."""
    urls = []
    with open(netlog) as f:
        for line in f:
            line = line.strip().rstrip(",")
            if '"url"' not in line or "file://" not in line:
                continue
            try:
                e = json.loads(line)
            except ValueError:
                continue
            p = e.get("params", {})
            if "file://" in str(p.get("network_isolation_key", "")):
                urls.append(p.get("url"))
    return urls


def browse(name, snap_path, out, artefacts):
    page = os.path.join(out, name + ".html")
    cli("view", snap_path, "-o", page)
    shot = os.path.join(artefacts, name + ".png")
    netlog = os.path.join(out, name + ".netlog")
    p = subprocess.run([CHROMIUM, *FLAGS, "--user-data-dir=" + os.path.join(out, "profile-" + name),
                        "--log-net-log=" + netlog, "--screenshot=" + shot, "--dump-dom",
                        "file://" + page], capture_output=True, text=True, timeout=120)
    expect(p.returncode, 0, name + ": chromium exit status\n" + p.stderr[-2000:])
    console = [l for l in p.stderr.splitlines() if ":CONSOLE" in l]
    expect(console, [], name + ": console messages")
    expect(page_requests(netlog), [], name + ": network requests")
    check(os.path.exists(shot) and os.path.getsize(shot) > 20000, name + ": screenshot " + shot)
    dom = Dom()
    dom.feed(p.stdout)
    expect((dom.root or {}).get("data-rendered"), "true", name + ": rendered")
    data, rep = page_data(page), report(snap_path)
    for dev in data["devices"]:
        d = dev["device"]
        paths = dom.charts.get(d, [])
        expect([c for c, _ in paths], CATS, "%s cuda:%d: one path per category" % (name, d))
        rdev = next(x for x in rep["devices"] if x["device"] == d)
        bill = report_categories(rdev)
        want = {c: b for c, b in zip(CATS, bill) if b}
        want["total"] = rdev["live_bytes"]
        got = {c: b for (dd, c), b in dom.cells.items() if dd == d}
        expect(got, want, "%s cuda:%d: the bill table" % (name, d))
        drawn = [c for c, path in paths if path]
        for w in dev["windows"]:
            if w["exact"]:
                held = [c for k, c in enumerate(CATS) if any(w["cats"][k])]
                expect(drawn, held, "%s cuda:%d: categories drawn" % (name, d))
    return dom


def main():
    if not CHROMIUM:
        print("skip: chromium is not installed (scripts/deps.sh installs it)")
        sys.exit(77)
    artefacts = os.path.join(ENV.get("VT_ARTEFACTS", tmpdir()), "screenshots")
    os.makedirs(artefacts, exist_ok=True)
    out = tmpdir()
    run = simulated(os.path.join(out, "run") + "/" if os.makedirs(os.path.join(out, "run")) is None else out)
    browse("training-run", run[0], out, artefacts)
    os.makedirs(os.path.join(out, "oom"))
    pm = [s for s in simulated(os.path.join(out, "oom"), ("--batch", "4"),
                               {"STANDIN_CAPACITY": str(40 << 20)}, want_exit=1) if ".oom" in s]
    dom = browse("post-mortem", pm[0], out, artefacts)
    expect(dom.oom_size, 4 << 20, "post-mortem: the failed request on the page")
    browse("kineto-import", imported("synthetic.pt.trace.json", out), out, artefacts)
    browse("pickle-import", imported("synthetic.pickle", out), out, artefacts)
    print("screenshots in " + artefacts)


if __name__ == "__main__":
    main()
    finish()
