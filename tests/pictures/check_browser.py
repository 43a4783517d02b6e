#!/usr/bin/python3
"""The pages of `vramtap view` in a real browser (Debian's chromium, headless): the simulated
training run, its post-mortem, an imported Kineto trace and an imported memory-snapshot pickle.
Each page must render (data-rendered="true" on the root) with no console message (errors and
Content-Security-Policy violations are console messages) and no network request made for the
page (chromium's net log, recorded with every request sent to a dead proxy); each device's
chart is an <svg> with one <path> per category; the bill table holds the report's exact
figures. A screenshot of each page is kept beside this test's build folder. On the training
run's page, real mouse input (the DevTools protocol over a pipe, no port) zooms to a step and
hovers inside it: the axis then spans that step and the hover box shows the figures of the
moment under the pointer. The run with module paths opens grouped by module: one area per
module group, the peak's label, the table and the flame graph by module path holding the
report's bytes per path; its "group by" buttons switch to categories and stacks and back."""
import fcntl
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import time

from common import (CATS, ENV, check, cli, expect, finish, imported, load, page_data, report,
                    report_categories, simulated, tmpdir, untimed_pickle)

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
        self.charts = {}  # device -> [(category or module group, d) of each path]
        self.flame_paths = {}  # module path -> data-bytes of its rectangle in the flame graph
        self.module_cells = {}  # module path -> data-bytes of its row in the table by module
        self.cells = {}   # (device, category) -> data-bytes of the bill table
        self.oom_size = None
        self.oom_row = []  # the post-mortem table's cells: [data-bytes or None, text]
        self._device = None
        self._chart = None
        self._postmortem = False
        self._cell = None

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
            self.charts[self._chart].append((a.get("data-category") or a.get("data-group"),
                                             a.get("d") or ""))
        if tag == "rect" and a.get("data-path"):
            self.flame_paths[a["data-path"]] = int(a["data-bytes"])
        if tag == "td" and a.get("data-path"):
            self.module_cells[a["data-path"]] = int(a["data-bytes"])
        if tag == "td" and a.get("data-category") and self._device is not None:
            self.cells[(self._device, a["data-category"])] = int(a["data-bytes"])
        if tag == "td" and a.get("id") == "oom-size":
            self.oom_size = int(a["data-bytes"])
        if tag == "section":
            self._postmortem = "postmortem" in (a.get("class") or "").split()
        if tag == "td" and self._postmortem:
            self._cell = [int(a["data-bytes"]) if a.get("data-bytes") else None, ""]
            self.oom_row.append(self._cell)

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data


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
    dom = render(name, page, out, artefacts)
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


def render(name, page, out, artefacts):
    """The page in chromium: rendered, no console message, no request; its DOM."""
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
    dom.html = p.stdout
    expect((dom.root or {}).get("data-rendered"), "true", name + ": rendered")
    return dom


class Browser:
    """chromium driven through the DevTools protocol on --remote-debugging-pipe (fds 3 and 4):
    no port is opened."""

    def __init__(self, profile):
        to_browser, self.w = os.pipe()
        self.r, from_browser = os.pipe()
        # above the fds the child is given, so that the dup2 below cannot clobber them
        to_browser, from_browser = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in
                                    (to_browser, from_browser))

        def fds():
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self.p = subprocess.Popen([CHROMIUM, *FLAGS, "--user-data-dir=" + profile,
                                   "--remote-debugging-pipe", "about:blank"],
                                  preexec_fn=fds, pass_fds=(3, 4, to_browser, from_browser),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_browser)
        os.close(from_browser)
        self.buf, self.n, self.session = b"", 0, None

    def call(self, method, **params):
        self.n += 1
        msg = {"id": self.n, "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buf:
                chunk = os.read(self.r, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self.buf += chunk
            line, self.buf = self.buf.split(b"\0", 1)
            reply = json.loads(line)
            if reply.get("id") == self.n:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply["result"]

    def open(self, url):
        target = self.call("Target.createTarget", url=url)["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        for _ in range(200):
            if self.js("document.documentElement.dataset.rendered") == "true":
                return True
            time.sleep(0.05)
        return False

    def js(self, expr):
        return self.call("Runtime.evaluate", expression=expr, returnByValue=True)[
            "result"].get("value")

    def mouse(self, kind, x, y):
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                  clickCount=1 if kind != "mouseMoved" else 0)

    def close(self):
        os.close(self.w)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        os.close(self.r)


def js_bytes(b):
    """The page's byte figures (view.js: bytes())."""
    if abs(b) < 1024:
        return "%d B" % b
    v, u = abs(b) / 1024, 0
    while v >= 1024 and u < 4:
        v, u = v / 1024, u + 1
    return "%s%.2f %s" % ("-" if b < 0 else "", v, ["KiB", "MiB", "GiB", "TiB", "PiB"][u])


def js_secs(t):
    return "%.3f ms" % (t * 1000) if t < 1 else "%.3f s" % t


def flame_zoom(b, dev):
    """A click on the biggest frame under the icicle's root makes it the root (it spans the
    whole width with its bytes); a click on that root goes back up."""
    sel = 'document.querySelector(\'svg.vt-flame[data-device="0"]\')'
    frames = ("[...%s.querySelectorAll('g.frame')].map(g=>{const r=g.querySelector('rect');"
              "const b=r.getBoundingClientRect();return [+r.getAttribute('data-bytes'),"
              "g.querySelector('title').textContent.split(' — ')[0],+r.getAttribute('x'),"
              "+r.getAttribute('y'),b.left+b.width/2,b.top+b.height/2];})" % sel)
    root = dev["flame"]
    big = max(root["children"], key=lambda c: c["value"])
    shown = b.js(frames)
    target = next((f for f in shown if f[3] > 0 and f[1] == big["name"] and f[0] == big["value"]),
                  None)
    check(target is not None, "input: the icicle draws %r under its root" % big["name"])
    if target is None:
        return
    b.mouse("mousePressed", target[4], target[5])
    b.mouse("mouseReleased", target[4], target[5])
    shown = b.js(frames)
    expect(shown[0][:4], [big["value"], big["name"], 0, 0], "input: the clicked frame is the root")
    under = sorted((f[1], f[0]) for f in shown if f[3] == shown[1][3]) if len(shown) > 1 else []
    expect(under, sorted((c["name"], c["value"]) for c in big.get("children", [])
                         if c["value"] * 1000 / big["value"] >= 0.3),
           "input: its children under it")
    b.mouse("mousePressed", shown[0][4], shown[0][5])
    b.mouse("mouseReleased", shown[0][4], shown[0][5])
    expect(b.js(frames)[0][:2], [root["value"], root["name"]], "input: a click on the root goes up")


def zoom_and_hover(page, out):
    """Clicks device 0's "step 1" button, then hovers halfway between the two points of the
    history furthest apart within that step."""
    data = page_data(page)
    dev = data["devices"][0]
    spans = [s for s in dev["timeline"] if s["step"] == 1]
    x0 = min(s["start_s"] for s in spans)
    x1 = max(data["end_s"] if s["end_s"] is None else s["end_s"] for s in spans)
    b = Browser(os.path.join(out, "profile-input"))
    try:
        check(b.open("file://" + page), "input: the page rendered")
        sel = 'document.querySelector(\'svg.vt-chart[data-device="0"]\')'
        button = b.js("(function(){const b=[...%s.parentNode.querySelectorAll('.zoom button')]"
                      ".find(e=>e.textContent==='step 1');const r=b.getBoundingClientRect();"
                      "return [r.left+r.width/2,r.top+r.height/2];})()" % sel)
        b.mouse("mousePressed", *button)
        b.mouse("mouseReleased", *button)
        labels = b.js("[...%s.querySelectorAll('text.xlabel')].map(e=>e.textContent)" % sel)
        expect(labels, [js_secs(x0), js_secs(x1)], "input: the axis after zooming to step 1")
        # the chart's geometry (view.js: W, L, R) and where it lies on the screen
        W, L, R = 1000, 70, 10
        rect = b.js("(function(){const r=%s.getBoundingClientRect();"
                    "return [r.left,r.top,r.width,r.height];})()" % sel)
        w = next(w for w in dev["windows"] if w["exact"] and w["start_s"] <= x0 and x1 <= w["end_s"])
        inside = [i for i in range(len(w["t"]) - 1) if x0 <= w["t"][i] and w["t"][i + 1] <= x1]
        i = max(inside, key=lambda i: w["t"][i + 1] - w["t"][i])
        t = (w["t"][i] + w["t"][i + 1]) / 2
        px = (w["t"][i + 1] - w["t"][i]) / (x1 - x0) * (W - L - R) * rect[2] / W
        check(px > 4, "input: %.1f pixels between the points hovered between" % px)
        x = rect[0] + (L + (t - x0) / (x1 - x0) * (W - L - R)) * rect[2] / W
        b.mouse("mouseMoved", x, rect[1] + rect[3] / 2)
        tip = b.js("[...%s.parentNode.querySelectorAll('.tip div')].map(e=>e.textContent)" % sel)
        span = next(s for s in dev["timeline"] if s["start_s"] <= t <= s["end_s"])
        want = [c["label"] + ": " + js_bytes(w["cats"][k][i])
                for k, c in enumerate(data["categories"]) if w["cats"][k][i]]
        want.append("live: " + js_bytes(sum(c[i] for c in w["cats"])))
        expect((tip or [""])[0].split(" · ")[1:], [span["phase"], "step %d" % span["step"]],
               "input: the hover box's phase and step")
        expect((tip or [])[1:], want, "input: the hover box's figures at %.6f s" % t)
        flame_zoom(b, dev)
    finally:
        b.close()


def browse_modules(out, artefacts):
    """The run with module paths, opened grouped by module, then switched by its buttons."""
    os.makedirs(os.path.join(out, "modules"))
    snap = simulated(os.path.join(out, "modules"), ("--batch", "4", "--steps", "3", "--modules"))[0]
    page = os.path.join(out, "by-module.html")
    cli("view", "--by", "module", snap, "-o", page)
    dom = render("by-module", page, out, artefacts)
    dev, rdev = page_data(page)["devices"][0], report(snap)["devices"][0]
    labels = [g["label"] for g in dev["module_groups"]]
    expect([c for c, _ in dom.charts.get(0, [])], labels, "by module: one area per group")
    rows = {("(outside modules)" if m["path"] is None else m["path"]): m["bytes"]
            for m in rdev["modules"] if m["bytes"]}
    expect(dom.flame_paths, rows, "by module: the flame graph's bytes per path")
    expect(dom.module_cells, rows, "by module: the table's bytes per path")
    peak = re.search(r'<text class="peaklabel"[^>]*>(.*?)</text>', dom.html)
    lines = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", peak.group(1) if peak else "")
    expect(lines[1:], ["%s %s" % (g["label"], js_bytes(g["peak_bytes"]))
                       for g in dev["module_groups"] if g["peak_bytes"]],
           "by module: the peak's label")
    b = Browser(os.path.join(out, "profile-modules"))
    chart = "[...document.querySelectorAll('svg.vt-chart path.vt-area')]"
    areas = chart + ".map(p=>p.getAttribute('data-category')||p.getAttribute('data-group'))"
    flame = "document.querySelectorAll('svg.vt-flame rect[data-path]').length"
    try:
        check(b.open("file://" + page), "by module: the page rendered")
        for by, want, nflame in (("category", CATS, 0), ("module", labels, len(rows))):
            at = b.js("(function(){const r=document.querySelector('.groupby button[data-by=%s]')"
                      ".getBoundingClientRect();return [r.left+r.width/2,r.top+r.height/2];})()"
                      % by)
            b.mouse("mousePressed", *at)
            b.mouse("mouseReleased", *at)
            expect(b.js(areas), want, "group by %s: the chart's areas" % by)
            expect(b.js(flame), nflame, "group by %s: flame rectangles by module path" % by)
    finally:
        b.close()


def main():
    if not CHROMIUM:
        print("skip: chromium is not installed (scripts/deps.sh installs it)")
        sys.exit(77)
    artefacts = os.path.join(ENV.get("VT_ARTEFACTS", tmpdir()), "screenshots")
    os.makedirs(artefacts, exist_ok=True)
    out = tmpdir()
    run = simulated(os.path.join(out, "run") + "/" if os.makedirs(os.path.join(out, "run")) is None else out)
    browse("training-run", run[0], out, artefacts)
    zoom_and_hover(os.path.join(out, "training-run.html"), out)
    os.makedirs(os.path.join(out, "oom"))
    pm = [s for s in simulated(os.path.join(out, "oom"), ("--batch", "4"),
                               {"STANDIN_CAPACITY": str(40 << 20)}, want_exit=1) if ".oom" in s]
    dom = browse("post-mortem", pm[0], out, artefacts)
    expect(dom.oom_size, 4 << 20, "post-mortem: the failed request on the page")
    # the stand-in's 40 MiB: what was free when 4 MiB were asked is what the live set left
    oom, live = load(pm[0])["oom"], report(pm[0])["oom"]["live_bytes"]
    expect([c[0] for c in dom.oom_row[:4]], [4 << 20, (40 << 20) - live, None, live],
           "post-mortem: asked, free, total and live on the page")
    expect([c[1] for c in dom.oom_row[2:]][:1] + [c[1] for c in dom.oom_row[5:]],
           ["40.00 MiB", "%s · %s of step %d" % (js_secs(oom["time_s"]), oom["phase"], oom["step"]),
            oom["api"]], "post-mortem: total, when and the call on the page")
    browse("kineto-import", imported("synthetic.pt.trace.json", out), out, artefacts)
    browse("pickle-import", imported("synthetic.pickle", out), out, artefacts)
    browse_untimed(out, artefacts)
    browse_modules(out, artefacts)
    print("screenshots in " + artefacts)


def browse_untimed(out, artefacts):
    """A memory snapshot without timestamps: its events are drawn in their order, and the page
    says so and shows no time."""
    dom = browse("untimed-pickle-import", untimed_pickle(out), out, artefacts)
    labels = re.findall(r'<text class="xlabel[^"]*"[^>]*>([^<]*)</text>', dom.html)
    check(labels and all(re.fullmatch(r"event \d+", l) for l in labels),
          "untimed pickle: the axis counts events %s" % labels)
    check("The recording has no timestamps" in dom.html
          and not re.search(r"\d (ms|s)\b", re.sub(r"<[^>]*>", " ", dom.html.split("<script")[0])),
          "untimed pickle: the page says so and shows no time")


if __name__ == "__main__":
    main()
    finish()
