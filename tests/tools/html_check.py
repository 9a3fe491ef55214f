#!/usr/bin/env python3
"""html_check.py: load a REPORT.html in headless Chromium and check it.

Usage: html_check.py [--points POINTS_CSV] [--shot PNG] REPORT.html CHART...
(run under `unshare -n` by tests/integration/report_html.sh, so the browser
has no network at all).

Drives Chromium over its DevTools protocol on a pipe (--remote-debugging-
pipe: JSON messages ended by NUL on fds 3 and 4; stdlib only) and checks:
  - the page loaded from disk with the browser's network emulated offline,
    and asked for nothing but the file itself (Network.requestWillBeSent);
  - no console message, no exception, no log entry (a blocked fetch or a
    Content-Security-Policy violation is one) while it loads and runs;
  - the script ran to its end (html[data-js=ready]);
  - every CHART is a figure#chart-CHART whose SVG holds as many point marks
    as its data-points says, each with a <title> tooltip;
  - with --points: every ok row of points.csv (variant, C, repeat) is a row
    of the Points table;
  - clicking the first legend entry hides that series in every chart and a
    second click shows it again; a click on the C header sorts the table;
  - with JavaScript off the page still holds every point mark and table;
  - a screenshot of each chart (clipped to its figure, fonts play no part)
    shows the colours of the series: every chart region has pixels of
    gnuplot's first line colour, and is not blank.
Prints one "ok: ..." or "FAIL: ..." line per check; exit 1 on any failure.

Why the protocol and not `chromium --dump-dom` / `--screenshot`: those
cannot click, report console messages only as log lines on stderr, and
capture the viewport only (a page scrolled to a #fragment came out blank in
Chromium 156), while Page.captureScreenshot clips to each chart's own box.
"""
import csv
import base64
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

PURPLE = (0x94, 0x00, 0xD3)  # gnuplot's lc 1, the first series' colour
fails = 0


def say(ok, what):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    fails += 0 if ok else 1


def png_pixels(data):
    """(width, height, rows of RGB tuples) of an 8-bit RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w, h, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, inter = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and inter == 0, "unexpected PNG format"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    bpp = 4 if ctype == 6 else 3
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


class Browser:
    """Chromium with the DevTools protocol on fds 3 (commands) and 4 (replies)."""

    def __init__(self):
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()

        def fds():  # in the child: copies first, so neither end is clobbered
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        # a profile of its own: two checks at once never share (or attach to) one browser
        self.profile = tempfile.mkdtemp(prefix="html-check-")
        self.proc = subprocess.Popen(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--user-data-dir=" + self.profile,
             "--no-first-run", "--disable-extensions", "--window-size=1280,1000",
             "--remote-debugging-pipe", "about:blank"],
            pass_fds=(3, 4, to_r, from_w), preexec_fn=fds, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.buf, self.next_id, self.events, self.session = b"", 0, [], None

    def send(self, method, params=None, session=True, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = self.read()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
        raise RuntimeError("%s: no answer in %d s" % (method, timeout))

    def read(self):
        while b"\0" not in self.buf:
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buf += chunk
        one, self.buf = self.buf.split(b"\0", 1)
        m = json.loads(one)
        if "method" in m:
            self.events.append(m)
        return m

    def wait_event(self, name, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(e["method"] == name for e in self.events):
                return True
            self.read()
        return False

    def js(self, expr):
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError("js: %s" % r["exceptionDetails"].get("text"))
        return r["result"].get("value")

    def close(self):
        try:
            self.send("Browser.close", session=False, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def main():
    args, points, shot = sys.argv[1:], None, None
    while args and args[0].startswith("--"):
        opt, val, args = args[0], args[1], args[2:]
        if opt == "--points":
            points = val
        elif opt == "--shot":
            shot = val
    page, charts = os.path.abspath(args[0]), args[1:]
    url = "file://" + page
    br = Browser()
    try:
        tid = br.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        br.session = br.send("Target.attachToTarget", {"targetId": tid, "flatten": True},
                             session=False)["sessionId"]
        for d in ("Page", "Runtime", "Log", "Network"):
            br.send(d + ".enable")
        br.send("Network.emulateNetworkConditions", {"offline": True, "latency": 0,
                                                     "downloadThroughput": -1,
                                                     "uploadThroughput": -1})
        br.events.clear()
        br.send("Page.navigate", {"url": url})
        say(br.wait_event("Page.loadEventFired"), "the page loaded from disk")
        time.sleep(0.3)  # late console messages
        br.send("Runtime.evaluate", {"expression": "1"})
        asked = [e["params"]["request"]["url"] for e in br.events
                 if e["method"] == "Network.requestWillBeSent"]
        other = [u for u in asked if u != url]
        say(not other, "asked for nothing but the file (%s)" % (other or "ok"))
        noise = [e for e in br.events if e["method"] in
                 ("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded")]
        say(not noise, "no console message, exception or log entry (%s)" %
            ([json.dumps(e["params"])[:300] for e in noise] or "none"))
        say(br.js("document.documentElement.getAttribute('data-js')") == "ready",
            "the inline script ran to its end")
        figs = br.js("""Array.from(document.querySelectorAll('figure.chart')).map(f => ({
            id: f.id, want: +f.querySelector('svg').getAttribute('data-points'),
            marks: f.querySelectorAll('svg g.pt').length,
            titled: f.querySelectorAll('svg g.pt > * > title').length,
            legend: f.querySelectorAll('.legend li').length}))""")
        ids = [f["id"] for f in figs]
        for c in charts:
            f = next((f for f in figs if f["id"] == "chart-" + c), None)
            say(f is not None, "chart '%s' present (page has %s)" % (c, ids))
            if f:
                say(f["want"] > 0 and f["marks"] == f["want"] and f["titled"] == f["want"],
                    "chart '%s': %d point marks, %d with a tooltip, %d expected" %
                    (c, f["marks"], f["titled"], f["want"]))
        if points:
            rows = br.js("""(() => { const h = document.getElementById('sec-points');
                let t = h; while (t && t.tagName !== 'TABLE') t = t.nextElementSibling;
                return t ? Array.from(t.tBodies[0].rows).map(r =>
                    Array.from(r.cells).map(c => c.textContent.trim())) : null; })()""")
            say(rows is not None, "the Points table is there")
            have = {(r[0], r[1], r[3], r[4]) for r in rows or []}
            with open(points, newline="") as fh:
                ok_rows = [r for r in csv.DictReader(fh) if r["status"] == "ok"]
            missing = [r for r in ok_rows if (r["variant"], r["concurrency"], r["repeat"], "ok")
                       not in have]
            say(ok_rows and not missing, "every ok point (%d) is a row of the Points table%s" %
                (len(ok_rows), " (missing %s)" % missing[:3] if missing else ""))
            order = br.js("""(() => { const th = document.querySelector('#sec-points ~ table th:nth-child(2)');
                th.click(); const t = th.closest('table');
                return Array.from(t.tBodies[0].rows).map(r => +r.cells[1].textContent); })()""")
            say(order == sorted(order), "a click on the C header sorts the table (%s)" % order)
        toggled = br.js("""(() => { const li = document.querySelector('.legend li');
            if (!li) return null; const v = li.getAttribute('data-v');
            const all = Array.from(document.querySelectorAll('g.s')).filter(g => g.getAttribute('data-v') === v);
            const shown = () => all.filter(g => getComputedStyle(g).display !== 'none').length;
            const before = shown(); li.click(); const off = shown(); li.click();
            return [all.length, before, off, shown()]; })()""")
        say(toggled and toggled[0] > 1 and toggled[1] == toggled[0] and toggled[2] == 0 and
            toggled[3] == toggled[0],
            "a legend click hides the series in every chart, a second shows it (%s)" % toggled)
        for c in charts:
            rect = br.js("(() => { const r = document.getElementById('chart-%s')"
                         ".getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width,"
                         " r.height]; })()" % c)
            png = base64.b64decode(br.send("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": rect[0], "y": rect[1], "width": rect[2], "height": rect[3],
                         "scale": 1}})["data"])
            w, h, px = png_pixels(png)
            ink = sum(1 for row in px for p in row if min(p) < 200)
            series = sum(1 for row in px for p in row
                         if all(abs(p[i] - PURPLE[i]) < 40 for i in range(3)))
            say(w > 300 and h > 200 and ink > w * h // 100 and series > 40,
                "chart '%s' drawn: %dx%d px, %d inked, %d in the first series' colour" %
                (c, w, h, ink, series))
        # without JavaScript: the same charts and tables, only nothing to click
        br.send("Emulation.setScriptExecutionDisabled", {"value": True})
        br.events.clear()
        br.send("Page.reload")
        say(br.wait_event("Page.loadEventFired"), "reloaded with JavaScript off")
        nojs = br.js("""[document.documentElement.getAttribute('data-js'),
            document.querySelectorAll('figure.chart svg g.pt title').length,
            document.querySelectorAll('table tbody tr').length]""")
        say(nojs[0] is None and nojs[1] == sum(f["want"] for f in figs) and nojs[2] > 0,
            "without JavaScript (script not run: %s) every point mark (%d) and table row (%d) "
            "is still there" % (nojs[0] is None, nojs[1], nojs[2]))
        br.send("Emulation.setScriptExecutionDisabled", {"value": False})
        if shot:
            rect = br.js("(() => { const r = document.querySelector('.charts')"
                         ".getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width,"
                         " r.height]; })()")
            png = base64.b64decode(br.send("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": rect[0], "y": rect[1], "width": rect[2], "height": rect[3],
                         "scale": 1}})["data"])
            with open(shot, "wb") as fh:
                fh.write(png)
            print("screenshot: " + shot)
    except Exception as e:  # a protocol failure is a failed check, named
        say(False, "browser session: %s" % e)
    finally:
        br.close()
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
