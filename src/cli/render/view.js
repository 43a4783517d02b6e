// vramtap view: draws the page's embedded data (the <script type="application/json"> block)
// as SVG. No network, no libraries: the page's Content-Security-Policy allows this script only.
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const data = JSON.parse(document.getElementById("vt-data").textContent);
  const cats = data.categories;
  const app = document.getElementById("app");

  function el(tag, attrs, text) {
    const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4))
                                     : document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function add(parent, tag, attrs, text) {
    const e = el(tag, attrs, text);
    parent.appendChild(e);
    return e;
  }
  // The units PyTorch prints, as `vramtap report` does.
  function bytes(b) {
    const units = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    const sign = b < 0 ? "-" : "";
    let v = Math.abs(b);
    if (v < 1024) return sign + v + " B";
    v /= 1024;
    let u = 0;
    while (v >= 1024 && u + 1 < units.length) { v /= 1024; u++; }
    return sign + v.toFixed(2) + " " + units[u];
  }
  // A recording without timestamps (some PyTorch memory snapshots) was imported with its events
  // in their order, one microsecond apart: a time there is an event's place, never a duration.
  const untimed = !!(data.report.import && data.report.import.times_recorded === false);
  function secs(t) {
    if (untimed) return "event " + Math.round(t * 1e6);
    return t < 1 ? (t * 1000).toFixed(3) + " ms" : t.toFixed(3) + " s";
  }
  function when(phase, step) {
    return phase ? phase + " of step " + step : "step " + step;
  }

  function header() {
    const r = data.report;
    add(app, "h1", {}, "vramtap — " + (r.prog || "?") + (r.pid !== null ? " (pid " + r.pid + ")" : ""));
    const p = add(app, "p", {class: "meta"});
    p.textContent = data.file + " · " + r.kind + " snapshot · " + r.steps + " steps" +
        (untimed ? "" : " · " + secs(r.duration_s || 0)) +
        (r.command && r.command.length ? " · " + r.command.join(" ") : "");
    if (untimed)
      add(app, "p", {class: "note untimed"}, "The recording has no timestamps: along the charts " +
          "its events are drawn in their order, evenly spaced, not in time.");
    if (!r.phase_markers)
      add(app, "p", {class: "note"}, "No phase markers in this run: every byte is unattributed.");
    if (r.lower_bound)
      add(app, "p", {class: "note"}, r.dropped_events + " events were dropped: figures are lower bounds.");
    const h = data.history;
    if (data.history_unused)
      add(app, "p", {class: "note"}, "The allocation history was set aside: " + data.history_unused + ".");
    else if (!h)
      add(app, "p", {class: "note"}, "This snapshot has no allocation history: the chart shows the " +
          "per-phase timeline only (live bytes at each phase's start, end and highest).");
    else if (h.dropped)
      add(app, "p", {class: "note"}, "History: " + h.dropped + " events past the cap of " +
          h.max_events + " were not kept.");
  }

  // What the pictures stack: the categories (flame graph: stacks), or the device's module groups
  // (flame graph: the module tree). Each key has a label, a colour and the attribute naming it.
  let by = data.by;
  function keysOf(dev) {
    if (by !== "module") return cats.map(function (c) { return {attr: "data-category", key: c.key, label: c.label, color: c.color}; });
    return dev.module_groups.map(function (g) { return {attr: "data-group", key: g.label, label: g.label, color: g.color}; });
  }
  function columnsOf(w) { return by === "module" ? w.groups : w.cats; }

  function legend(parent, keys) {
    const l = add(parent, "div", {class: "legend"});
    keys.forEach(function (c) {
      const s = add(l, "span", {class: "key"});
      const sw = add(s, "svg:svg", {width: 12, height: 12});
      add(sw, "svg:rect", {width: 12, height: 12, fill: c.color});
      s.appendChild(document.createTextNode(" " + c.label));
    });
  }

  // --- the chart: live bytes over time, stacked by category or module group ----------------
  function chart(parent, dev, keys) {
    const W = 1000, H = 320, L = 70, R = 10, T = 16, B = 28;
    const box = add(parent, "div", {class: "chart"});
    const bar = add(box, "div", {class: "zoom"});
    const svg = add(box, "svg:svg", {class: "vt-chart", "data-device": dev.device,
                                     viewBox: "0 0 " + W + " " + H, width: W, height: H});
    const tip = add(box, "div", {class: "tip hidden"});
    let x0 = 0, x1 = Math.max(data.end_s, 1e-9);
    let ymax = dev.peak_bytes;
    dev.timeline.forEach(function (s) { ymax = Math.max(ymax, s.live_max); });
    dev.windows.forEach(function (w) { ymax = Math.max(ymax, w.max_total); });
    ymax = ymax > 0 ? ymax * 1.08 : 1;

    function X(t) { return L + (t - x0) / (x1 - x0) * (W - L - R); }
    function Y(b) { return T + (1 - b / ymax) * (H - T - B); }

    const gBands = add(svg, "svg:g", {class: "bands"});
    const gSummary = add(svg, "svg:g", {class: "summary"});
    const gAreas = add(svg, "svg:g", {class: "areas"});
    const paths = keys.map(function (c) {
      const a = {class: "vt-area", fill: c.color, stroke: "none"};
      a[c.attr] = c.key;
      return add(gAreas, "svg:path", a);
    });
    const gAxes = add(svg, "svg:g", {class: "axes"});
    const gMarks = add(svg, "svg:g", {class: "marks"});
    const cursor = add(svg, "svg:line", {class: "cursor hidden", y1: T, y2: H - B});

    function draw() {
      [gBands, gSummary, gAxes, gMarks].forEach(function (g) { g.textContent = ""; });
      const clip = function (t) { return Math.min(Math.max(t, x0), x1); };
      // phase bands and step ticks, from the per-phase timeline
      dev.timeline.forEach(function (s) {
        const e = s.end_s === null ? data.end_s : s.end_s;
        if (e < x0 || s.start_s > x1) return;
        add(gBands, "svg:rect", {class: "band " + s.phase, x: X(clip(s.start_s)), y: T,
                                 width: Math.max(X(clip(e)) - X(clip(s.start_s)), 0.5),
                                 height: H - T - B});
        if (s.phase === "optimizer" && s.end_s !== null && e >= x0 && e <= x1) {
          add(gBands, "svg:line", {class: "tick", x1: X(e), x2: X(e), y1: H - B, y2: H - B + 6});
          // the axis' own labels sit at both ends
          if (X(e) > L + 50 && X(e) < W - R - 70)
            add(gBands, "svg:text", {class: "ticklabel", x: X(e), y: H - 4}, "step " + (s.step + 1));
        }
      });
      // outside the history: each phase instance as a box from its start to its end, up to its
      // highest — a summary, not a curve
      dev.timeline.forEach(function (s) {
        const e = s.end_s === null ? data.end_s : s.end_s;
        if (e < x0 || s.start_s > x1 || s.live_max < 0) return;
        if (dev.windows.some(function (w) { return w.exact && s.start_s >= w.start_s && e <= w.end_s; }))
          return;
        const r = add(gSummary, "svg:rect", {class: "phase-summary", x: X(clip(s.start_s)),
                                             y: Y(s.live_max),
                                             width: Math.max(X(clip(e)) - X(clip(s.start_s)), 0.5),
                                             height: Y(0) - Y(s.live_max)});
        add(r, "svg:title", {}, s.phase + " of step " + s.step + " (no history here): start " +
            bytes(s.live_start) + ", end " + bytes(s.live_end) + ", highest " + bytes(s.live_max));
      });
      // the exact history: stacked areas, held flat between events
      const d = keys.map(function () { return []; });
      dev.windows.forEach(function (w) {
        if (!w.exact || w.end_s < x0 || w.start_s > x1) return;
        let i0 = 0;
        while (i0 + 1 < w.t.length && w.t[i0 + 1] <= x0) i0++;
        let i1 = i0;
        while (i1 + 1 < w.t.length && w.t[i1 + 1] <= x1) i1++;
        const below = w.t.map(function () { return 0; });
        keys.forEach(function (c, k) {
          const v = columnsOf(w)[k];
          const top = [], bot = [];
          for (let i = i0; i <= i1; i++) {
            const xa = X(Math.max(w.t[i], x0));
            const xb = X(i < i1 ? w.t[i + 1] : Math.min(w.end_s, x1));
            top.push([xa, Y(below[i] + v[i])], [xb, Y(below[i] + v[i])]);
            bot.push([xa, Y(below[i])], [xb, Y(below[i])]);
            below[i] += v[i];
          }
          if (!top.length || !v.slice(i0, i1 + 1).some(function (b) { return b > 0; })) return;
          const pts = top.concat(bot.reverse());
          d[k].push("M" + pts.map(function (p) { return p[0].toFixed(2) + "," + p[1].toFixed(2); })
                                .join("L") + "Z");
        });
      });
      paths.forEach(function (p, k) { p.setAttribute("d", d[k].join("")); });
      // axes
      add(gAxes, "svg:line", {class: "axis", x1: L, x2: W - R, y1: Y(0), y2: Y(0)});
      add(gAxes, "svg:line", {class: "axis", x1: L, x2: L, y1: T, y2: Y(0)});
      for (let i = 0; i <= 4; i++) {
        const b = ymax / 1.08 * i / 4;
        add(gAxes, "svg:text", {class: "ylabel", x: L - 4, y: Y(b) + 4}, bytes(Math.round(b)));
      }
      add(gAxes, "svg:text", {class: "xlabel", x: L, y: H - 4}, secs(x0));
      add(gAxes, "svg:text", {class: "xlabel end", x: W - R, y: H - 4}, secs(x1));
      // the peak, with its bill
      if (dev.peak_time_s >= x0 && dev.peak_time_s <= x1) {
        const px = X(dev.peak_time_s), py = Y(dev.peak_bytes);
        add(gMarks, "svg:line", {class: "peakline", x1: px, x2: px, y1: py, y2: Y(0)});
        const c = add(gMarks, "svg:circle", {class: "peak", cx: px, cy: py, r: 4,
                                             "data-bytes": dev.peak_bytes});
        add(c, "svg:title", {}, "peak " + bytes(dev.peak_bytes));
        const lines = ["peak " + bytes(dev.peak_bytes) + " · " + when(dev.peak_phase, dev.peak_step)];
        // in a post-mortem the bill is what was live at the failure, not at the peak
        const atPeak = by === "module" ? dev.module_groups.map(function (g) { return g.peak_bytes; }) : dev.bill;
        if (data.report.kind !== "oom")
          keys.forEach(function (k, i) {
            if (atPeak[i]) lines.push(k.label + " " + bytes(atPeak[i]));
          });
        const left = px > W * 0.7;
        const t = add(gMarks, "svg:text", {class: "peaklabel", x: px + (left ? -8 : 8),
                                           y: Math.max(py + 4, T + 10),
                                           "text-anchor": left ? "end" : "start"});
        lines.forEach(function (s, i) {
          add(t, "svg:tspan", {x: px + (left ? -8 : 8), dy: i ? 13 : 0}, s);
        });
      }
      (data.report.oom_events || []).concat(data.report.oom ? [data.report.oom] : []).forEach(function (o) {
        if (o.device !== dev.device || o.time_s < x0 || o.time_s > x1) return;
        const l = add(gMarks, "svg:line", {class: "oomline", x1: X(o.time_s), x2: X(o.time_s),
                                           y1: T, y2: Y(0)});
        add(l, "svg:title", {}, "out of memory: " + bytes(o.size) + " asked");
      });
    }

    // hover: the history's moment under the pointer, or the phase instance there
    svg.addEventListener("mousemove", function (ev) {
      const r = svg.getBoundingClientRect();
      const sx = (ev.clientX - r.left) * W / r.width;
      if (sx < L || sx > W - R) return;
      const t = x0 + (sx - L) / (W - L - R) * (x1 - x0);
      const span = dev.timeline.find(function (s) {
        return t >= s.start_s && t <= (s.end_s === null ? data.end_s : s.end_s);
      });
      const lines = [secs(t) + (span ? " · " + span.phase + " · step " + span.step : "")];
      const w = dev.windows.find(function (w) { return w.exact && t >= w.start_s && t <= w.end_s; });
      if (w) {
        let i = 0;
        while (i + 1 < w.t.length && w.t[i + 1] <= t) i++;
        let total = 0;
        const cols = columnsOf(w);
        keys.forEach(function (c, k) {
          total += cols[k][i];
          if (cols[k][i]) lines.push(c.label + ": " + bytes(cols[k][i]));
        });
        lines.push("live: " + bytes(total));
      } else if (span) {
        lines.push("no history here; this phase: highest " + bytes(span.live_max));
      }
      tip.textContent = "";
      lines.forEach(function (s) { add(tip, "div", {}, s); });
      tip.classList.remove("hidden");
      tip.style.left = Math.min(ev.clientX - r.left + 12, r.width - 220) + "px";
      tip.style.top = (ev.clientY - r.top + 12) + "px";
      cursor.setAttribute("x1", sx);
      cursor.setAttribute("x2", sx);
      cursor.classList.remove("hidden");
    });
    svg.addEventListener("mouseleave", function () {
      tip.classList.add("hidden");
      cursor.classList.add("hidden");
    });

    // zoom: the whole run, each history window, each step of the timeline
    function button(label, a, b) {
      const e = add(bar, "button", {type: "button"}, label);
      e.addEventListener("click", function () { x0 = a; x1 = Math.max(b, a + 1e-9); draw(); });
    }
    button("whole run", 0, Math.max(data.end_s, 1e-9));
    dev.windows.forEach(function (w) {
      button(w.label, w.start_s, w.end_s);
    });
    const steps = {};
    dev.timeline.forEach(function (s) {
      const e = s.end_s === null ? data.end_s : s.end_s;
      const k = s.step;
      steps[k] = steps[k] ? [Math.min(steps[k][0], s.start_s), Math.max(steps[k][1], e)] : [s.start_s, e];
    });
    Object.keys(steps).slice(0, 64).forEach(function (k) {
      button("step " + k, steps[k][0], steps[k][1]);
    });
    draw();
    return svg;
  }

  // --- the flame graph (icicle) of the bytes live at the peak, by stack or module path ------
  function flame(parent, dev, tree) {
    const W = 1000, RH = 18;
    let depth = 0;
    (function walk(n, d) { depth = Math.max(depth, d); (n.children || []).forEach(function (c) { walk(c, d + 1); }); })(tree, 1);
    const svg = add(parent, "svg:svg", {class: "vt-flame", "data-device": dev.device,
                                        viewBox: "0 0 " + W + " " + depth * RH, width: W,
                                        height: depth * RH});
    function dominant(n) {
      let best = 0;
      n.cats.forEach(function (b, k) { if (b > n.cats[best]) best = k; });
      return best;
    }
    function draw(root) {
      svg.textContent = "";
      (function place(n, x, w, d) {
        if (w < 0.3) return;
        const g = add(svg, "svg:g", {class: "frame"});
        const a = {x: x, y: d * RH, width: Math.max(w - 0.5, 0.3), height: RH - 1,
                   fill: cats[dominant(n)].color, "data-bytes": n.value};
        if (n.path !== undefined) a["data-path"] = n.path === null ? "(outside modules)" : n.path;
        const r = add(g, "svg:rect", a);
        add(g, "svg:title", {}, (n.path || n.name) + " — " + bytes(n.value) +
            (n.saved ? "\n  saved for backward: " + bytes(n.saved) : "") +
            n.cats.map(function (b, k) { return b ? "\n  " + cats[k].label + ": " + bytes(b) : ""; }).join(""));
        if (w > 40)
          add(g, "svg:text", {x: x + 3, y: d * RH + RH - 5},
              n.name.length * 6.5 > w - 6 ? n.name.slice(0, Math.max(Math.floor((w - 6) / 6.5) - 1, 1)) + "…" : n.name);
        r.addEventListener("click", function () { draw(n === root && n.parent ? n.parent : n); });
        let cx = x;
        (n.children || []).forEach(function (c) {
          const cw = n.value ? w * c.value / n.value : 0;
          place(c, cx, cw, d + 1);
          cx += cw;
        });
      })(root, 0, W, 0);
    }
    (function link(n) { (n.children || []).forEach(function (c) { c.parent = n; link(c); }); })(tree);
    draw(tree);
  }

  // --- tables ------------------------------------------------------------------------------
  function table(parent, head, rows) {
    const t = add(parent, "table");
    const tr = add(add(t, "thead"), "tr");
    head.forEach(function (h) { add(tr, "th", {}, h); });
    const tb = add(t, "tbody");
    rows.forEach(function (r) {
      const row = add(tb, "tr");
      r.forEach(function (c) {
        if (c && typeof c === "object") add(row, "td", c.attrs || {}, c.text);
        else add(row, "td", {}, c);
      });
    });
    return t;
  }
  function billTable(parent, dev, live) {
    const rows = [];
    cats.forEach(function (c, k) {
      if (!dev.bill[k]) return;
      rows.push([c.label, {text: bytes(dev.bill[k]), attrs: {class: "num", "data-bytes": dev.bill[k], "data-category": c.key}},
                 {text: String(dev.bill_count[k]), attrs: {class: "num"}},
                 {text: (live ? 100 * dev.bill[k] / live : 0).toFixed(1) + " %", attrs: {class: "num"}}]);
    });
    rows.push(["total", {text: bytes(live), attrs: {class: "num", "data-bytes": live, "data-category": "total"}},
               "", ""]);
    table(parent, ["category", "bytes", "allocations", "share"], rows).classList.add("bill");
  }
  function sitesTable(parent, rdev) {
    const rows = [];
    for (const k in rdev.top_sites || {})
      rdev.top_sites[k].forEach(function (s) {
        rows.push([k.replace("_", " "), {text: bytes(s.bytes), attrs: {class: "num", "data-bytes": s.bytes}},
                   {text: String(s.count), attrs: {class: "num"}}, s.label]);
      });
    rows.sort(function (a, b) { return b[1].attrs["data-bytes"] - a[1].attrs["data-bytes"]; });
    table(parent, ["category", "bytes", "allocations", "site"], rows).classList.add("sites");
  }
  // the report's rows by module path, as `vramtap report --modules all` prints them
  function modulesTable(parent, rdev) {
    const rows = (rdev.modules || []).filter(function (m) { return m.bytes; }).map(function (m) {
      const path = m.path === null ? "(outside modules)" : m.path;
      return [path, {text: bytes(m.bytes), attrs: {class: "num", "data-bytes": m.bytes, "data-path": path}},
              {text: String(m.count), attrs: {class: "num"}},
              {text: bytes(m.saved_for_backward), attrs: {class: "num"}},
              {text: bytes(m.recomputed), attrs: {class: "num"}}];
    });
    table(parent, ["module path", "bytes", "allocations", "saved for backward", "recomputed"], rows)
        .classList.add("modules");
  }

  function postmortem(parent) {
    const o = data.report.oom;
    if (!o) return;
    const s = add(parent, "section", {class: "postmortem"});
    add(s, "h2", {}, "Out of memory on " + data.device_word + o.device);
    const free = o.free_bytes === null ? "unknown" : bytes(o.free_bytes);
    const total = o.total_bytes === null ? "unknown" : bytes(o.total_bytes);
    table(s, ["asked", "free", "total", "live (listed)", "outside vramtap's view", "when", "api"], [[
      {text: bytes(o.size), attrs: {class: "num", "data-bytes": o.size, id: "oom-size"}},
      {text: free, attrs: {class: "num", "data-bytes": o.free_bytes === null ? "" : o.free_bytes}},
      {text: total, attrs: {class: "num"}},
      {text: bytes(o.live_bytes), attrs: {class: "num", "data-bytes": o.live_bytes}},
      {text: o.outside_bytes === null ? "unknown" : bytes(o.outside_bytes), attrs: {class: "num"}},
      secs(o.time_s) + " · " + when(o.phase, o.step), o.api]]);
    if (o.stack) add(s, "p", {}, "asked by " + o.stack.label);
    add(s, "h3", {}, "What to try first");
    const ol = add(s, "ol");
    (o.advice || []).forEach(function (a) { add(ol, "li", {}, a); });
  }

  function device(parent, dev, rdev) {
    if (!dev.module_groups) by = "category";
    const keys = keysOf(dev);
    const s = add(parent, "section", {class: "device", "data-device": dev.device, "data-by": by});
    add(s, "h2", {}, data.device_word + dev.device + (dev.name ? " · " + dev.name : "") + " · peak " +
        bytes(dev.peak_bytes) + " at " + secs(dev.peak_time_s) + ", " + when(dev.peak_phase, dev.peak_step));
    legend(s, keys);
    chart(s, dev, keys);
    const notes = add(s, "ul", {class: "windows"});
    dev.windows.forEach(function (w) {
      add(notes, "li", {}, w.label + ": " + secs(w.start_s) + " to " + secs(w.end_s) + ", " +
          w.events + " events" + (w.exact ? "" : " (this device's live set at its start is not known: not drawn)") +
          (w.truncated ? " — cut short by the event cap" : "") +
          (w.points < w.events + 1 ? "; drawn with " + w.points + " points keeping every extremum" : ""));
    });
    add(notes, "li", {}, "grey boxes: phase instances outside the history, from the per-phase timeline (start, end and highest live bytes; not a curve)");
    add(s, "h3", {}, data.report.kind === "oom" ? "Live at the failure" : "The bill at the peak");
    billTable(s, dev, rdev.live_bytes);
    const at = data.report.kind === "oom" ? "failure" : "peak";
    if (by === "module") {
      add(s, "h3", {}, "By module at the " + at);
      modulesTable(s, rdev);
    } else {
      add(s, "h3", {}, "Top sites");
      sitesTable(s, rdev);
    }
    add(s, "h3", {}, "Bytes live at the " + at + " by " + (by === "module" ? "module path" : "stack") +
        " (click to zoom, click the top frame to zoom out)");
    flame(s, dev, by === "module" ? dev.module_flame : dev.flame);
  }

  // the devices, drawn again when the grouping changes
  const devices = el("div", {id: "devices"});
  function drawDevices() {
    const chosen = by;
    devices.textContent = "";
    data.devices.forEach(function (dev) {
      device(devices, dev, data.report.devices.find(function (d) { return d.device === dev.device; }));
      by = chosen;
    });
  }
  function groupBy() {
    if (!data.devices.some(function (d) { return d.module_groups; })) return;
    const bar = add(app, "div", {class: "groupby"}, "group by: ");
    [["category", "category and stack"], ["module", "module path"]].forEach(function (o) {
      const b = add(bar, "button", {type: "button", "data-by": o[0]}, o[1]);
      if (by === o[0]) b.classList.add("selected");
      b.addEventListener("click", function () {
        by = o[0];
        bar.querySelectorAll("button").forEach(function (e) { e.classList.toggle("selected", e === b); });
        drawDevices();
      });
    });
  }

  header();
  postmortem(app);
  groupBy();
  app.appendChild(devices);
  drawDevices();
  if (!data.devices.length) add(app, "p", {}, "No device memory was allocated.");
  document.documentElement.setAttribute("data-rendered", "true");
})();
